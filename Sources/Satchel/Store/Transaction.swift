import Synchronization

/// The writes of one ``Store/bulkUpdate(durable:_:)`` block.
///
/// Writes are buffered and land together, in one LevelDB write batch, when the block returns;
/// when it throws, nothing lands. Reads through the transaction (``find(_:in:)``,
/// ``findAll(in:)``) see the block's own writes. Every write applies the null rule (a null
/// attribute is removed; an object left without attributes is deleted), validates fixed schemas,
/// and records the pending change of synced models in the same batch.
///
/// A transaction writes the models of one partition. It lives only inside its block: using it
/// afterwards stops the program. It is not `Sendable`: keep it on the block's thread.
public final class Transaction {
    let store: Store
    /// Writes not yet committed that reads must see: object and change-log keys → new value,
    /// or nil for a delete. Keys of `partition` only.
    var overlay = Overlay()
    /// Index entry writes, in order (a later write of a key wins, as in the batch). Nothing reads
    /// them back before the commit, so they skip the overlay's hashing.
    private var indexWrites: [([UInt8], [UInt8]?)] = []
    /// The entry of the model last used, valid while the catalog version is unchanged, and the
    /// working statistics of the model last written: a bulk update usually writes one model many
    /// times, and these spare a catalog lookup and two dictionary operations per write.
    private var cachedEntry: (name: String, version: Int, entry: ModelEntry)?
    private var currentStatistics: (name: String, statistics: StoredStatistics)?
    private(set) var partition: Partition?
    /// The models whose objects or index entries this transaction has written: a query of any
    /// other model sees exactly what the store holds.
    private var touchedModels: Set<NameKey> = []
    private var lastTouched: String?
    /// Working copies of the statistics of the models this transaction touched.
    private var statistics: [NameKey: StoredStatistics] = [:]
    private var finished = false
    /// Whether the transaction gave an object a new id (``rename(_:from:to:)``).
    var renamed = false
    /// Whether it left references in other partitions to rewrite once it lands
    /// (``rewriteReferences(to:renames:)``).
    var leftRewrites = false
    /// Changes to the in-memory catalog that take effect once the batch is written.
    private var catalogUpdates: [(inout Catalog) -> Void] = []

    init(store: Store) { self.store = store }

    func finish() { finished = true }

    func checkOpen() {
        precondition(!finished, "a Satchel transaction was used after its bulkUpdate block returned")
    }

    // MARK: - Public writes

    /// Creates an object. Its id is the `object` attribute when given (a string), or a new
    /// time-ordered id. Null attributes are dropped.
    ///
    /// - Returns: the stored object.
    /// - Throws: ``SatchelError`` `.alreadyExists` when an object has that id, `.invalidObject`
    ///   when no attribute remains or `object` is not a string, `.schemaViolation` for a
    ///   fixed-schema model.
    @discardableResult
    public func create(_ attributes: JSONObject, in model: Model) throws -> Object {
        checkOpen()
        let entry = try entry(of: model)
        let definition = entry.definition
        let (idValue, new) = attributes.splitting(Object.idAttribute)
        let givenID = try Self.id(from: idValue, model: model.name)
        let id = givenID ?? ObjectID.generate()
        if new.isEmpty {
            throw SatchelError(.invalidObject, "an object needs at least one non-null attribute", model: model.name, objectID: id)
        }
        try definition.validate(new, objectID: id)
        if givenID != nil, try readObject(model, id, partition: definition.partition) != nil {
            throw SatchelError(.alreadyExists, "model '\(model.name)' already has an object '\(id)'", model: model.name, objectID: id)
        }
        try apply(entry, model, id: id, old: nil, new: new)
        return Object(id: id, attributes: new)
    }

    /// Replaces an object whole, creating it when missing (an upsert). Attributes the object had
    /// and `object` lacks are removed; null attributes are dropped; an object left with no
    /// attributes is deleted.
    ///
    /// - Returns: the stored object, or nil when the null rule deleted it (or left nothing to create).
    @discardableResult
    public func save(_ object: Object, in model: Model) throws -> Object? {
        checkOpen()
        let entry = try entry(of: model)
        let definition = entry.definition
        let new = object.attributes.removingNulls()
        try definition.validate(new, objectID: object.id)
        let old = try readObject(model, object.id, partition: definition.partition)
        if new.isEmpty {
            if let old { try apply(entry, model, id: object.id, old: old, new: nil) }
            return nil
        }
        try apply(entry, model, id: object.id, old: old, new: new)
        return Object(id: object.id, attributes: new)
    }

    /// Merges `attributes` into object `id`: each given attribute replaces the old value whole,
    /// a null removes it, and an object left with no attributes is deleted.
    ///
    /// - Returns: the stored object, or nil when the null rule deleted it.
    /// - Throws: ``SatchelError`` `.notFound` when there is no such object; `.invalidObject`
    ///   when `attributes` carries an `object` id other than `id`.
    @discardableResult
    public func update(_ id: String, with attributes: JSONObject, in model: Model) throws -> Object? {
        checkOpen()
        let entry = try entry(of: model)
        let definition = entry.definition
        if let given = try Self.id(from: attributes[Object.idAttribute], model: model.name), !UTF8Order.equal(given, id) {
            throw SatchelError(.invalidObject, "an update cannot change the object id", model: model.name, objectID: id)
        }
        guard let old = try readObject(model, id, partition: definition.partition) else {
            throw SatchelError(.notFound, "model '\(model.name)' has no object '\(id)'", model: model.name, objectID: id)
        }
        var new = old
        for (name, value) in attributes where !UTF8Order.equal(name, Object.idAttribute) { new[name] = value.isNull ? nil : value }
        try definition.validate(new, objectID: id)
        if new.isEmpty {
            try apply(entry, model, id: id, old: old, new: nil)
            return nil
        }
        if !new.isIdentical(to: old) { try apply(entry, model, id: id, old: old, new: new) }
        return Object(id: id, attributes: new)
    }

    /// Deletes object `id`.
    ///
    /// - Returns: whether the object existed.
    @discardableResult
    public func delete(_ id: String, in model: Model) throws -> Bool {
        checkOpen()
        let entry = try entry(of: model)
        guard let old = try readObject(model, id, partition: entry.definition.partition) else { return false }
        try apply(entry, model, id: id, old: old, new: nil)
        return true
    }

    /// Deletes every object whose attributes equal `conditions` (RhoConnect's `delete_all`).
    ///
    /// - Returns: how many objects were deleted.
    @discardableResult
    public func delete(where conditions: JSONObject, in model: Model) throws -> Int {
        try delete(where: Condition(equalities: conditions), in: model)
    }

    /// Deletes every object matching `condition`.
    ///
    /// - Returns: how many objects were deleted.
    @discardableResult
    public func delete(where condition: Condition, in model: Model) throws -> Int {
        checkOpen()
        let matches = try findAll(Query(where: condition, select: []), in: model)
        for object in matches { try delete(object.id, in: model) }
        return matches.count
    }

    // MARK: - Public reads

    /// The object `id`, as this transaction sees it (its own writes included).
    public func find(_ id: String, in model: Model) throws -> Object? {
        checkOpen()
        let partition = try entry(of: model).definition.partition
        return try readObject(model, id, partition: partition).map { Object(id: id, attributes: $0) }
    }

    /// Every object of `model`, by id, as this transaction sees them.
    public func findAll(in model: Model) throws -> [Object] {
        try findAll(Query(order: [.ascending(Field(Object.idAttribute))]), in: model)
    }

    /// Every object of `model` whose attributes equal `conditions`, by id.
    public func findAll(where conditions: JSONObject, in model: Model) throws -> [Object] {
        try findAll(Query(where: Condition(equalities: conditions), order: [.ascending(Field(Object.idAttribute))]), in: model)
    }

    /// The objects `query` selects, as this transaction sees them. Before the transaction
    /// has written to the model's partition the query uses indexes; after, it scans the model
    /// and merges the transaction's own writes.
    public func findAll(_ query: Query, in model: Model) throws -> [Object] {
        checkOpen()
        try query.validate()
        let partition = try store.entry(model.name).definition.partition
        if partition != self.partition || !touchedModels.contains(NameKey(model.name)) {
            // Nothing of the model pending here, and this thread holds the writer lock: the store
            // is this transaction's view of it (indexes included).
            return try model.findAll(query)
        }
        var matches: [Object] = []
        let prefix = model.objectPrefix
        try scan(prefix: prefix, partition: partition) { key, value in
            let id = try Keys.objectID(fromKey: key, prefixLength: prefix.count)
            let object = Object(id: id, storedAttributes: try StoredObject.decode(value, model: model.name, id: id))
            if query.condition.matches(object) { matches.append(object) }
        }
        if !query.order.isEmpty { matches = Sorter(order: query.order).sort(matches) }
        var result = matches.dropFirst(query.offset).map(query.project)
        if let limit = query.limit, result.count > limit { result.removeLast(result.count - limit) }
        return result
    }

    // MARK: - The write primitive

    /// Moves object `id` from `old` to `new` (nil: deleted): the object, the statistics and the
    /// coalesced pending change.
    func apply(_ entry: ModelEntry, _ model: Model, id: String, old: JSONObject?, new: JSONObject?, recordChange: Bool = true) throws {
        let definition = entry.definition
        try claim(definition.partition, model: model.name)
        touch(model.name)
        let key = Keys.object(prefix: model.objectPrefix, id)
        var statistics = try workingStatistics(model.name)
        let bytes = try new.map { try StoredObject.encode($0, model: model.name, id: id) }
        overlay[key] = .some(bytes)
        statistics.objects += (new == nil ? 0 : 1) - (old == nil ? 0 : 1)
        defer { setStatistics(statistics, model: model.name) }
        // Index entries move in the same batch as the object. An index that stores objects
        // rewrites its entries whenever the object changes.
        for index in entry.indexes where index.isMaintained {
            let before = old.map { index.entries(model: model.name, objectID: id, attributes: $0) } ?? []
            let after = new.map { index.entries(model: model.name, objectID: id, attributes: $0) } ?? []
            if before == after && !index.storesObjects { continue }
            var delta = 0
            for entryKey in before where !after.contains(entryKey) {
                indexWrites.append((entryKey, nil))
                delta -= 1
            }
            for entryKey in after {
                let existed = before.contains(entryKey)
                if existed && !index.storesObjects { continue }
                indexWrites.append((entryKey, index.storesObjects ? bytes! : []))
                if !existed { delta += 1 }
            }
            statistics.adjustIndex(index.id, by: delta)
        }
        guard recordChange && definition.recordsChanges else { return }
        let incoming: ChangeRecord
        switch (old, new) {
        case (nil, let new?): incoming = ChangeRecord(kind: .create, attributes: new)
        case (let old?, nil): incoming = ChangeRecord(kind: .delete, attributes: old)
        case (let old?, let new?):
            let changes = Self.diff(old, new)
            if changes.isEmpty { return }
            incoming = ChangeRecord(kind: .update, attributes: changes)
        case (nil, nil): return
        }
        let changeKey = Keys.change(model.name, id)
        let existing = try read(changeKey, partition: definition.partition).map { bytes in
            try bytes.withUnsafeBytes { try ChangeRecord(decoding: $0) }
        }
        let merged = ChangeRecord.coalesce(existing, incoming)
        if merged != existing {
            overlay[changeKey] = .some(merged?.encoded)
            statistics.adjustPending(existing?.kind, by: -1)
            statistics.adjustPending(merged?.kind, by: 1)
        }
    }

    /// The attributes that differ from `old` to `new`: new values, and null for removed ones.
    static func diff(_ old: JSONObject, _ new: JSONObject) -> JSONObject {
        var changes = JSONObject()
        for (name, value) in new where !(old[name].map { $0.isIdentical(to: value) } ?? false) { changes[name] = value }
        for (name, _) in old where !new.contains(name) { changes[name] = .null }
        return changes
    }

    /// The id an `object` attribute gives, when it is a string (nil when absent or null).
    private static func id(from value: JSONValue?, model: String) throws(SatchelError) -> String? {
        guard let value else { return nil }
        switch value {
        case .string(let id): return id
        case .null: return nil
        default:
            throw SatchelError(.invalidObject, "the object id ('object') must be a string, got \(value.kindName)", model: model)
        }
    }

    /// Notes that this transaction wrote objects or index entries of `model`.
    private func touch(_ model: String) {
        if let lastTouched, UTF8Order.equal(lastTouched, model) { return }
        touchedModels.insert(NameKey(model))
        lastTouched = model
    }

    func claim(_ partition: Partition, model: String) throws(SatchelError) {
        if let claimed = self.partition, claimed != partition {
            throw SatchelError(
                .crossPartition,
                "a transaction writes one partition: it has written '\(claimed.rawValue)', and model '\(model)' is in '\(partition.rawValue)'",
                model: model)
        }
        self.partition = partition
    }

    func workingStatistics(_ model: String) throws(SatchelError) -> StoredStatistics {
        if let current = currentStatistics, UTF8Order.equal(current.name, model) { return current.statistics }
        if let statistics = statistics[NameKey(model)] { return statistics }
        return try store.entry(model).statistics
    }

    /// The model's catalog entry, cached while the catalog does not change.
    func entry(of model: Model) throws(SatchelError) -> ModelEntry {
        let version = store.catalogVersion.load(ordering: .acquiring)
        if let cached = cachedEntry, cached.version == version, UTF8Order.equal(cached.name, model.name) { return cached.entry }
        let entry = try store.entry(model.name)
        cachedEntry = (model.name, version, entry)
        return entry
    }

    /// Moves the cached working statistics into `statistics`.
    private func flushStatistics() {
        if let current = currentStatistics { statistics[NameKey(current.name)] = current.statistics }
        currentStatistics = nil
    }

    // MARK: - Reads through the overlay

    /// The value of `key` in `partition` as this transaction sees it.
    func read(_ key: [UInt8], partition: Partition) throws -> [UInt8]? {
        if partition == self.partition, let pending = overlay[key] { return pending }
        return try store.database(partition).get(key)
    }

    func readObject(_ model: Model, _ id: String, partition: Partition? = nil) throws -> JSONObject? {
        let partition = try partition ?? store.entry(model.name).definition.partition
        let key = Keys.object(prefix: model.objectPrefix, id)
        if partition == self.partition, let pending = overlay[key] {
            return try pending.map { bytes in try bytes.withUnsafeBytes { try StoredObject.decode($0, model: model.name, id: id) } }
        }
        return try store.database(partition).withValue(forKey: key) { bytes in
            try bytes.map { try StoredObject.decode($0, model: model.name, id: id) }
        }
    }

    /// Visits every key with `prefix` in `partition`, in key order, merging this transaction's
    /// pending writes with the stored data.
    func scan(
        prefix: [UInt8], partition: Partition,
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void
    ) throws {
        let pending: [([UInt8], [UInt8]?)] =
            partition == self.partition
            ? overlay.writes.filter { $0.key.starts(with: prefix) }.map { ($0.key, $0.value) }
                .sorted { UTF8Order.compareBytes($0.0, $1.0) < 0 }
            : []
        var next = 0
        let iterator = try store.database(partition).makeIterator()
        iterator.seek(prefix)
        func emitPending(before limit: UnsafeRawBufferPointer?) throws {
            while next < pending.count {
                let (key, value) = pending[next]
                if let limit, UTF8Order.compareBytes(limit, key) <= 0 { return }
                if let value {
                    try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try body(k, v) } }
                }
                next += 1
            }
        }
        while iterator.isValid && iterator.keyHasPrefix(prefix) {
            try iterator.withKey { key in
                try emitPending(before: key)
                if next < pending.count, UTF8Order.compareBytes(key, pending[next].0) == 0 {
                    next += 1  // overridden (or deleted) by this transaction; emitted above or dropped
                    if let value = pending[next - 1].1 {
                        try value.withUnsafeBytes { v in try body(key, v) }
                    }
                } else {
                    try iterator.withValue { value in try body(key, value) }
                }
            }
            iterator.next()
        }
        try iterator.checkError()
        try emitPending(before: nil)
    }

    // MARK: - Commit

    /// Writes the overlay and the touched statistics in one batch, then publishes the statistics.
    func commit(durable: Bool) throws {
        checkOpen()
        flushStatistics()
        guard let partition, !overlay.isEmpty || !indexWrites.isEmpty || !catalogUpdates.isEmpty else { return }
        var batch = LevelDBWriteBatch()
        for (key, value) in overlay.writes {
            if let value { batch.put(key, value) } else { batch.delete(key) }
        }
        for (key, value) in indexWrites {
            if let value { batch.put(key, value) } else { batch.delete(key) }
        }
        for (model, statistics) in statistics {
            batch.put(Keys.modelStatistics(model.name), statistics.encoded)
        }
        try store.database(partition).write(batch, sync: durable)
        store.catalog.withLock { catalog in
            for (model, statistics) in statistics { catalog.models[model]?.statistics = statistics }
            for update in catalogUpdates { update(&catalog) }
        }
        if !catalogUpdates.isEmpty { store.catalogVersion.add(1, ordering: .releasing) }
    }

    // MARK: - Internal writes (index builds, the sync engine)

    /// Writes `value` (nil: deletes) under `key` in `partition`, as part of this transaction.
    func rawWrite(_ key: [UInt8], _ value: [UInt8]?, partition: Partition, model: String) throws(SatchelError) {
        try claim(partition, model: model)
        touch(model)
        if key.first == KeyFamily.index.rawValue {
            indexWrites.append((key, value))
        } else {
            overlay[key] = .some(value)
        }
    }

    /// Replaces the statistics of `model` when the transaction commits.
    func setStatistics(_ statistics: StoredStatistics, model: String) {
        if let current = currentStatistics, !UTF8Order.equal(current.name, model) { flushStatistics() }
        currentStatistics = (model, statistics)
    }

    /// The statistics of `model` as this transaction sees them.
    func currentStatistics(_ model: String) throws(SatchelError) -> StoredStatistics { try workingStatistics(model) }

    /// Changes the in-memory catalog once the transaction has committed.
    func onCommit(_ update: @escaping (inout Catalog) -> Void) { catalogUpdates.append(update) }
}

@available(*, unavailable)
extension Transaction: Sendable {}

/// The stored form of an object's attributes (the value under `(doc, model, objectId)`): compact
/// JSON of the attributes without the id, keys in byte order, no nulls.
enum StoredObject {
    static func encode(_ attributes: JSONObject, model: String, id: String) throws(SatchelError) -> [UInt8] {
        do {
            return try JSONWriter.encodeChecked(attributes)
        } catch {
            throw SatchelError(error.code, error.message, model: model, objectID: id)
        }
    }

    static func decode(_ bytes: UnsafeRawBufferPointer, model: String, id: String) throws(SatchelError) -> JSONObject {
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes.assumingMemoryBound(to: UInt8.self))
        } catch {
            throw SatchelError(.corruption, "object '\(id)' of model '\(model)' does not decode: \(error.reason) at byte \(error.offset)", model: model, objectID: id)
        }
        guard case .object(let object) = value else {
            throw SatchelError(.corruption, "object '\(id)' of model '\(model)' is not a JSON object", model: model, objectID: id)
        }
        return object
    }
}
