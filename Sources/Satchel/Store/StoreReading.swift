/// The reads of a store, one protocol for the two places they run: a ``Snapshot``
/// (`store.read { snapshot in … }`: one consistent state, no lock) and a ``Transaction``
/// (`store.bulkUpdate { tx in … }`: the store as the transaction sees it, its own writes
/// included). Code written against `some StoreReading` works in both, as GRDB's `Database` does
/// for its reads and writes:
///
/// ```swift
/// func cheapest(_ db: some StoreReading, _ products: Model) throws -> Object? {
///     try db.findFirst(where: "price" > 0, order: [.ascending("price")], in: products)
/// }
/// let now = try store.read { try cheapest($0, products) }
/// try store.bulkUpdate { tx in
///     if let p = try cheapest(tx, products) { try tx.update(p.id, with: ["featured": true], in: products) }
/// }
/// ```
public protocol StoreReading {
    /// The definition of the model named `name`, as this read sees the catalog (nil: none).
    func modelDefinition(named name: String) -> ModelDefinition?
    /// The object `id` of `model`, or nil.
    func find(_ id: String, in model: Model) throws -> Object?
    /// The objects `query` selects, in its order, its projection applied; the planner picks the
    /// indexes.
    func findAll(_ query: Query, in model: Model) throws -> [Object]
    /// The first object matching `condition` in `order` (any match without an order).
    func findFirst(where condition: Condition, order: [SortKey], in model: Model) throws -> Object?
    /// The number of objects matching `condition`.
    func count(where condition: Condition, in model: Model) throws -> Int
    /// How `query` would run: the index or scan chosen, the conditions checked on each object,
    /// and whether a sort is needed.
    func explain(_ query: Query, in model: Model) throws -> QueryPlan
    /// The pending changes of `model` (its change log), by object id.
    func pendingChanges(of model: Model) throws -> [PendingChange]
}

extension StoreReading {
    /// Every object of `model`, by id.
    public func findAll(in model: Model) throws -> [Object] {
        try findAll(Query(order: [.ascending(Field(Object.idAttribute))]), in: model)
    }

    /// Every object of `model` whose attributes equal `conditions` (RhoConnect's
    /// `find_all(conditions)`), by id.
    public func findAll(where conditions: JSONObject, in model: Model) throws -> [Object] {
        try findAll(Query(where: Condition(equalities: conditions), order: [.ascending(Field(Object.idAttribute))]), in: model)
    }

    /// The first object matching `condition` (any match).
    public func findFirst(where condition: Condition, in model: Model) throws -> Object? {
        try findFirst(where: condition, order: [], in: model)
    }

    public func findFirst(where condition: Condition, order: [SortKey], in model: Model) throws -> Object? {
        try findAll(Query(where: condition, order: order, limit: 1), in: model).first
    }

    public func count(where condition: Condition, in model: Model) throws -> Int {
        try findAll(Query(where: condition), in: model).count
    }

    /// The object `id` of `model` with the associations named by `paths` resolved into nested
    /// objects, or nil; see ``Model/find(_:including:)``.
    ///
    /// - Throws: ``SatchelError`` `.invalidArgument` for a path whose attribute is not an
    ///   association of its model (the message names the model's associations).
    public func find(_ id: String, in model: Model, including paths: [String]) throws -> Object? {
        let include = try Include(paths, model: model.name, definitions: modelDefinition(named:))
        guard let object = try find(id, in: model) else { return nil }
        return Object(id: id, storedAttributes: try resolve(object.attributes, include, store: model.store))
    }

    /// `attributes` with the associations of `include` resolved.
    private func resolve(_ attributes: JSONObject, _ include: Include, store: Store) throws -> JSONObject {
        var result = attributes
        for (attribute, next) in include.associations {
            switch attributes[attribute] {
            case .string(let id)?:
                if let target = try load(id, next, store: store) { result[attribute] = .object(target) }
            case .array(let elements)?:
                result[attribute] = .array(
                    try elements.map { element in
                        guard let id = element.stringValue, let target = try load(id, next, store: store) else { return element }
                        return .object(target)
                    })
            default:
                continue
            }
        }
        return result
    }

    /// Object `id` of `include`'s model as JSON (its id under `object`), its own associations
    /// resolved; nil when it is missing.
    private func load(_ id: String, _ include: Include, store: Store) throws -> JSONObject? {
        guard modelDefinition(named: include.model) != nil, let object = try find(id, in: Model(store: store, name: include.model)) else {
            return nil
        }
        var json = try resolve(object.attributes, include, store: store)
        json[Object.idAttribute] = .string(id)
        return json
    }
}

/// The association paths of one `find(_:in:including:)`, as a tree: a model, and for each of its
/// association attributes named, the tree of the model it points to.
struct Include {
    var model: String
    var associations: [(attribute: String, include: Include)] = []

    init(model: String) { self.model = model }

    /// The tree of `paths` from `model`, each attribute checked against its model's associations.
    init(_ paths: [String], model: String, definitions: (String) -> ModelDefinition?) throws(SatchelError) {
        self.init(model: model)
        for path in paths {
            let components = path.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard !components.contains(where: \.isEmpty) else {
                throw SatchelError(
                    .invalidArgument, "'\(path)' is not an association path: name attributes joined by dots, e.g. customer.address",
                    model: model)
            }
            try add(components[...], definitions: definitions)
        }
    }

    private mutating func add(_ components: ArraySlice<String>, definitions: (String) -> ModelDefinition?) throws(SatchelError) {
        guard let attribute = components.first else { return }
        let declared = definitions(model)?.associations ?? [:]
        guard let target = declared[attribute] else {
            let names = declared.keys.sorted(by: UTF8Order.less).joined(separator: ", ")
            throw SatchelError(
                .invalidArgument,
                "'\(attribute)' is not an association of \(model) (\(names.isEmpty ? "it has none" : "its associations: \(names)"))",
                model: model)
        }
        if let index = associations.firstIndex(where: { UTF8Order.equal($0.attribute, attribute) }) {
            try associations[index].include.add(components.dropFirst(), definitions: definitions)
        } else {
            var next = Include(model: target)
            try next.add(components.dropFirst(), definitions: definitions)
            associations.append((attribute, next))
        }
    }
}
