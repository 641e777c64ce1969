/// A model whose objects the app reads and writes as values of its own ``ModelRecord`` type:
/// ``Store/model(_:)-(Record.Type)`` gives one, named by the type, and its reads return
/// `Record`s without an `as:` on every call.
///
/// ```swift
/// let products = try store.model(Product.self)
/// try products.save(Product(id: "p1", name: "Lamp", price: 12))
/// let cheap: [Product] = try products.findAll(where: "price" < 20, order: [SortKey("price")])
/// for try await list in products.observe(Query(where: "price" < 20)) { show(list) }   // [Product]
/// ```
///
/// Everything else (indexes, aggregates, pending changes, raw objects) is on ``model``.
public struct TypedModel<Record: ModelRecord>: Sendable {
    /// The untyped model.
    public let model: Model

    init(_ model: Model) { self.model = model }

    /// Object `id` as a `Record`, or nil when there is none.
    ///
    /// - Throws: ``SatchelError`` `.invalidObject` when the object does not decode as a
    ///   `Record`, naming the model, the object id and the attribute path.
    public func find(_ id: String) throws -> Record? { try model.find(id, as: Record.self) }

    /// The objects `query` selects, as `Record`s, in its order.
    public func findAll(_ query: Query = Query()) throws -> [Record] { try model.findAll(query, as: Record.self) }

    /// The objects matching `condition`, as `Record`s.
    public func findAll(where condition: Condition, order: [SortKey] = [], limit: Int? = nil, offset: Int = 0) throws -> [Record] {
        try model.findAll(where: condition, order: order, limit: limit, offset: offset, as: Record.self)
    }

    /// The first object matching `condition` in `order`, as a `Record`.
    public func findFirst(where condition: Condition, order: [SortKey] = []) throws -> Record? {
        try model.findFirst(where: condition, order: order, as: Record.self)
    }

    /// The number of objects (matching `condition`, when given).
    public func count(where condition: Condition = .all) throws -> Int {
        try condition == .all ? model.count() : model.count(where: condition)
    }

    /// Saves `value` (``Model/save(_:)``: created, or updated per attribute).
    @discardableResult
    public func save(_ value: Record) throws -> Record? { try model.save(value) }

    /// Deletes `value`'s object; false when there was none.
    @discardableResult
    public func delete(_ value: Record) throws -> Bool { try model.delete(value) }

    /// Deletes object `id`; false when there was none.
    @discardableResult
    public func delete(_ id: String) throws -> Bool { try model.delete(id) }

    /// ``Model/observe(_:as:)``: the results of `query` as `Record`s, live.
    public func observe(_ query: Query = Query()) -> AsyncThrowingStream<[Record], any Error> where Record: Sendable {
        model.observe(query, as: Record.self)
    }

    /// ``Model/observe(_:as:)-(String,_)``: object `id` as a `Record`, live.
    public func observe(_ id: String) -> AsyncThrowingStream<Record?, any Error> where Record: Sendable {
        model.observe(id, as: Record.self)
    }
}

extension Store {
    /// The model `Record`'s values are stored in, typed: its reads return `Record`s (the model
    /// is registered as a property bag when new).
    public func model<Record: ModelRecord>(_ type: Record.Type) throws -> TypedModel<Record> {
        TypedModel(try model(Record.modelName))
    }
}

extension Model {
    /// The results of `query` as `T`s now, and again after every commit that changes them
    /// (``observe(_:)``, decoded); fails with `.invalidObject` when an object does not decode.
    public func observe<T: ModelRecord & Sendable>(_ query: Query = Query(), as type: T.Type) -> AsyncThrowingStream<[T], any Error> {
        let name = name
        return relaying(observeChanges(query)) { try $0.objects.map { try Model.decode($0, as: type, model: name) } }
    }

    /// Object `id` as a `T` (nil when missing) now, and again after every commit that changes
    /// it (``observe(_:)-(String)``, decoded).
    public func observe<T: ModelRecord & Sendable>(_ id: String, as type: T.Type) -> AsyncThrowingStream<T?, any Error> {
        let name = name
        return relaying(observingID(id)) {
            try $0.objects.first.map { try Model.decode($0, as: type, model: name) }
        }
    }
}
