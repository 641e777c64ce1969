import Foundation

/// The server's database: every class's objects, the schema Parse infers from them, and the
/// writes of Parse Server's `RestWrite` — field-name checks, `__op` operators, schema type
/// checks, `createdAt` / `updatedAt` stamps.
///
/// An object is kept as `GET /classes/C/ID` shows it (with `objectId`, `createdAt` and
/// `updatedAt` as plain ISO strings), except that a `File` keeps only its `name`: the server
/// adds the `url` on the way out, as Parse does.
struct ClassStore {
    /// An object and its place in its class: a query without `order` answers in insertion order.
    struct Stored {
        var fields: [String: JSON]
        var sequence: Int
    }

    /// Which write ``ClassStore/write(_:_:body:checked:)`` makes.
    enum Write {
        /// A new object; `id` only for the dashboard (a client may not choose one).
        case create(id: String?)
        case update(String)
    }

    private(set) var classes: [String: [String: Stored]] = [:]
    /// Class → field → type (`String`, `Number`, `Date`, `Pointer<Customer>`, …), as Parse's
    /// `_SCHEMA` learns it from the first value written.
    private(set) var schema: [String: [String: String]] = [:]
    /// While set, every write stamps this time (ties on `updatedAt`, for keyset tests).
    var frozenClock: String?
    /// Classes whose class-level permissions refuse `addField`: a checked write of a field the
    /// schema lacks is refused with `119`, as Parse answers a client without the master key.
    var lockedSchemas: Set<String> = []
    private var sequence = 0

    static let reserved: Set<String> = ["objectId", "createdAt", "updatedAt"]

    // MARK: - Reading

    func object(_ className: String, _ id: String) -> [String: JSON]? { classes[className]?[id]?.fields }

    /// A class's objects in insertion order.
    func objects(_ className: String) -> [[String: JSON]] {
        (classes[className] ?? [:]).values.sorted { $0.sequence < $1.sequence }.map(\.fields)
    }

    /// The time a write now stamps, `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    func now() -> String { frozenClock ?? ParseDate.format(Date()) }

    // MARK: - Writing

    /// Stores a fixture's object as given: its own `objectId` and timestamps when it has them.
    mutating func seed(_ className: String, _ fields: [String: JSON]) {
        var fields = fields.mapValues(Self.stored)
        let stamp = now()
        let id = fields["objectId"]?.string ?? newID(className)
        fields["objectId"] = .string(id)
        fields["createdAt"] = fields["createdAt"].flatMap(Self.timestamp) ?? .string(stamp)
        fields["updatedAt"] = fields["updatedAt"].flatMap(Self.timestamp) ?? fields["createdAt"]
        for (key, value) in fields where !Self.reserved.contains(key) {
            if let type = Self.type(of: value, key: key), schema[className]?[key] == nil { schema[className, default: [:]][key] = type }
        }
        sequence += 1
        classes[className, default: [:]][id] = Stored(fields: fields, sequence: sequence)
    }

    /// Applies a create or an update as Parse Server does, and returns what it answers: `objectId`
    /// and `createdAt` for a create, `updatedAt` for an update, plus the resulting value of every
    /// field an `Increment`, `Add`, `AddUnique` or `Remove` changed.
    ///
    /// `checked` false is the dashboard (the master key): a chosen `objectId` is allowed, and bad
    /// names or types are stored rather than refused.
    mutating func write(_ className: String, _ write: Write, body: [String: JSON], checked: Bool = true) throws(ParseError) -> JSON {
        guard Self.isValidClassName(className) else { throw .invalidClassName(className) }
        var object: [String: JSON]
        var id: String
        switch write {
        case .create(let chosen):
            if checked, body["objectId"] != nil { throw .invalidKeyName("objectId is an invalid field name.") }
            object = [:]
            id = chosen ?? body["objectId"]?.string ?? newID(className)
        case .update(let existing):
            guard let stored = classes[className]?[existing] else { throw .objectNotFound() }
            object = stored.fields
            id = existing
        }
        var types = schema[className] ?? [:]
        var response: [String: JSON] = [:]
        for key in body.keys.sorted() where !Self.reserved.contains(key) {
            let value = body[key]!
            let path = key.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            if checked {
                let dotted = path.count > 1
                guard Self.isValidFieldName(path[0]), !dotted || !Self.isCreate(write), path.allSatisfy({ !$0.isEmpty }) else {
                    throw .invalidKeyName("Invalid field name: \(key).")
                }
                try Self.checkNestedKeys(value)
            }
            let current = Self.value(at: path, in: object)
            let (result, type, reported) = try Self.apply(value, to: current, key: path[0])
            // Schema: the top-level field's type; a dotted key writes into an Object.
            let fieldType = path.count > 1 ? "Object" : type
            if checked, fieldType != nil, types[path[0]] == nil, lockedSchemas.contains(className) {
                throw ParseError(119, "Permission denied for action addField on class \(className).")
            }
            if let fieldType {
                if let expected = types[path[0]], expected != fieldType {
                    if checked {
                        throw .incorrectType("schema mismatch for \(className).\(path[0]); expected \(expected) but got \(fieldType)")
                    }
                } else {
                    types[path[0]] = fieldType
                }
            }
            Self.set(result, at: path, in: &object)
            if reported { response[key] = result ?? .null }
        }
        let stamp = now()
        object["objectId"] = .string(id)
        object["updatedAt"] = .string(stamp)
        if Self.isCreate(write) {
            object["createdAt"] = .string(stamp)
            response["objectId"] = .string(id)
            response["createdAt"] = .string(stamp)
        } else {
            response["updatedAt"] = .string(stamp)
        }
        var place = classes[className]?[id]?.sequence ?? 0
        if place == 0 {
            sequence += 1
            place = sequence
        }
        classes[className, default: [:]][id] = Stored(fields: object, sequence: place)
        schema[className] = types
        return .object(response)
    }

    /// Deletes an object (Parse keeps no tombstone); false when there was none.
    @discardableResult
    mutating func delete(_ className: String, _ id: String) -> Bool {
        classes[className]?.removeValue(forKey: id) != nil
    }

    /// Deletes a field from the class's schema and from every object, as `PUT /schemas/C` with
    /// `{"__op":"Delete"}` does (the objects' `updatedAt` stay): the next value written gives the
    /// field its type again.
    mutating func dropField(_ className: String, _ field: String) {
        schema[className]?[field] = nil
        for id in classes[className]?.keys.map({ $0 }) ?? [] { classes[className]?[id]?.fields[field] = nil }
    }

    // MARK: - Rules of RestWrite

    /// Class names: alphanumeric and `_`, starting with a letter, or one of Parse's own classes.
    static func isValidClassName(_ name: String) -> Bool {
        ["_User", "_Role", "_Installation", "_Session"].contains(name) || isValidFieldName(name)
    }

    /// Field names: `^[A-Za-z][A-Za-z0-9_]*$`.
    static func isValidFieldName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, first.isASCII, first.properties.isAlphabetic else { return false }
        return name.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_") }
    }

    private static func isCreate(_ write: Write) -> Bool {
        if case .create = write { true } else { false }
    }

    /// Keys inside a value may not hold `$` or `.` (MongoDB's rule, which Parse passes on).
    private static func checkNestedKeys(_ value: JSON) throws(ParseError) {
        switch value {
        case .object(let members):
            for (key, member) in members {
                if key.contains("$") || key.contains(".") { throw .invalidNestedKey }
                try checkNestedKeys(member)
            }
        case .array(let values):
            for member in values { try checkNestedKeys(member) }
        default: break
        }
    }

    /// The new value of a field (nil: removed), the schema type it gives the field, and whether
    /// the answer reports it (the result of `Increment`, `Add`, `AddUnique` and `Remove`).
    private static func apply(_ value: JSON, to current: JSON?, key: String) throws(ParseError) -> (JSON?, String?, Bool) {
        guard let op = value["__op"]?.string else { return (stored(value), type(of: value, key: key), false) }
        switch op {
        case "Delete":
            return (nil, nil, false)
        case "Increment":
            guard let amount = value["amount"]?.number else { throw ParseError(107, "incrementing must provide a number") }
            return (.number((current?.number ?? 0) + amount), "Number", true)
        case "Add", "AddUnique", "Remove":
            guard let objects = value["objects"]?.array else {
                throw ParseError(107, op == "Remove" ? "objects to remove must be an array" : "objects to add must be an array")
            }
            var array = current?.array ?? []
            switch op {
            case "Add": array += objects
            case "AddUnique": for item in objects where !array.contains(where: { same($0, item) }) { array.append(item) }
            default: array.removeAll { item in objects.contains { same($0, item) } }
            }
            return (.array(array), "Array", true)
        default:
            throw .unsupportedOperator(op)
        }
    }

    /// Equality of array members for `AddUnique` / `Remove`: pointers by class and id.
    private static func same(_ a: JSON, _ b: JSON) -> Bool {
        if a.parseType == "Pointer", b.parseType == "Pointer" {
            return a["className"] == b["className"] && a["objectId"] == b["objectId"]
        }
        return a == b
    }

    /// A value as stored: a `File` without its `url`.
    static func stored(_ value: JSON) -> JSON {
        guard value.parseType == "File", var file = value.object else { return value }
        file["url"] = nil
        return .object(file)
    }

    /// A fixture's timestamp: a plain ISO string, or a `Date` wrapper unwrapped.
    private static func timestamp(_ value: JSON) -> JSON? {
        value.string.map(JSON.string) ?? value["iso"]
    }

    /// The schema type of a value; nil for `null`.
    static func type(of value: JSON, key: String) -> String? {
        switch value {
        case .null: return nil
        case .bool: return "Boolean"
        case .number: return "Number"
        case .string: return "String"
        case .array: return "Array"
        case .object:
            if key == "ACL" { return "ACL" }
            switch value.parseType {
            case "Pointer", "Relation": return "\(value.parseType!)<\(value["className"]?.string ?? "")>"
            case "Date", "File", "GeoPoint", "Polygon", "Bytes": return value.parseType
            default: return "Object"
            }
        }
    }

    /// The value at a dotted path (`address.city`).
    static func value(at path: [String], in object: [String: JSON]) -> JSON? {
        guard let first = path.first, let value = object[first] else { return nil }
        return path.count == 1 ? value : value.object.flatMap { Self.value(at: Array(path.dropFirst()), in: $0) }
    }

    private static func set(_ value: JSON?, at path: [String], in object: inout [String: JSON]) {
        guard path.count > 1 else {
            object[path[0]] = value
            return
        }
        var inner = object[path[0]]?.object ?? [:]
        set(value, at: Array(path.dropFirst()), in: &inner)
        object[path[0]] = .object(inner)
    }

    /// A new 10-character alphanumeric `objectId`, unused in the class.
    private func newID(_ className: String) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        while true {
            let id = String((0..<10).map { _ in alphabet.randomElement()! })
            if classes[className]?[id] == nil { return id }
        }
    }

    // MARK: - ACL

    /// Whether `user` (nil: no session) may read or write an object, by its `ACL` (none: public).
    /// Role entries are never granted: this server has no roles.
    static func allows(_ object: [String: JSON], user: String?, write: Bool) -> Bool {
        guard let acl = object["ACL"]?.object else { return true }
        let permission = write ? "write" : "read"
        if acl["*"]?[permission]?.bool == true { return true }
        if let user, acl[user]?[permission]?.bool == true { return true }
        return false
    }
}

/// Parse's timestamps: ISO 8601 in UTC with milliseconds.
enum ParseDate {
    static func format(_ date: Date) -> String {
        Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(date)
    }

    /// Milliseconds since 1970 of an ISO date (with or without fraction or offset, or a bare
    /// day, as JavaScript's `Date` reads them); nil when it is none.
    static func milliseconds(_ text: String) -> Int64? {
        let text = text.count == 10 ? text + "T00:00:00Z" : text
        guard
            let date = (try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text))
                ?? (try? Date.ISO8601FormatStyle().parse(text))
        else { return nil }
        return Int64((date.timeIntervalSince1970 * 1000).rounded())
    }
}
