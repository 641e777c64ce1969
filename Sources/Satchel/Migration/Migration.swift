import Foundation

/// A named change to the shape of one model's objects and to its definition, applied once per
/// store, in order with the model's other migrations (``Store/migrate(_:dryRun:progress:changes:)``).
///
/// ```swift
/// let v2 = Migration("2026-11 notes: title → name", model: "Note", steps: [
///     .rename("title", to: "name"),
///     .add("archived", default: false),
///     .convert("priority", .integer),
///     .transform { attributes in attributes["slug"] = attributes["name"].flatMap(\.stringValue).map { .string($0.lowercased()) } },
///     .createIndex(IndexDefinition(["name"])),
///     .setKind(.fixedSchema(["name": .string, "archived": .boolean, "priority": .integer, "slug": .string])),
/// ])
/// try store.migrate([v1, v2])
/// ```
///
/// A model's version is the list of its migrations applied (``Model/appliedMigrations``).
/// Every object is checked first; if one cannot be migrated (a conversion that fails, a step
/// that throws, an object the new schema refuses), nothing changes. Objects are then rewritten
/// in batches, each one transaction that also records how far the migration got: killed, it
/// resumes there (on the next open when its steps have a JSON form, else when `migrate` runs
/// again). Each object is before the migration or after it, never between.
///
/// `Migration` is a `Sendable` value type.
public struct Migration: Sendable {
    /// The migration's name: applied once per store and model, under this name.
    public var name: String
    /// The model it changes.
    public var model: String
    /// What it does, in order, to each object (the data steps) and to the model.
    public var steps: [MigrationStep]
    /// Whether the rewritten objects are changes to push, for a model that syncs. By default a
    /// migration changes only the local representation: no change is logged, and pending
    /// changes are rewritten by the rename, remove and convert steps, so that what is pushed
    /// later has the new shape.
    public var pushesChanges: Bool

    public init(_ name: String, model: String, pushesChanges: Bool = false, steps: [MigrationStep]) {
        self.name = name
        self.model = model
        self.steps = steps
        self.pushesChanges = pushesChanges
    }

    /// A migration from its JSON form (what `satchel migrate MODEL FILE` reads):
    /// `{"name": "…", "steps": [step, …], "push": false}`, each step one of
    ///
    /// - `{"rename": "a", "to": "b"}`
    /// - `{"add": "a", "default": value}`
    /// - `{"remove": "a"}`
    /// - `{"convert": "a", "to": "string" | "number" | "integer" | "boolean"}`
    /// - `{"createIndex": "a,b"}` (`"a[]"`, or a path into arrays such as `"items[].sku"`: an array-element index; `"keysOnly": true`; `"text": true`: a full-text index)
    /// - `{"dropIndex": "a,b"}` (`"text": true`: the full-text index over those attributes)
    /// - `{"schema": {"a": "string", …}}` (a fixed schema) or `{"schema": null}` (a property bag)
    ///
    /// The attributes of rename, add, remove and convert are paths (``MigrationStep``):
    /// `{"rename": "items[].product", "to": "items[].sku"}`.
    ///
    /// - Throws: ``SatchelError`` `.invalidArgument` naming the step that is not one of these.
    public init(model: String, json: JSONObject) throws(SatchelError) {
        guard let name = json["name"]?.stringValue, !name.isEmpty else {
            throw SatchelError(.invalidArgument, "a migration needs a \"name\" (a non-empty string)")
        }
        guard let steps = json["steps"]?.arrayValue, !steps.isEmpty else {
            throw SatchelError(.invalidArgument, "migration '\(name)' needs \"steps\" (a non-empty array)")
        }
        if let push = json["push"], push.boolValue == nil {
            throw SatchelError(.invalidArgument, "migration '\(name)': \"push\" is true or false")
        }
        let known: Set<String> = ["name", "steps", "push"]
        if let other = json.keys.first(where: { !known.contains($0) }) {
            throw SatchelError(.invalidArgument, "migration '\(name)': unknown key \"\(other)\" (it takes name, steps, push)")
        }
        var parsed: [MigrationStep] = []
        for (index, step) in steps.enumerated() {
            guard let object = step.objectValue else {
                throw SatchelError(.invalidArgument, "migration '\(name)', step \(index + 1): a step is a JSON object")
            }
            do {
                parsed.append(try MigrationStep(json: object))
            } catch {
                throw SatchelError(.invalidArgument, "migration '\(name)', step \(index + 1): \(error.message)")
            }
        }
        self.init(name, model: model, pushesChanges: json["push"]?.boolValue ?? false, steps: parsed)
    }

    /// The JSON form of the steps, when every step has one (no closure).
    var stepsJSON: JSONValue? {
        var list: [JSONValue] = []
        for step in steps {
            guard let json = step.json else { return nil }
            list.append(.object(json))
        }
        return .array(list)
    }
}

/// One step of a ``Migration``.
///
/// The data steps (rename, add, remove, convert) name an attribute by a path, as queries do
/// (``Field``): a top-level name, names joined by dots that reach into nested objects
/// (`address.city`), a name ending in `[]` that reaches into each element of an array
/// (`items[].product`: the product of every line). A step acts on the path's last name in each
/// object the path reaches; where it meets a value that is not an object (an element that is a
/// string, an address written as text) it leaves that value as it is. A dotted path without `[]`
/// that meets an array refuses the migration, naming the object, as queries refuse it. A
/// top-level attribute whose name holds a dot is named as a JSON string (`"\"a.b\""`), as the
/// CLI's options name it.
public enum MigrationStep: Sendable {
    /// Renames an attribute, within the object that holds it (`address.city` to
    /// `address.town`; `items[].product` to `items[].sku`). An object holding both names is
    /// refused (the value under the new name would be lost).
    case rename(String, to: String)
    /// Gives objects without the attribute this value; on a dotted path, an object missing on
    /// the way is made (`address.country` on an object without an address).
    case add(String, default: JSONValue)
    /// Removes an attribute.
    case remove(String)
    /// Converts the attribute's value where an object has it; a conversion that fails refuses
    /// the migration, naming the object.
    case convert(String, AttributeConversion)
    /// Changes each object's attributes (without its id) as the closure says; a null removes an
    /// attribute, and an object left without any is deleted. Throwing refuses the migration.
    /// The closure runs twice per object (the check, then the write): make it depend on the
    /// attributes only.
    case transform(@Sendable (inout JSONObject) throws -> Void)
    /// Declares and builds an index (after the objects are rewritten).
    case createIndex(IndexDefinition)
    /// Drops an index (before the objects are rewritten).
    case dropIndex(IndexDefinition)
    /// Makes the model a property bag or gives it a new fixed schema, which every migrated
    /// object must fit.
    case setKind(ModelKind)

    /// Checks the step's paths (before any object is read).
    ///
    /// - Throws: ``SatchelError`` `.invalidArgument` for an empty name along a path, a path
    ///   ending in `[]`, or a rename out of the object that holds the attribute.
    func validate() throws(SatchelError) {
        switch self {
        case .rename(let old, let new):
            guard try StepPath(old).sharesHolder(with: try StepPath(new)) else {
                throw SatchelError(
                    .invalidArgument,
                    "rename '\(old)' to '\(new)': a rename keeps an attribute in the object that holds it (the paths differ in their last name only)")
            }
        case .add(let name, _), .remove(let name), .convert(let name, _):
            _ = try StepPath(name)
        case .transform, .createIndex, .dropIndex, .setKind:
            break
        }
    }

    /// Applies the step to one object's attributes.
    func apply(to attributes: inout JSONObject, id: String, model: String) throws(SatchelError) {
        switch self {
        case .rename(let old, let new):
            let from = try StepPath(old)
            let to = try StepPath(new).name
            try from.forEachHolder(in: &attributes, of: id, model: model) { holder throws(SatchelError) in
                guard let value = holder[from.name] else { return }
                if holder[to] != nil {
                    throw SatchelError(
                        .invalidObject, "object '\(id)' holds both '\(old)' and '\(new)': renaming would lose the value of '\(new)'", model: model,
                        objectID: id)
                }
                holder[from.name] = nil
                holder[to] = value
            }
        case .add(let name, let value):
            guard !value.isNull else { return }
            let path = try StepPath(name)
            // A null is missing, as to queries (a black-box probe: the default left it).
            try path.forEachHolder(in: &attributes, of: id, model: model, creating: true) { holder in
                if holder[path.name]?.isNull ?? true { holder[path.name] = value }
            }
        case .remove(let name):
            let path = try StepPath(name)
            try path.forEachHolder(in: &attributes, of: id, model: model) { holder in holder[path.name] = nil }
        case .convert(let name, let conversion):
            let path = try StepPath(name)
            try path.forEachHolder(in: &attributes, of: id, model: model) { holder throws(SatchelError) in
                // A null a path reaches is missing, as to queries: nothing to convert (a
                // black-box probe: it became the text "null", or refused the migration).
                guard let value = holder[path.name], !value.isNull else { return }
                do {
                    let converted = try conversion.convert(value)
                    holder[path.name] = converted?.isNull == true ? nil : converted
                } catch {
                    throw SatchelError(
                        .invalidObject, "object '\(id)': '\(name)' (\(value)) does not convert to \(conversion.name): \(error)", model: model,
                        objectID: id)
                }
            }
        case .transform(let body):
            do {
                try body(&attributes)
            } catch {
                throw SatchelError(.invalidObject, "object '\(id)': the transform failed: \(error)", model: model, objectID: id)
            }
            attributes[Object.idAttribute] = nil
            attributes = attributes.removingNulls()
        case .createIndex, .dropIndex, .setKind:
            break
        }
    }

    /// Applies the step to the attributes of a pending update or delete (a top-level attribute
    /// removed is null), or to its base values: the renames, removals and conversions, reaching
    /// into the values the change holds; a transform or a default does not apply to a part.
    func apply(toChange attributes: inout JSONObject) {
        switch self {
        case .rename(let old, let new):
            guard let from = try? StepPath(old), let to = try? StepPath(new).name else { return }
            from.forEachHolder(inChange: &attributes) { holder in
                guard let value = holder[from.name] else { return }
                holder[from.name] = nil
                holder[to] = value
            }
        case .remove(let name):
            guard let path = try? StepPath(name) else { return }
            path.forEachHolder(inChange: &attributes) { holder in holder[path.name] = nil }
        case .convert(let name, let conversion):
            guard let path = try? StepPath(name) else { return }
            // A top-level attribute converted to nothing is a removal (null); a nested one goes.
            let removed: JSONValue? = path.holder.isEmpty ? .null : nil
            path.forEachHolder(inChange: &attributes) { holder in
                guard let value = holder[path.name], !value.isNull else { return }
                let converted: JSONValue?
                do {
                    converted = try conversion.convert(value)
                } catch {
                    return  // the object's own check refuses the migration; a part keeps its value
                }
                holder[path.name] = converted.map { $0.isNull ? removed : $0 } ?? removed
            }
        case .add, .transform, .createIndex, .dropIndex, .setKind:
            break
        }
    }

    var isDataStep: Bool {
        switch self {
        case .rename, .add, .remove, .convert, .transform: true
        case .createIndex, .dropIndex, .setKind: false
        }
    }

    /// The step's JSON form (see ``Migration/init(model:json:)``), nil for a closure.
    var json: JSONObject? {
        switch self {
        case .rename(let old, let new): return ["rename": .string(old), "to": .string(new)]
        case .add(let name, let value): return ["add": .string(name), "default": value]
        case .remove(let name): return ["remove": .string(name)]
        case .convert(let name, let conversion):
            guard AttributeConversion.named(conversion.name) != nil else { return nil }
            return ["convert": .string(name), "to": .string(conversion.name)]
        case .transform: return nil
        case .createIndex(let definition):
            var json: JSONObject = ["createIndex": .string(Self.indexText(definition))]
            if definition.kind == .value && !definition.storesObjects { json["keysOnly"] = true }
            if definition.kind == .text { json["text"] = true }
            return json
        case .dropIndex(let definition):
            var json: JSONObject = ["dropIndex": .string(Self.indexText(definition))]
            if definition.kind == .text { json["text"] = true }
            return json
        case .setKind(.propertyBag): return ["schema": .null]
        case .setKind(.fixedSchema(let schema)):
            return ["schema": .object(JSONObject(schema.map { ($0.key, JSONValue.string($0.value.rawValue)) }))]
        }
    }

    /// An index's attributes as `createIndex` and `dropIndex` take them (``IndexDefinition/description``
    /// without the text index's wrapping).
    private static func indexText(_ definition: IndexDefinition) -> String {
        definition.kind == .text ? definition.fields.map(\.description).joined(separator: ",") : definition.description
    }

    init(json: JSONObject) throws(SatchelError) {
        func string(_ key: String) throws(SatchelError) -> String {
            guard let value = json[key]?.stringValue, !value.isEmpty else {
                throw SatchelError(.invalidArgument, "\"\(key)\" must be a non-empty string")
            }
            return value
        }
        /// A flag: absent is false (a black-box probe: `"text": "true"` was read as false).
        func flag(_ key: String) throws(SatchelError) -> Bool {
            guard let value = json[key] else { return false }
            guard let flag = value.boolValue else { throw SatchelError(.invalidArgument, "\"\(key)\" is true or false") }
            return flag
        }
        func only(_ keys: Set<String>) throws(SatchelError) {
            if let other = json.keys.first(where: { !keys.contains($0) }) {
                throw SatchelError(.invalidArgument, "unknown key \"\(other)\" in a step (\(keys.sorted().joined(separator: ", ")))")
            }
        }
        if json["rename"] != nil {
            try only(["rename", "to"])
            self = .rename(try string("rename"), to: try string("to"))
        } else if json["add"] != nil {
            try only(["add", "default"])
            guard let value = json["default"], !value.isNull else {
                throw SatchelError(.invalidArgument, "\"add\" needs a \"default\" that is not null")
            }
            self = .add(try string("add"), default: value)
        } else if json["remove"] != nil {
            try only(["remove"])
            self = .remove(try string("remove"))
        } else if json["convert"] != nil {
            try only(["convert", "to"])
            let target = try string("to")
            guard let conversion = AttributeConversion.named(target) else {
                throw SatchelError(.invalidArgument, "no conversion to '\(target)' (string, number, integer, boolean)")
            }
            self = .convert(try string("convert"), conversion)
        } else if json["createIndex"] != nil {
            try only(["createIndex", "keysOnly", "text"])
            var definition = try Self.index(try string("createIndex"))
            if try flag("text") {
                guard definition.kind == .value, json["keysOnly"] == nil else {
                    throw SatchelError(.invalidArgument, "\"text\" takes plain attribute names (a,b), without [] or keysOnly")
                }
                definition = .text(definition.fields)
            }
            if try flag("keysOnly") {
                guard definition.kind == .value else {
                    throw SatchelError(.invalidArgument, "\"keysOnly\" is for value indexes: an array-element index holds keys only")
                }
                definition = IndexDefinition(definition.fields, storesObjects: false)
            }
            self = .createIndex(definition)
        } else if json["dropIndex"] != nil {
            // A text index is named as its step made it (a black-box probe: a migration could
            // not drop the text index its own refusal said to drop).
            try only(["dropIndex", "text"])
            var definition = try Self.index(try string("dropIndex"))
            if try flag("text") {
                guard definition.kind == .value else {
                    throw SatchelError(.invalidArgument, "\"text\" takes plain attribute names (a,b), without []")
                }
                definition = .text(definition.fields)
            }
            self = .dropIndex(definition)
        } else if let schema = json["schema"] {
            try only(["schema"])
            if schema.isNull {
                self = .setKind(.propertyBag)
                return
            }
            guard let object = schema.objectValue, !object.isEmpty else {
                throw SatchelError(.invalidArgument, "\"schema\" is an object of attribute types, or null for a property bag")
            }
            var types: [String: AttributeType] = [:]
            for (attribute, type) in object {
                guard let name = type.stringValue, let parsed = AttributeType(rawValue: name) else {
                    let known = AttributeType.allCases.map(\.rawValue).joined(separator: ", ")
                    throw SatchelError(.invalidArgument, "the type of '\(attribute)' is one of \(known)")
                }
                types[attribute] = parsed
            }
            self = .setKind(.fixedSchema(types))
        } else {
            throw SatchelError(
                .invalidArgument, "a step is one of rename, add, remove, convert, createIndex, dropIndex, schema; got \(JSONValue.object(json))")
        }
        try validate()
    }

    private static func index(_ text: String) throws(SatchelError) -> IndexDefinition {
        let elements = text.hasSuffix("[]")
        let list = elements ? String(text.dropLast(2)) : text
        let written = Field.list(list)
        // Quotes around no name are a list without a name (said below).
        let fields = try written.map { text throws(SatchelError) in text == "\"\"" ? Field("") : try Field(written: text) }
        guard !list.isEmpty, !fields.contains(where: { $0.description.isEmpty }) else {
            throw SatchelError(.invalidArgument, "name the index's attributes, e.g. \"brand\" or \"brand,price\"")
        }
        if let wrong = fields.lazy.compactMap(\.malformation).first { throw SatchelError(.invalidArgument, wrong) }
        // A path into arrays (`items[].product`) is indexed element by element, as `satchel index`
        // takes it.
        if elements || (fields.count == 1 && fields[0].reachesIntoArrays) {
            guard fields.count == 1 else { throw SatchelError(.invalidArgument, "an array-element index has exactly one attribute") }
            return .elements(of: fields[0])
        }
        return IndexDefinition(fields)
    }
}

/// A conversion of an attribute's value, for ``MigrationStep/convert(_:_:)``: the named ones
/// (``string``, ``number``, ``integer``, ``boolean``, what `satchel migrate` offers) or one of
/// the app's own.
public struct AttributeConversion: Sendable {
    /// Its name, in errors and in the migration's JSON form.
    public let name: String
    let convert: @Sendable (JSONValue) throws -> JSONValue?

    /// A conversion named `name`: `convert` returns the new value (nil or null: the attribute
    /// is removed) or throws when the value does not convert.
    public init(_ name: String, _ convert: @escaping @Sendable (JSONValue) throws -> JSONValue?) {
        self.name = name
        self.convert = convert
    }

    /// The conversion named `name` among the named ones.
    public static func named(_ name: String) -> AttributeConversion? {
        [string, number, integer, boolean].first { $0.name == name }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// To a string: a string stays; any other value becomes its JSON text (`12`, `true`).
    public static let string = AttributeConversion("string") { value in
        if case .string = value { return value }
        return .string(String(decoding: value.jsonBytes, as: UTF8.self))
    }

    /// To a number: a number stays; a string holding a JSON number (or one with a leading `+`,
    /// as ``integer`` reads it) becomes it.
    public static let number = AttributeConversion("number") { value in
        switch value {
        case .int, .double: return value
        case .string(let text):
            var trimmed = Substring(text.trimmingCharacters(in: .whitespacesAndNewlines))
            if trimmed.hasPrefix("+"), trimmed.dropFirst().first?.isASCII == true, trimmed.dropFirst().first?.isNumber == true {
                trimmed = trimmed.dropFirst()
            }
            if let parsed = try? JSONValue(parsing: Array(trimmed.utf8)), parsed.isNumber { return parsed }
            throw Failure(description: "not a number")
        default: throw Failure(description: "not a number")
        }
    }

    /// To an integer: an integer stays; a double with an exact integer value, or a string
    /// holding an integer (`-12`, `+5`), becomes it. A whole number beyond the 64 bits an
    /// integer has is refused as such.
    public static let integer = AttributeConversion("integer") { value in
        let outside = Failure(description: "a whole number outside the 64-bit integer range")
        switch value {
        case .int: return value
        case .double(let d):
            guard let exact = JSONNumber.exactInt64(d) else {
                throw d.isFinite && d.rounded() == d ? outside : Failure(description: "not a whole number")
            }
            return .int(exact)
        case .string(let text):
            let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if let parsed = Int64(trimmed) { return .int(parsed) }
            let digits = trimmed.hasPrefix("-") || trimmed.hasPrefix("+") ? trimmed.dropFirst() : trimmed[...]
            if !digits.isEmpty && digits.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) { throw outside }
            throw Failure(description: "not an integer")
        default: throw Failure(description: "not an integer")
        }
    }

    /// To a boolean: a boolean stays; `"true"`/`"false"` (any case), `"1"`/`"0"`, `1`/`0` (and
    /// `1.0`/`0.0`) become one. A string is read without the white space around it.
    public static let boolean = AttributeConversion("boolean") { value in
        switch value {
        case .bool: return value
        case .int(let n) where n == 0 || n == 1: return .bool(n == 1)
        // 1.0 is 1, as queries compare them.
        case .double(let d) where d == 0 || d == 1: return .bool(d == 1)
        case .string(let text):
            switch text.trimmingCharacters(in: .whitespacesAndNewlines).lowercased() {
            case "true", "1": return .bool(true)
            case "false", "0": return .bool(false)
            default: throw Failure(description: "not true or false")
            }
        default: throw Failure(description: "not true or false")
        }
    }
}
