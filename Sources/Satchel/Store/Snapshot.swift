import Synchronization

/// A consistent, read-only view of the whole store, every partition as it was at one moment: the
/// reads of a ``Store/read(_:)`` block.
///
/// ```swift
/// let (orders, total) = try store.read { snapshot in
///     let orders = try snapshot.findAll(Query(where: "status" == "open"), in: ordersModel)
///     return (orders, try snapshot.count(where: .all, in: ordersModel))
/// }
/// ```
///
/// Writes that land while the block runs stay invisible to it, and a snapshot takes no lock: it
/// never waits for a writer, nor makes one wait. It lives only inside its block, and it is not
/// `Sendable`: keep it on the block's thread.
public final class Snapshot: StoreReading {
    let store: Store
    /// The catalog as it was (model definitions, indexes and their states, statistics).
    let catalog: Catalog
    /// Per partition (in `Partition.allCases` order), nil for one not open: it held nothing.
    private let partitions: [LevelDBSnapshot?]
    private var finished = false

    init(store: Store) throws {
        self.store = store
        // The catalog and the databases at the same moment: index states and statistics change in
        // the catalog only after their batch has landed, so under its lock no later state of an
        // index can be in the databases (an index the copy calls ready has all its entries).
        (catalog, partitions) = try store.catalog.withLock { catalog in
            let open = store.openPartitions
            return (catalog, try Partition.allCases.map { partition in try open.first { $0.partition == partition }?.database.makeSnapshot() })
        }
    }

    func finish() { finished = true }

    private func checkOpen() {
        precondition(!finished, "a Satchel snapshot was used after its read block returned")
    }

    /// The partition's snapshot; nil when it was not open, so held nothing (no model of the
    /// snapshot's catalog lives there: defining one opens its partition first).
    func snapshot(of partition: Partition) -> LevelDBSnapshot? { partitions[Partition.allCases.firstIndex(of: partition)!] }

    func entry(of model: Model) throws(SatchelError) -> ModelEntry {
        guard let entry = catalog.models[NameKey(model.name)] else {
            throw SatchelError(.notFound, "no model named '\(model.name)'", model: model.name)
        }
        return entry
    }

    // MARK: - Objects

    /// The object `id` of `model`, or nil.
    public func find(_ id: String, in model: Model) throws -> Object? {
        checkOpen()
        let partition = try entry(of: model).definition.partition
        return try store.database(partition).withValue(forKey: Keys.object(prefix: model.objectPrefix, id), snapshot: snapshot(of: partition)) {
            bytes in
            try bytes.map { Object(id: id, storedAttributes: try StoredObject.decode($0, model: model.name, id: id)) }
        }
    }

    /// The objects `query` selects, in its order, read through the indexes the snapshot has.
    public func findAll(_ query: Query, in model: Model) throws -> [Object] { try cursor(query, in: model).all() }

    /// The first object matching `condition` in `order` (any match without an order): on an
    /// indexed field, a handful of keys.
    public func findFirst(where condition: Condition, order: [SortKey], in model: Model) throws -> Object? {
        try cursor(Query(where: condition, order: order, limit: 1), in: model).next()
    }

    /// The number of objects matching `condition`.
    public func count(where condition: Condition, in model: Model) throws -> Int {
        try cursor(Query(where: condition), in: model).countMatches()
    }

    /// How `query` would run over this snapshot's catalog.
    public func explain(_ query: Query, in model: Model) throws -> QueryPlan {
        checkOpen()
        return Planner.plan(query, model: model.name, entry: try entry(of: model), objectPrefix: model.objectPrefix).explain()
    }

    public func modelDefinition(named name: String) -> ModelDefinition? { catalog.models[NameKey(name)]?.definition }

    /// The results of `query`, read lazily; valid inside the block only.
    public func cursor(_ query: Query, in model: Model) throws -> ObjectCursor {
        checkOpen()
        let entry = try entry(of: model)
        try query.condition.refuseArrayCrossings(entry.statistics, model: model.name)
        let plan = Planner.plan(query, model: model.name, entry: entry, objectPrefix: model.objectPrefix)
        try Planner.guardScan(plan, query, model: model)
        let partition = entry.definition.partition
        return try ObjectCursor(model: model, query: query, plan: plan, partition: partition, snapshot: snapshot(of: partition))
    }

    /// The pending changes of `model`, by object id.
    public func pendingChanges(of model: Model) throws -> [PendingChange] {
        try objectSyncStates(of: model).compactMap(\.records.pending)
    }

    // MARK: - Sync records (the engine's)

    func access(_ model: Model) throws(SatchelError) -> SyncRecordsAccess {
        checkOpen()
        let entry = try entry(of: model)
        let partition = entry.definition.partition
        let db = try store.database(partition)
        let snapshot = snapshot(of: partition)
        return SyncRecordsAccess(
            model: model, statistics: entry.statistics, stored: entry.statistics, value: { key, _ in try db.get(key, snapshot: snapshot) },
            scan: { prefix, body in
                let iterator = try db.makeIterator(snapshot: snapshot)
                iterator.seek(prefix)
                while iterator.isValid && iterator.keyHasPrefix(prefix) {
                    try iterator.withKey { key in try iterator.withValue { value in try body(key, value) } }
                    iterator.next()
                }
                try iterator.checkError()
            })
    }

    /// What the sync engine keeps beside object `id` of `model`.
    package func objectSyncState(_ model: Model, _ id: String) throws -> ObjectSyncState { try access(model).records(id) }

    /// Every object of `model` with a pending change, a change in flight or a refused change, by
    /// id (their versions are not read).
    package func objectSyncStates(of model: Model) throws -> [(id: String, records: ObjectSyncState)] { try access(model).allRecords() }

    /// The model's sync state.
    package func syncState(_ model: Model) throws -> ModelSyncState { try access(model).syncState() }
}

@available(*, unavailable)
extension Snapshot: Sendable {}

extension Store {
    /// Runs `body` on a ``Snapshot``: one consistent view of every partition, as it is when
    /// `read` begins. It takes no lock: writes go on meanwhile, invisible to it.
    ///
    /// - Returns: what `body` returns.
    public func read<T>(_ body: (Snapshot) throws -> T) throws -> T {
        let snapshot = try Snapshot(store: self)
        defer { snapshot.finish() }
        return try body(snapshot)
    }
}
