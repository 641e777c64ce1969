/// A secondary index of a model.
///
/// - A **value index** on one or more fields (in order) has one entry per object: the fields'
///   values (a missing field counts as null, so every object is in the index and missing values
///   sort first), then the object id. It serves `==`, `isIn`, ranges and `beginsWith` on a
///   leading run of its fields, and `order(by:)` on them.
/// - An **array-element index** on one field has one entry per element of an array value, and
///   one per string value; it serves `contains`.
///
/// A value index **stores objects** by default: each entry holds a copy of its object, so a
/// query reads one contiguous key range instead of one random read per match (about five times
/// faster on a million objects). The price is disk space (one more copy of each object per
/// index) and writes: every change of an object rewrites its entries. Pass
/// `storesObjects: false` for a keys-only index. Array-element indexes are keys-only.
///
/// ```swift
/// try products.createIndex(IndexDefinition("brand"))
/// try products.createIndex(IndexDefinition("brand", "price"))
/// try products.createIndex(.elements(of: "tags"))
/// ```
public struct IndexDefinition: Sendable, Hashable, CustomStringConvertible {
    /// What the index holds.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// One entry per object: the fields' whole values.
        case value
        /// One entry per array element (and per string value) of one field.
        case arrayElements
        /// A full-text index over string fields: for each word, the objects holding it with its
        /// positions and their lengths in words (``Model/search(_:where:order:limit:select:)``).
        case text
    }

    /// The indexed fields, in order.
    public let fields: [Field]
    public let kind: Kind
    /// Whether each entry holds a copy of its object (value indexes only).
    public let storesObjects: Bool

    /// A value index on `fields`, in order; `storesObjects: false` for a keys-only index.
    public init(_ fields: [Field], storesObjects: Bool = true) {
        self.fields = fields
        self.kind = .value
        self.storesObjects = storesObjects
    }

    /// A value index on `fields`, in order, storing objects.
    public init(_ fields: Field...) { self.init(fields) }

    private init(fields: [Field], kind: Kind) {
        self.fields = fields
        self.kind = kind
        self.storesObjects = false
    }

    /// An array-element index on `field`.
    public static func elements(of field: Field) -> IndexDefinition { IndexDefinition(fields: [field], kind: .arrayElements) }

    /// A full-text index over the string values of `fields` (a field holding an array indexes
    /// its strings).
    public static func text(_ fields: [Field]) -> IndexDefinition { IndexDefinition(fields: fields, kind: .text) }

    /// A full-text index over the string values of `fields`.
    public static func text(_ fields: Field...) -> IndexDefinition { text(fields) }

    /// `brand`, `brand,price`, or `tags[]` for an array-element index (`items[].product`, whose
    /// path says it already, for one over a path into arrays). (Whether entries store objects is
    /// not part of the name: a model has at most one index on the same fields.)
    public var description: String {
        let names = fields.map(\.description).joined(separator: ",")
        if kind == .text { return "text(\(names))" }
        return kind == .arrayElements && !fields[0].reachesIntoArrays ? names + "[]" : names
    }

    /// Whether the two define the same entries' keys (fields and kind), whatever they store.
    func sameKeys(as other: IndexDefinition) -> Bool { fields == other.fields && kind == other.kind }

    func validate(model: String) throws(SatchelError) {
        guard !fields.isEmpty else { throw SatchelError(.invalidArgument, "an index needs at least one field", model: model) }
        if kind == .arrayElements && fields.count != 1 {
            throw SatchelError(.invalidArgument, "an array-element index has exactly one field", model: model)
        }
        if fields.contains(where: \.isID) {
            throw SatchelError(.invalidArgument, "the object id is the key already; it needs no index", model: model)
        }
        if Set(fields).count != fields.count {
            throw SatchelError(.invalidArgument, "index \(self) names a field twice", model: model)
        }
        if kind == .value, let path = fields.first(where: \.reachesIntoArrays) {
            throw SatchelError(
                .invalidArgument,
                "\(path) reaches into arrays: it is indexed element by element, alone (IndexDefinition.elements(of: \"\(path)\"); satchel index MODEL '\(path)')",
                model: model)
        }
    }
}

/// An index as the store keeps it: its definition, its id within the model, its state.
struct StoredIndex: Sendable, Hashable {
    enum State: String, Sendable { case building, ready, dropping }

    var id: Int
    var definition: IndexDefinition
    var state: State
    /// `(idx, model, indexId)`, computed once: every entry starts with it.
    let prefix: [UInt8]

    /// Whether writes keep it up to date (every state but dropping).
    var isMaintained: Bool { state != .dropping }

    /// Stored under `(meta, "index", model, id)`:
    /// `{"fields":[["brand"],["address","city"]],"id":1,"kind":"value","objects":true,"state":"ready"}`
    /// (docs/KEY_LAYOUT.md).
    var json: JSONObject {
        [
            "id": .int(Int64(id)), "kind": .string(definition.kind.rawValue), "state": .string(state.rawValue),
            "fields": .array(definition.fields.map { .array($0.components.map(JSONValue.string)) }),
            "objects": .bool(definition.storesObjects),
        ]
    }

    /// Whether entries hold a copy of their object.
    var storesObjects: Bool { definition.storesObjects }

    init(id: Int, definition: IndexDefinition, state: State, model: String) {
        self.id = id
        self.definition = definition
        self.state = state
        self.prefix = Keys.indexPrefix(model, id)
    }

    init(json: JSONObject, model: String) throws(SatchelError) {
        func bad() -> SatchelError { SatchelError(.corruption, "undecodable index definition") }
        guard let id = json["id"]?.intValue, let kind = json["kind"]?.stringValue.flatMap(IndexDefinition.Kind.init(rawValue:)),
            let state = json["state"]?.stringValue.flatMap(State.init(rawValue:)), let fields = json["fields"]?.arrayValue
        else { throw bad() }
        var paths: [Field] = []
        for field in fields {
            guard let names = field.arrayValue?.compactMap(\.stringValue), !names.isEmpty, names.count == field.arrayValue?.count else { throw bad() }
            paths.append(Field(components: names))
        }
        guard !paths.isEmpty else { throw bad() }
        self.id = Int(id)
        self.state = state
        self.prefix = Keys.indexPrefix(model, Int(id))
        // `objects`; `documents` is its name in an earlier version of the specification.
        let storesObjects = (json["objects"] ?? json["documents"])?.boolValue ?? false
        switch kind {
        case .value: self.definition = IndexDefinition(paths, storesObjects: storesObjects)
        case .arrayElements: self.definition = .elements(of: paths[0])
        case .text: self.definition = .text(paths)
        }
    }

    // MARK: - Entries

    /// The keys this index holds for an object with `attributes`, each `(idx, model, id, …, objectId)`.
    func entries(model: String, objectID: String, attributes: JSONObject) -> [[UInt8]] {
        switch definition.kind {
        case .value:
            return [Keys.indexValueEntry(prefix, values: definition.fields.lazy.map { $0.value(in: attributes) ?? .null }, objectID: objectID)]
        case .text:
            return []  // its postings live in blocks of many objects (``TextBlock``)
        case .arrayElements:
            switch definition.fields[0].reachedValue(in: attributes) {
            case .array(let elements)?:
                var seen = Set<[UInt8]>()
                return elements.compactMap { element in
                    let key = Keys.indexElementEntry(prefix, element: element, objectID: objectID)
                    return seen.insert(key).inserted ? key : nil
                }
            case .string(let s)?:
                return [Keys.indexStringEntry(prefix, string: s, objectID: objectID)]
            default:
                return []
            }
        }
    }
}
