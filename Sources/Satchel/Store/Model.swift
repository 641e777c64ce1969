import Synchronization

/// A handle on one model of a store: where its objects are created, read, changed and queried.
///
/// Get one from ``Store/model(_:)`` or ``Store/register(_:)``. Each write method is its own
/// small transaction; to group writes, use ``Store/bulkUpdate(durable:_:)`` and the
/// ``Transaction``'s methods.
///
/// ```swift
/// let products = try store.model("Product")
/// let p = try products.create(["name": "Widget", "price": 9.5])
/// try products.update(p.id, with: ["price": 12])
/// let cheap = try products.findAll(where: ["price": 12])
/// try products.delete(p.id)
/// ```
///
/// Thread safety: `Model` is a `Sendable` value; its methods may be called from any thread.
public struct Model: Sendable, Hashable {
    /// The store the model belongs to.
    public let store: Store
    /// The model's name.
    public let name: String
    /// `(obj, model)`: computed once per handle, reused by every key of the model.
    let objectPrefix: [UInt8]
    /// The model's partition as this handle last read it from the catalog, shared by its copies.
    private let remembered = RememberedPartition()

    init(store: Store, name: String) {
        self.store = store
        self.name = name
        self.objectPrefix = Keys.objectPrefix(name)
    }

    /// The model's partition: read from the catalog once per catalog version, not per read (a
    /// read by id would otherwise copy the model's whole catalog entry to learn it). A model
    /// dropped or changed since is found out by the catalog's version, and reads through the
    /// partition refuse a closed store.
    var partition: Partition {
        get throws {
            let version = store.catalogVersion.load(ordering: .acquiring)
            if let partition = remembered.partition(at: version) { return partition }
            let partition = try store.entry(name).definition.partition
            remembered.set(partition, at: version)
            return partition
        }
    }

    public static func == (a: Model, b: Model) -> Bool { a.store === b.store && UTF8Order.equal(a.name, b.name) }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(store))
        UTF8Order.hash(name, into: &hasher)
    }

    /// The model's stored definition.
    public var definition: ModelDefinition {
        get throws { try store.entry(name).definition }
    }

    // MARK: - Writes

    /// Creates an object; see ``Transaction/create(_:in:)``.
    @discardableResult
    public func create(_ attributes: JSONObject) throws -> Object {
        try store.write { try $0.create(attributes, in: self) }
    }

    /// Replaces (or creates) an object whole; see ``Transaction/save(_:in:)``.
    @discardableResult
    public func save(_ object: Object) throws -> Object? {
        try store.write { try $0.save(object, in: self) }
    }

    /// Replaces the object with the `object` id given, or creates one with a new id; see
    /// ``Transaction/put(_:in:)``.
    @discardableResult
    public func put(_ attributes: JSONObject) throws -> Object? {
        try store.write { try $0.put(attributes, in: self) }
    }

    /// Merges attributes into an object; see ``Transaction/update(_:with:in:)``.
    @discardableResult
    public func update(_ id: String, with attributes: JSONObject) throws -> Object? {
        try store.write { try $0.update(id, with: attributes, in: self) }
    }

    /// ``create(_:)-(JSONObject)`` with the app's values: `["name": name, "price": price]`
    /// (``JSONValueConvertible``; a `nil` optional is null).
    @discardableResult
    public func create(_ attributes: [String: any JSONValueConvertible]) throws -> Object { try create(JSONObject(converting: attributes)) }

    /// ``put(_:)-(JSONObject)`` with the app's values.
    @discardableResult
    public func put(_ attributes: [String: any JSONValueConvertible]) throws -> Object? { try put(JSONObject(converting: attributes)) }

    /// ``update(_:with:)-(_,JSONObject)`` with the app's values: `["price": newPrice]` (a `nil`
    /// optional removes its attribute).
    @discardableResult
    public func update(_ id: String, with attributes: [String: any JSONValueConvertible]) throws -> Object? {
        try update(id, with: JSONObject(converting: attributes))
    }

    /// Deletes an object; returns whether it existed.
    @discardableResult
    public func delete(_ id: String) throws -> Bool {
        try store.write { try $0.delete(id, in: self) }
    }

    /// Deletes, in one transaction, every object whose attributes equal `conditions`.
    @discardableResult
    public func delete(where conditions: JSONObject) throws -> Int {
        try delete(where: Condition(equalities: conditions))
    }

    // MARK: - Reads

    /// The object `id`, or nil.
    public func find(_ id: String) throws -> Object? {
        let partition = try self.partition
        let key = Keys.object(prefix: objectPrefix, id)
        return try store.database(partition).withValue(forKey: key) { bytes in
            try bytes.map { Object(id: id, storedAttributes: try StoredObject.decode($0, model: name, id: id)) }
        }
    }

    /// Every object of the model, by id.
    public func findAll() throws -> [Object] {
        var result: [Object] = []
        try forEach { result.append($0) }
        return result
    }

    /// Every object whose attributes equal `conditions` (RhoConnect's `find_all(conditions)`).
    /// The condition `object` matches the id. A null condition matches nothing. Keys are
    /// top-level attribute names as written (see ``Condition/init(equalities:)``); a path is a
    /// ``Field``.
    public func findAll(where conditions: JSONObject) throws -> [Object] {
        try findAll(Query(where: conditions))
    }

    /// The first object whose attributes equal `conditions`.
    public func findFirst(where conditions: JSONObject) throws -> Object? {
        try findFirst(where: Condition(equalities: conditions))
    }

    /// The number of objects (kept as a statistic: no scan).
    public func count() throws -> Int { try store.entry(name).statistics.objects }

    /// The number of objects whose attributes equal `conditions`.
    public func count(where conditions: JSONObject) throws -> Int {
        try count(where: Condition(equalities: conditions))
    }

    /// Visits every object by id on one consistent view of the data.
    ///
    /// A model of a few thousand objects or more is read ahead on a second thread while `body`
    /// runs on the caller's; `body` is never called from another thread.
    public func forEach(_ body: (Object) throws -> Void) throws {
        try scanObjects { object in
            try body(object)
            return true
        }
    }

    /// The number of objects from which a scan reads ahead on a second thread: below it, the
    /// thread would cost more than it saves.
    static let readAheadObjects = 4096

    /// Visits objects by id until `body` returns false.
    func scanObjects(_ body: (Object) throws -> Bool) throws {
        let partition = try definition.partition
        // A LevelDB iterator reads an implicit snapshot: concurrent writes stay invisible. A full
        // scan does not fill the block cache (LevelDB's advice for bulk reads): it would evict the
        // hot blocks for data read once.
        let database = try store.database(partition)
        let prefix = objectPrefix
        // A large model is read on a second thread, a chunk ahead, while this one decodes.
        if try store.entry(name).statistics.objects >= Self.readAheadObjects {
            let reader = database.readAhead(from: prefix, before: Keys.prefixEnd(prefix), snapshot: try database.makeSnapshot())
            defer { reader.close() }
            while let entries = try reader.next() {
                let going = try entries.forEach { key, value in
                    let id = try Keys.objectID(fromKey: key, prefixLength: prefix.count)
                    return try body(Object(id: id, storedAttributes: try StoredObject.decode(value, model: name, id: id)))
                }
                guard going else { return }
            }
            return
        }
        let iterator = try database.makeIterator(fillCache: false)
        iterator.seek(prefix)
        while iterator.isValid && iterator.keyHasPrefix(prefix) {
            let object = try iterator.withKey { key in
                let id = try Keys.objectID(fromKey: key, prefixLength: prefix.count)
                return Object(id: id, storedAttributes: try iterator.withValue { try StoredObject.decode($0, model: name, id: id) })
            }
            guard try body(object) else { return }
            iterator.next()
        }
        try iterator.checkError()
    }

    // MARK: - Change log

    /// Whether the model has local changes the server has not confirmed: creates, updates or
    /// deletes not yet pushed, pushed ones whose outcome is not known yet (in flight: a sync
    /// that failed, with its answer lost, leaves them so), and ones the server refused (kept as
    /// refused changes until the app resolves them). An app's "not yet saved to the server" badge.
    /// ``statistics()`` counts each kind; `changeFates(model:)` (SatchelSync) lists every
    /// change with where it stands.
    public var isChanged: Bool {
        get throws {
            let statistics = try store.entry(name).statistics
            return statistics.pendingTotal + statistics.inFlight + statistics.errors > 0
        }
    }

    /// The model's pending changes — not pushed yet — by object id: the change log. Changes in
    /// flight or refused are not among them (see ``isChanged``).
    public func pendingChanges() throws -> [PendingChange] {
        let partition = try definition.partition
        let prefix = Keys.changePrefix(name)
        let iterator = try store.database(partition).makeIterator()
        iterator.seek(prefix)
        var result: [PendingChange] = []
        while iterator.isValid && iterator.keyHasPrefix(prefix) {
            let id = try iterator.withKey { try Keys.objectID(fromKey: $0, prefixLength: prefix.count) }
            let record = try iterator.withValue { try StoredChange(decoding: $0) }
            result.append(record.pendingChange(model: name, objectID: id))
            iterator.next()
        }
        try iterator.checkError()
        return result
    }

    // MARK: - Statistics

    /// Counts and sizes for `satchel stats`.
    public func statistics() throws -> ModelStatistics {
        let entry = try store.entry(name)
        let db = try store.database(entry.definition.partition)
        // The objects, their changes and their index entries (which may hold copies of them).
        let bytes = try [objectPrefix, Keys.changePrefix(name), Keys.indexModelPrefix(name)].reduce(0) { total, prefix in
            total + (try db.approximateSize(start: prefix, limit: Keys.prefixEnd(prefix)))
        }
        return ModelStatistics(
            model: name, partition: entry.definition.partition, objects: entry.statistics.objects,
            pendingCreates: entry.statistics.pendingCreates, pendingUpdates: entry.statistics.pendingUpdates,
            pendingDeletes: entry.statistics.pendingDeletes, inFlight: entry.statistics.inFlight, refusedChanges: entry.statistics.errors,
            approximateBytes: Int(bytes))
    }
}

/// Counts and sizes of one model.
public struct ModelStatistics: Sendable, Hashable {
    public var model: String
    public var partition: Partition
    /// The number of objects.
    public var objects: Int
    /// Pending local creates, updates and deletes.
    public var pendingCreates: Int
    public var pendingUpdates: Int
    public var pendingDeletes: Int
    /// Changes pushed whose outcome is not known yet.
    public var inFlight: Int
    /// Changes the server refused, kept until resolved.
    public var refusedChanges: Int
    /// LevelDB's estimate of the bytes the model's objects, changes and index entries take on
    /// disk (0 until a memtable flush).
    public var approximateBytes: Int
}

extension ModelStatistics {
    @available(*, deprecated, renamed: "refusedChanges")
    public var recordErrors: Int { refusedChanges }
}

extension Object {
    /// Whether every equality condition holds (RhoConnect's `find_all(conditions)`): each
    /// attribute equals the given value, numbers comparing numerically and strings by Unicode
    /// scalars. The condition `object` compares the id. A missing attribute, or a null
    /// condition, never matches.
    public func matches(_ conditions: JSONObject) -> Bool { Condition(equalities: conditions).matches(self) }
}

/// A partition and the catalog version it was read at, in one word (the version shifted left by
/// two bits, the partition's number plus one below them; zero: nothing read yet), so that a
/// handle's copies share it without a lock.
private final class RememberedPartition: Sendable {
    private let word = Atomic<Int>(0)

    func partition(at version: Int) -> Partition? {
        let word = word.load(ordering: .relaxed)
        guard word != 0, word >> 2 == version else { return nil }
        switch word & 3 {
        case 1: return .user
        case 2: return .app
        default: return .local
        }
    }

    func set(_ partition: Partition, at version: Int) {
        let number =
            switch partition {
            case .user: 1
            case .app: 2
            case .local: 3
            }
        word.store(version << 2 | number, ordering: .relaxed)
    }
}
