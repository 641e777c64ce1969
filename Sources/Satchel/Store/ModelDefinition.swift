/// Where a model's data lives. Each partition is its own LevelDB database inside the store
/// directory.
public enum Partition: String, Sendable, CaseIterable, Hashable {
    /// Synced data of the logged-in user; wiped by a full reset and logout.
    case user
    /// Synced data shared by every user of the device.
    case app
    /// Data that never syncs. Writes to `local` models record no pending changes.
    case local
}

/// How a model syncs.
public enum SyncType: String, Sendable, CaseIterable, Hashable {
    /// Push local changes, then pull the server's changes since the last cursor.
    case incremental
    /// Replace the model's data with a server snapshot, then re-apply local changes.
    case bulkOnly
    /// Never syncs; writes record no pending changes.
    case none
}

/// The declared type of an attribute of a fixed-schema model.
public enum AttributeType: String, Sendable, CaseIterable, Hashable {
    case string
    /// An integer (a double with an exact integer value is accepted and stored as given).
    case integer
    /// Any number, integer or double.
    case number
    case boolean
    case array
    case object
    /// Any JSON value.
    case any

    /// Whether `value` (never null: nulls remove attributes) is of this type.
    public func accepts(_ value: JSONValue) -> Bool {
        switch (self, value) {
        case (.any, _): true
        case (.string, .string), (.boolean, .bool), (.array, .array), (.object, .object): true
        case (.number, .int), (.number, .double), (.integer, .int): true
        case (.integer, .double(let d)): JSONNumber.exactInt64(d) != nil
        default: false
        }
    }
}

/// Whether a model accepts any attributes or only declared, typed ones.
public enum ModelKind: Sendable, Hashable {
    /// Schemaless: any attribute, any JSON value (RhoConnect's default).
    case propertyBag
    /// Only the declared attributes, each of its declared type; writes are validated.
    case fixedSchema([String: AttributeType])
}

/// The values an attribute may hold (a Salesforce picklist), possibly depending on the value of
/// another attribute (a dependent picklist). Writes made here are checked against it; values the
/// server sends are not (the server is the authority on its data).
///
/// ```swift
/// // Tier depends on Industry: Energy allows Gold and Silver, Retail allows Bronze.
/// let tier = AttributeChoices(values: ["Gold", "Silver", "Bronze"], controller: "Industry",
///                             validFor: ["Energy": ["Gold", "Silver"], "Retail": ["Bronze"]])
/// ```
public struct AttributeChoices: Sendable, Hashable {
    /// The values allowed (a picklist's active values).
    public var values: [String]
    /// Whether a value outside ``values`` is refused (a restricted picklist); when false, only
    /// the dependency on ``controller`` is checked.
    public var restricted: Bool
    /// The attribute whose value decides which values are allowed; nil when none does.
    public var controller: String?
    /// For each value of ``controller`` (as text: a boolean controller is `"true"` or
    /// `"false"`), the values allowed. A controller value not listed allows none.
    public var validFor: [String: [String]]

    public init(values: [String], restricted: Bool = true, controller: String? = nil, validFor: [String: [String]] = [:]) {
        self.values = values
        self.restricted = restricted
        self.controller = controller
        self.validFor = validFor
    }

    /// The values allowed when the controller holds `controllerValue` (all ``values`` when
    /// there is no controller).
    public func allowed(whenControllerIs controllerValue: JSONValue?) -> [String] {
        guard controller != nil else { return values }
        guard let key = controllerValue.flatMap(Self.text) else { return [] }
        let valid = Set(validFor[key] ?? [])
        return values.filter(valid.contains)
    }

    /// A controller's value as the key of ``validFor``.
    static func text(_ value: JSONValue) -> String? {
        switch value {
        case .string(let text): text
        case .bool(let flag): flag ? "true" : "false"
        default: nil
        }
    }

    var json: JSONObject {
        var object: JSONObject = ["values": .array(values.map(JSONValue.string)), "restricted": .bool(restricted)]
        if let controller { object["controller"] = .string(controller) }
        if !validFor.isEmpty {
            object["validFor"] = .object(JSONObject(validFor.map { ($0.key, JSONValue.array($0.value.map(JSONValue.string))) }))
        }
        return object
    }

    init?(json: JSONObject) {
        guard let values = json["values"]?.arrayValue?.compactMap(\.stringValue) else { return nil }
        var validFor: [String: [String]] = [:]
        for (key, list) in json["validFor"]?.objectValue ?? JSONObject() { validFor[key] = list.arrayValue?.compactMap(\.stringValue) ?? [] }
        self.init(values: values, restricted: json["restricted"]?.boolValue ?? true, controller: json["controller"]?.stringValue, validFor: validFor)
    }
}

/// The definition of a model: its name, kind, partition and sync type. Definitions persist in
/// the store.
///
/// ```swift
/// let products = try store.register(ModelDefinition(name: "Product"))
/// let settings = try store.register(ModelDefinition(name: "Settings", partition: .local))
/// let prices = try store.register(ModelDefinition(
///     name: "Price", kind: .fixedSchema(["sku": .string, "amount": .number])))
/// ```
///
/// `ModelDefinition` is a `Sendable` value type.
public struct ModelDefinition: Sendable, Hashable {
    /// The model's name; any non-empty string.
    public var name: String
    /// Property bag (default) or fixed schema.
    public var kind: ModelKind
    /// The partition holding the model's data (default `.user`).
    public var partition: Partition
    /// How the model syncs (default `.incremental`).
    public var syncType: SyncType
    /// Attributes that hold the id of an object of another model: attribute name → that model's
    /// name (RhoConnect's `belongs_to`). When the server gives a created object its own id, the
    /// sync engine rewrites these attributes, and it syncs the other model first.
    public var associations: [String: String]
    /// Attributes that hold a file (a blob reference, see `BlobStore`), uploaded and downloaded
    /// by the sync engine.
    public var blobAttributes: [String]
    /// Attributes that hold one of a list of values (picklists): attribute → its choices. Local
    /// writes are checked against them.
    public var choices: [String: AttributeChoices] = [:]

    public init(
        name: String, kind: ModelKind = .propertyBag, partition: Partition = .user, syncType: SyncType = .incremental,
        associations: [String: String] = [:], blobAttributes: [String] = []
    ) {
        self.name = name
        self.kind = kind
        self.partition = partition
        self.syncType = syncType
        self.associations = associations
        self.blobAttributes = blobAttributes
    }

    /// Whether local writes to this model record pending changes for sync.
    public var recordsChanges: Bool { partition != .local && syncType != .none }

    public static func == (a: ModelDefinition, b: ModelDefinition) -> Bool {
        UTF8Order.equal(a.name, b.name) && a.kind == b.kind && a.partition == b.partition && a.syncType == b.syncType
            && a.associations == b.associations && a.blobAttributes == b.blobAttributes && a.choices == b.choices
    }

    public func hash(into hasher: inout Hasher) {
        UTF8Order.hash(name, into: &hasher)
        hasher.combine(partition)
        hasher.combine(syncType)
    }

    // MARK: - Validation

    /// Checks the attributes an object will have after a write against a fixed schema and the
    /// attributes' choices. A picklist's value is checked when the write changes it or its
    /// controller (`old` holds what the object had): a value the server holds, since made
    /// inactive there, does not refuse a write of the object's other attributes.
    func validate(_ attributes: JSONObject, objectID: String, old: JSONObject? = nil) throws(SatchelError) {
        try validateChoices(attributes, objectID: objectID, old: old)
        guard case .fixedSchema(let schema) = kind else { return }
        for (attribute, value) in attributes where !value.isNull {
            guard let type = schema.first(where: { UTF8Order.equal($0.key, attribute) })?.value else {
                throw SatchelError(
                    .schemaViolation, "model '\(name)' has no attribute '\(attribute)' in its fixed schema",
                    model: name, objectID: objectID)
            }
            guard type.accepts(value) else {
                throw SatchelError(
                    .schemaViolation, "attribute '\(attribute)' of model '\(name)' must be \(type.rawValue), got \(value.kindName)",
                    model: name, objectID: objectID)
            }
        }
    }

    /// Checks the attributes an object will have after a write against ``choices``: those the
    /// write changes, with their controllers, when `old` gives what the object had.
    func validateChoices(_ attributes: JSONObject, objectID: String, old: JSONObject? = nil) throws(SatchelError) {
        // In name order, so that the error a write gets does not depend on hashing.
        for (attribute, choices) in choices.sorted(by: { UTF8Order.less($0.key, $1.key) }) {
            guard let value = attributes[attribute], !value.isNull else { continue }
            if let old, old[attribute] == value, choices.controller.map({ old[$0] == attributes[$0] }) ?? true { continue }
            guard let text = value.stringValue else {
                throw SatchelError(
                    .schemaViolation, "attribute '\(attribute)' of model '\(name)' is a picklist: a string, not \(value.kindName)", model: name,
                    objectID: objectID)
            }
            if choices.restricted && !choices.values.contains(text) {
                throw SatchelError(
                    .schemaViolation,
                    "'\(text)' is not a value of '\(attribute)' of model '\(name)' (values: \(choices.values.joined(separator: ", ")))",
                    model: name, objectID: objectID)
            }
            if let controller = choices.controller {
                let allowed = choices.allowed(whenControllerIs: attributes[controller])
                if !allowed.contains(text) {
                    let held = attributes[controller].map { "\($0)" } ?? "no value"
                    let list = allowed.isEmpty ? "none" : allowed.joined(separator: ", ")
                    throw SatchelError(
                        .schemaViolation,
                        "'\(text)' is not valid for '\(attribute)' of model '\(name)' while '\(controller)' is \(held) (valid: \(list))",
                        model: name, objectID: objectID)
                }
            }
        }
    }

    // MARK: - Stored form

    /// The stored JSON of the definition: `{"associations"?, "blobs"?, "choices"?, "kind", "name",
    /// "partition", "schema"?, "syncType"}`.
    var json: JSONObject {
        var object: JSONObject = [
            "name": .string(name), "partition": .string(partition.rawValue), "syncType": .string(syncType.rawValue),
        ]
        if !associations.isEmpty {
            object["associations"] = .object(JSONObject(associations.map { ($0.key, JSONValue.string($0.value)) }))
        }
        if !blobAttributes.isEmpty { object["blobs"] = .array(blobAttributes.map(JSONValue.string)) }
        if !choices.isEmpty { object["choices"] = .object(JSONObject(choices.map { ($0.key, JSONValue.object($0.value.json)) })) }
        switch kind {
        case .propertyBag:
            object["kind"] = "propertyBag"
        case .fixedSchema(let schema):
            object["kind"] = "fixedSchema"
            object["schema"] = .object(JSONObject(schema.map { ($0.key, JSONValue.string($0.value.rawValue)) }))
        }
        return object
    }

    init(json: JSONObject) throws(SatchelError) {
        func bad(_ what: String) -> SatchelError { SatchelError(.corruption, "stored model definition: \(what)") }
        guard let name = json["name"]?.stringValue else { throw bad("missing name") }
        guard let partition = json["partition"]?.stringValue.flatMap(Partition.init(rawValue:)) else {
            throw bad("bad partition of '\(name)'")
        }
        guard let syncType = json["syncType"]?.stringValue.flatMap(SyncType.init(rawValue:)) else {
            throw bad("bad sync type of '\(name)'")
        }
        let kind: ModelKind
        switch json["kind"]?.stringValue {
        case "propertyBag": kind = .propertyBag
        case "fixedSchema":
            guard let schema = json["schema"]?.objectValue else { throw bad("missing schema of '\(name)'") }
            var types: [String: AttributeType] = [:]
            for (attribute, type) in schema {
                guard let t = type.stringValue.flatMap(AttributeType.init(rawValue:)) else {
                    throw bad("bad type of '\(name).\(attribute)'")
                }
                types[attribute] = t
            }
            kind = .fixedSchema(types)
        default: throw bad("bad kind of '\(name)'")
        }
        var associations: [String: String] = [:]
        for (attribute, model) in json["associations"]?.objectValue ?? JSONObject() {
            guard let model = model.stringValue else { throw bad("bad association of '\(name).\(attribute)'") }
            associations[attribute] = model
        }
        let blobs = json["blobs"]?.arrayValue?.compactMap(\.stringValue) ?? []
        self.init(name: name, kind: kind, partition: partition, syncType: syncType, associations: associations, blobAttributes: blobs)
        for (attribute, value) in json["choices"]?.objectValue ?? JSONObject() {
            guard let object = value.objectValue, let parsed = AttributeChoices(json: object) else {
                throw bad("bad choices of '\(name).\(attribute)'")
            }
            choices[attribute] = parsed
        }
    }
}
