import Foundation
import LoopbackSupport

/// A query of `GET /classes/C` (or the `keys` / `include` of a single-object GET), read from
/// its parameters as Parse Server's `ClassesRouter` reads them, and run over a class's objects
/// with MongoDB's semantics (the storage Parse Server is most often deployed on).
///
/// `where` supports equality (plain values, `Date` wrappers, `Pointer`s; an array field matches
/// when one of its members does) and `$lt $lte $gt $gte $ne $eq $in $nin $exists $all $regex
/// $or $and $nor`. Dates compare as dates: the top-level `createdAt` / `updatedAt` and every
/// `Date` wrapper; a plain string is a date only in an equality on `createdAt` / `updatedAt`
/// (in a comparison it stays a string, which never matches a date: use the wrapper). Values of
/// different types never compare. `objectId` is a string. Parse's other operators (`$select`,
/// `$inQuery`, `$relatedTo`, geo, `$text`) are refused with code 102.
struct ParseQuery {
    /// The parameters `GET /classes/C` accepts; any other is code 102.
    static let findParameters: Set<String> = [
        "where", "order", "limit", "skip", "keys", "excludeKeys", "include", "includeAll", "count", "readPreference",
        "includeReadPreference", "subqueryReadPreference", "hint", "explain", "comment", "redirectClassNameForKey",
    ]
    /// The parameters `GET /classes/C/ID` accepts; any other is `Improper encode of parameter`.
    static let getParameters: Set<String> = [
        "keys", "include", "excludeKeys", "readPreference", "includeReadPreference", "subqueryReadPreference",
    ]

    var predicate = Predicate.all([])
    var order: [(path: [String], descending: Bool)] = []
    var limit = 100
    var skip = 0
    var keys: [String]?
    var excludeKeys: [String] = []
    /// Dotted include paths, split (`include=a,b.c` → `[["a"], ["b", "c"]]`).
    var include: [[String]] = []
    /// `include=*` or `includeAll`: every pointer at the top.
    var includeAll = false
    var count = false

    /// A find's query. `maxLimit` clamps `limit` silently, as Parse Server's option does.
    init(find parameters: [String: JSON], maxLimit: Int?) throws(ParseError) {
        for key in parameters.keys.sorted() where !Self.findParameters.contains(key) {
            throw .invalidQuery("Invalid parameter for query: \(key)")
        }
        try readProjection(parameters)
        if let value = parameters["where"] {
            guard let constraint = value.object else { throw .invalidJSON }
            predicate = try Self.predicate(constraint)
        }
        if let value = parameters["order"] {
            let text = value.array.map { $0.compactMap(\.string).joined(separator: ",") } ?? value.string ?? ""
            for item in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !item.isEmpty {
                let descending = item.hasPrefix("-")
                let key = descending ? String(item.dropFirst()) : item
                if key == "$score" { continue }
                let path = key.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
                guard ClassStore.isValidFieldName(path[0]), path.allSatisfy({ !$0.isEmpty }) else {
                    throw .invalidKeyName("Invalid field name: \(key).")
                }
                order.append((path, descending))
            }
        }
        if let value = parameters["limit"] { limit = try Self.count(value, "limit") }
        if let maxLimit { limit = min(limit, maxLimit) }
        if let value = parameters["skip"] { skip = try Self.count(value, "skip") }
        count = parameters["count"]?.isTruthy ?? false
        if parameters["includeAll"]?.isTruthy == true { includeAll = true }
    }

    /// A single-object GET's query: only `keys`, `include` and `excludeKeys` (and read preferences).
    init(get parameters: [String: JSON]) throws(ParseError) {
        guard parameters.keys.allSatisfy(Self.getParameters.contains) else {
            throw .invalidQuery("Improper encode of parameter")
        }
        try readProjection(parameters)
    }

    private mutating func readProjection(_ parameters: [String: JSON]) throws(ParseError) {
        keys = parameters["keys"].map(Self.list)
        excludeKeys = parameters["excludeKeys"].map(Self.list) ?? []
        for path in parameters["include"].map(Self.list) ?? [] {
            if path == "*" {
                includeAll = true
            } else {
                include.append(path.split(separator: ".").map(String.init))
            }
        }
    }

    /// A comma list, or (since Parse Server 5) a JSON array of strings.
    private static func list(_ value: JSON) -> [String] {
        let items =
            value.array?.compactMap(\.string) ?? (value.string ?? value.text).split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        return items.map { $0.trimmingCharacters(in: .whitespaces) }
    }

    private static func count(_ value: JSON, _ name: String) throws(ParseError) -> Int {
        guard let number = value.number ?? value.string.flatMap(Double.init), number >= 0, number == number.rounded(),
            number < Double(Int.max)
        else { throw .invalidQuery("Invalid \(name)") }
        return Int(number)
    }

    // MARK: - Where

    /// A `where` clause, compiled (so a bad one is refused even on an empty class).
    indirect enum Predicate {
        case all([Predicate])
        case any([Predicate])
        case none([Predicate])
        case field([String], [Constraint])
    }

    enum Constraint {
        case equal(Scalar)
        case notEqual(Scalar)
        case compare(String, Scalar)
        case inList([Scalar])
        case notInList([Scalar])
        case exists(Bool)
        case containsAll([Scalar])
        case regex(NSRegularExpression)
    }

    private static let unsupported: Set<String> = [
        "$select", "$dontSelect", "$inQuery", "$notInQuery", "$relatedTo", "$text", "$nearSphere", "$near", "$maxDistance",
        "$maxDistanceInRadians", "$maxDistanceInMiles", "$maxDistanceInKilometers", "$within", "$geoWithin",
        "$geoIntersects", "$containedBy", "$centerSphere", "$polygon", "$box",
    ]

    private static func predicate(_ clause: [String: JSON]) throws(ParseError) -> Predicate {
        var parts: [Predicate] = []
        for key in clause.keys.sorted() {
            let value = clause[key]!
            switch key {
            case "$or", "$and", "$nor":
                guard let items = value.array, !items.isEmpty || key != "$nor" else {
                    throw .invalidQuery(
                        key == "$nor" ? "Bad $nor format - use an array of at least 1 value." : "Bad \(key) format - use an array value.")
                }
                var inner: [Predicate] = []
                for item in items {
                    guard let object = item.object else { throw .invalidQuery("Bad \(key) format - use an array value.") }
                    inner.append(try predicate(object))
                }
                parts.append(key == "$or" ? .any(inner) : key == "$and" ? .all(inner) : .none(inner))
            case _ where unsupported.contains(key):
                throw .invalidQuery("\(key) is not supported by the loopback Parse server")
            default:
                let path = key.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
                guard ClassStore.isValidFieldName(path[0]), path.allSatisfy({ !$0.isEmpty && !$0.contains("$") }) else {
                    throw .invalidKeyName("Invalid key name: \(key)")
                }
                parts.append(.field(path, try constraints(value, timestamp: Self.isTimestamp(path))))
            }
        }
        return parts.count == 1 ? parts[0] : .all(parts)
    }

    private static func isTimestamp(_ path: [String]) -> Bool { path == ["createdAt"] || path == ["updatedAt"] }

    private static func constraints(_ value: JSON, timestamp: Bool) throws(ParseError) -> [Constraint] {
        guard let members = value.object, members.keys.contains(where: { $0.hasPrefix("$") }) else {
            return [.equal(Scalar(query: value, timestamp: timestamp, equality: true))]
        }
        var result: [Constraint] = []
        for key in members.keys.sorted() {
            let operand = members[key]!
            func scalar() -> Scalar { Scalar(query: operand, timestamp: timestamp, equality: false) }
            func list() throws(ParseError) -> [Scalar] {
                guard let items = operand.array else { throw .invalidQuery("bad \(key) value") }
                return items.map { Scalar(query: $0, timestamp: timestamp, equality: false) }
            }
            switch key {
            case "$eq": result.append(.equal(Scalar(query: operand, timestamp: timestamp, equality: true)))
            case "$ne": result.append(.notEqual(Scalar(query: operand, timestamp: timestamp, equality: true)))
            case "$lt", "$lte", "$gt", "$gte": result.append(.compare(key, scalar()))
            case "$in": result.append(.inList(try list()))
            case "$nin": result.append(.notInList(try list()))
            case "$all": result.append(.containsAll(try list()))
            case "$exists":
                guard let flag = operand.bool else { throw .invalidQuery("bad $exists value") }
                result.append(.exists(flag))
            case "$regex":
                var options: NSRegularExpression.Options = []
                for flag in members["$options"]?.string ?? "" {
                    switch flag {
                    case "i": options.insert(.caseInsensitive)
                    case "m": options.insert(.anchorsMatchLines)
                    case "x": options.insert(.allowCommentsAndWhitespace)
                    case "s": options.insert(.dotMatchesLineSeparators)
                    default: throw .invalidQuery("Invalid regex options: \(flag)")
                    }
                }
                guard let pattern = operand.string, let regex = try? NSRegularExpression(pattern: pattern, options: options) else {
                    throw .invalidQuery("bad $regex value")
                }
                result.append(.regex(regex))
            case "$options":
                guard members["$regex"] != nil else { throw .invalidQuery("$options needs a $regex") }
            case _ where unsupported.contains(key):
                throw .invalidQuery("\(key) is not supported by the loopback Parse server")
            default:
                throw ParseError(107, "bad constraint: \(key)")
            }
        }
        return result
    }

    /// Whether an object satisfies the `where`.
    func matches(_ object: [String: JSON]) -> Bool { Self.evaluate(predicate, object) }

    private static func evaluate(_ predicate: Predicate, _ object: [String: JSON]) -> Bool {
        switch predicate {
        case .all(let parts): return parts.allSatisfy { evaluate($0, object) }
        case .any(let parts): return parts.contains { evaluate($0, object) }
        case .none(let parts): return !parts.contains { evaluate($0, object) }
        case .field(let path, let constraints):
            let stored = ClassStore.value(at: path, in: object).map { Scalar(stored: $0, timestamp: isTimestamp(path)) }
            return constraints.allSatisfy { holds($0, stored) }
        }
    }

    private static func holds(_ constraint: Constraint, _ field: Scalar?) -> Bool {
        switch constraint {
        case .equal(let wanted): return equals(field, wanted)
        case .notEqual(let wanted): return !equals(field, wanted)
        case .inList(let wanted): return wanted.contains { equals(field, $0) }
        case .notInList(let wanted): return !wanted.contains { equals(field, $0) }
        case .exists(let flag): return (field != nil) == flag
        case .containsAll(let wanted):
            guard case .array(let items)? = field else { return false }
            return wanted.allSatisfy { items.contains($0) }
        case .compare(let op, let bound):
            let members: [Scalar] = if case .array(let items)? = field { items } else { field.map { [$0] } ?? [] }
            return members.contains { member in
                guard let order = Scalar.compareSameType(member, bound) else { return false }
                switch op {
                case "$lt": return order < 0
                case "$lte": return order <= 0
                case "$gt": return order > 0
                default: return order >= 0
                }
            }
        case .regex(let regex):
            guard case .string(let text)? = field else { return false }
            return regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
        }
    }

    /// MongoDB's equality: a missing field equals null; an array field equals a value it holds.
    private static func equals(_ field: Scalar?, _ wanted: Scalar) -> Bool {
        guard let field else { return wanted == .null }
        if field == wanted { return true }
        if case .array(let items) = field { return items.contains(wanted) }
        return false
    }

    // MARK: - Order and page

    /// The matching objects in the query's order (ties: insertion order), before skip and limit.
    func sorted(_ objects: [[String: JSON]]) -> [[String: JSON]] {
        guard !order.isEmpty else { return objects }
        let keyed = objects.enumerated().map { index, object in
            (
                index, object,
                order.map { key in
                    ClassStore.value(at: key.path, in: object).map { Scalar(stored: $0, timestamp: Self.isTimestamp(key.path)) }
                }
            )
        }
        return keyed.sorted { a, b in
            for (index, key) in order.enumerated() {
                let result = Scalar.sortCompare(a.2[index], b.2[index])
                if result != 0 { return key.descending ? result > 0 : result < 0 }
            }
            return a.0 < b.0
        }.map(\.1)
    }

    /// The page of `rows` the query's `skip` and `limit` select.
    func page<T>(_ rows: [T]) -> [T] { Array(rows.dropFirst(skip).prefix(limit)) }
}

/// A value as MongoDB compares it: dates as instants, pointers as `Class$id` strings (Parse's
/// `_p_` columns), numbers as doubles.
enum Scalar: Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case date(Int64)
    case array([Scalar])
    case other(JSON)

    /// A stored value; `timestamp` for the top-level `createdAt` / `updatedAt` strings.
    init(stored value: JSON, timestamp: Bool) {
        if timestamp, let text = value.string, let instant = ParseDate.milliseconds(text) {
            self = .date(instant)
        } else {
            self.init(atom: value)
        }
    }

    /// A value of a `where`: a plain string is a date only in an equality on a timestamp.
    init(query value: JSON, timestamp: Bool, equality: Bool) {
        if timestamp, equality, let text = value.string, let instant = ParseDate.milliseconds(text) {
            self = .date(instant)
        } else {
            self.init(atom: value)
        }
    }

    private init(atom value: JSON) {
        switch value {
        case .null: self = .null
        case .bool(let flag): self = .bool(flag)
        case .number(let number): self = .number(number)
        case .string(let text): self = .string(text)
        case .array(let items): self = .array(items.map(Scalar.init(atom:)))
        case .object:
            switch value.parseType {
            case "Date":
                if let instant = value["iso"]?.string.flatMap(ParseDate.milliseconds) { self = .date(instant) } else { self = .other(value) }
            case "Pointer":
                self = .string("\(value["className"]?.string ?? "")$\(value["objectId"]?.string ?? "")")
            case "File":
                self = .string(value["name"]?.string ?? "")
            default:
                self = .other(value)
            }
        }
    }

    /// The order of two values of one type (numbers, strings byte-wise, dates, booleans); nil
    /// for values of different types, which MongoDB never finds less or greater.
    static func compareSameType(_ a: Scalar, _ b: Scalar) -> Int? {
        switch (a, b) {
        case (.number(let x), .number(let y)): x < y ? -1 : x > y ? 1 : 0
        case (.date(let x), .date(let y)): x < y ? -1 : x > y ? 1 : 0
        case (.bool(let x), .bool(let y)): x == y ? 0 : x ? 1 : -1
        case (.string(let x), .string(let y)):
            x == y ? 0 : x.utf8.lexicographicallyPrecedes(y.utf8) ? -1 : 1
        default: nil
        }
    }

    /// MongoDB's sort order: missing and null, numbers, strings, objects, arrays, booleans, dates.
    static func sortCompare(_ a: Scalar?, _ b: Scalar?) -> Int {
        let (rankA, rankB) = (rank(a), rank(b))
        if rankA != rankB { return rankA < rankB ? -1 : 1 }
        guard let a, let b else { return 0 }
        if let order = compareSameType(a, b) { return order }
        let (textA, textB) = (a.description, b.description)
        return textA == textB ? 0 : textA < textB ? -1 : 1
    }

    private static func rank(_ value: Scalar?) -> Int {
        switch value {
        case nil, .null?: 0
        case .number?: 1
        case .string?: 2
        case .other?: 3
        case .array?: 4
        case .bool?: 8
        case .date?: 9
        }
    }

    private var description: String {
        switch self {
        case .other(let json): json.text
        case .array(let items): items.map(\.description).joined(separator: ",")
        default: "\(self)"
        }
    }
}

/// How objects leave the server for one request: `File`s get their `url`, pointers named by
/// `include` become the objects they point to (when the requester may read them; otherwise, or
/// when the target is gone, the pointer stays), and `keys` / `excludeKeys` trim the fields.
struct ObjectView {
    let store: ClassStore
    /// The session's user (nil: none), whose ACL rights decide which included objects show.
    let user: String?
    /// `http://127.0.0.1:PORT/parse/files/<appID>/`.
    let filesBase: String

    /// Fields `keys` never removes.
    private static let kept: Set<String> = ClassStore.reserved.union(["__type", "className"])

    /// An object as an answer shows it, shaped by `query` (nil: whole, nothing included).
    func present(_ object: [String: JSON], _ query: ParseQuery? = nil) -> JSON {
        guard let query else { return .object(withURLs(object)) }
        let included = expand(withURLs(object), query.include, all: query.includeAll)
        var shown = Self.project(included, keys: query.keys)
        for key in query.excludeKeys where !ClassStore.reserved.contains(key) { shown[key] = nil }
        return .object(shown)
    }

    /// `File` fields with the `url` the server serves them at.
    func withURLs(_ object: [String: JSON]) -> [String: JSON] {
        object.mapValues { value in
            guard value.parseType == "File", var file = value.object, let name = file["name"]?.string else { return value }
            file["url"] = .string(filesBase + (name.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? name))
            return .object(file)
        }
    }

    private func expand(_ object: [String: JSON], _ paths: [[String]], all: Bool) -> [String: JSON] {
        var object = object
        var fields = Set(paths.compactMap(\.first))
        if all {
            for (key, value) in object where value.parseType == "Pointer" || value.array?.contains(where: { $0.parseType == "Pointer" }) == true {
                fields.insert(key)
            }
        }
        for field in fields {
            let rest = paths.filter { $0.first == field && $0.count > 1 }.map { Array($0.dropFirst()) }
            object[field] = object[field].map { expandValue($0, rest) }
        }
        return object
    }

    private func expandValue(_ value: JSON, _ rest: [[String]]) -> JSON {
        if let items = value.array { return .array(items.map { expandValue($0, rest) }) }
        guard value.parseType == "Pointer", let className = value["className"]?.string, let id = value["objectId"]?.string,
            let target = store.object(className, id), ClassStore.allows(target, user: user, write: false)
        else { return value }
        var full = expand(withURLs(target), rest, all: false)
        full["__type"] = .string("Object")
        full["className"] = .string(className)
        return .object(full)
    }

    /// Keeps the fields `keys` names (a dotted key keeps its first part, trimmed inside when that
    /// is an object or an included one), plus `objectId`, `createdAt` and `updatedAt`.
    private static func project(_ object: [String: JSON], keys: [String]?) -> [String: JSON] {
        guard let keys else { return object }
        let paths = keys.map { $0.split(separator: ".", maxSplits: 1).map(String.init) }
        var shown: [String: JSON] = [:]
        for (key, value) in object where kept.contains(key) || paths.contains(where: { $0.first == key }) {
            let inner = paths.filter { $0.first == key && $0.count == 2 }.map { $0[1] }
            let plain = paths.contains { $0 == [key] }
            if !plain, !inner.isEmpty, let members = value.object, value.parseType == nil || value.parseType == "Object" {
                shown[key] = .object(project(members, keys: inner))
            } else {
                shown[key] = value
            }
        }
        return shown
    }
}
