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
public final class Transaction: StoreReading {
    let store: Store
    /// What the transaction will write (one partition's keys).
    var buffer = WriteBuffer()
    /// Text index postings written, merged into their blocks at the commit.
    var textChanges = TextChanges()
    /// The statistics of the models it writes, as its writes change them.
    var statistics = WorkingStatistics()
    /// The entry of the model last used, valid while the catalog version is unchanged: a bulk
    /// update usually writes one model many times.
    var cachedEntry: (name: String, version: Int, entry: ModelEntry)?
    private var finished = false
    /// Whether the transaction gave an object a new id (``rename(_:from:to:)``).
    var renamed = false
    /// Whether it left references in other partitions to rewrite once it lands
    /// (``rewriteReferences(to:renames:)``).
    var leftRewrites = false
    /// Changes to the in-memory catalog that take effect once the batch is written.
    private var catalogUpdates: [(inout Catalog) -> Void] = []
    /// The object record last read from the store (nil: none there), by key: an object is
    /// usually read several times in a row — its sync records' version, its attributes, the
    /// write that keeps its version — and the store holds still while the transaction runs
    /// (this thread holds the writer lock; the transaction's own writes are read first).
    var lastRead: (key: [UInt8], record: [UInt8]?)?
    /// Inside ``readingInOrder(reads:when:_:)``, its readers (nil: point reads).
    var orderedReaders: [OrderedReader]?

    /// The models whose objects this transaction changed, in order; with the ids, per model,
    /// when someone observed the store's changes as it began (``Store/changes``).
    private var changedModels: [String] = []
    private var changeSets: [String: ChangeSet] = [:]
    /// Per model, each write's object before and after, for live queries (when observed).
    private var objectChanges: [String: [ObjectChange]] = [:]
    private let observed: Bool

    init(store: Store) {
        self.store = store
        observed = !store.changeObservers.isEmpty
    }

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
        let (idValue, new) = attributes.splitting(Object.idAttribute)
        return try insert(new, id: try Self.id(from: idValue, model: model.name), in: model)
    }

    /// ``create(_:in:)-(JSONObject,_)`` with the app's values (``JSONValueConvertible``).
    @discardableResult
    public func create(_ attributes: [String: any JSONValueConvertible], in model: Model) throws -> Object {
        try create(JSONObject(converting: attributes), in: model)
    }

    /// ``put(_:in:)-(JSONObject,_)`` with the app's values.
    @discardableResult
    public func put(_ attributes: [String: any JSONValueConvertible], in model: Model) throws -> Object? {
        try put(JSONObject(converting: attributes), in: model)
    }

    /// ``update(_:with:in:)-(_,JSONObject,_)`` with the app's values (a `nil` optional removes
    /// its attribute).
    @discardableResult
    public func update(_ id: String, with attributes: [String: any JSONValueConvertible], in model: Model) throws -> Object? {
        try update(id, with: JSONObject(converting: attributes), in: model)
    }

    /// Replaces an object whole, creating it when missing (an upsert). Attributes the object had
    /// and `object` lacks are removed; null attributes are dropped; an object left with no
    /// attributes is deleted.
    ///
    /// - Returns: the stored object, or nil when the null rule deleted it (or left nothing to create).
    @discardableResult
    public func save(_ object: Object, in model: Model) throws -> Object? {
        checkOpen()
        return try replace(object.id, with: object.attributes.removingNulls(), in: model)
    }

    /// Stores `attributes` as one object, as `satchel put` and imports do: with a string
    /// `object` id, replaces that object whole (``save(_:in:)``: created when missing, deleted
    /// when no attribute is left); without one, creates an object with a new id
    /// (``create(_:in:)``).
    ///
    /// - Returns: the stored object, or nil when the null rule deleted it.
    /// - Throws: ``SatchelError`` `.invalidObject` when `object` is not a string, or when an
    ///   object without an id has no attribute; `.schemaViolation` for a fixed-schema model.
    @discardableResult
    public func put(_ attributes: JSONObject, in model: Model) throws -> Object? {
        try put(attributes, in: model, storedJSON: nil)
    }

    /// ``put(_:in:)`` given the attributes' stored JSON (without the id) when the caller has it
    /// already (an import whose item's text is that): the write does not encode them again.
    @discardableResult
    func put(_ attributes: JSONObject, in model: Model, storedJSON: [UInt8]?) throws -> Object? {
        var attributes = attributes
        return try put(taking: &attributes, in: model, storedJSON: storedJSON)
    }

    /// ``put(_:in:storedJSON:)`` splitting the id off `attributes` in place (they are left
    /// without it and without nulls): an import owns its objects, and their members are not copied.
    @discardableResult
    func put(taking attributes: inout JSONObject, in model: Model, storedJSON: [UInt8]?) throws -> Object? {
        checkOpen()
        let idValue = attributes.split(Object.idAttribute)
        if let id = try Self.id(from: idValue, model: model.name) { return try replace(id, with: attributes, in: model, storedJSON: storedJSON) }
        return try insert(attributes, id: nil, in: model, storedJSON: storedJSON)
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
        if let given = try Self.id(from: attributes[Object.idAttribute], model: model.name), !UTF8Order.equal(given, id) {
            throw SatchelError(.invalidObject, "an update cannot change the object id", model: model.name, objectID: id)
        }
        guard let old = try readObject(model, id, entry: entry) else {
            throw SatchelError(.notFound, "model '\(model.name)' has no object '\(id)'", model: model.name, objectID: id)
        }
        var new = old
        for (name, value) in attributes where !UTF8Order.equal(name, Object.idAttribute) { new[name] = value.isNull ? nil : value }
        try entry.definition.validate(new, objectID: id, old: old)
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
        guard let old = try readObject(model, id, entry: entry) else { return false }
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

    /// Creates an object of attributes `new` (no id, no nulls) under `id`, or a new id.
    private func insert(_ new: JSONObject, id givenID: String?, in model: Model, storedJSON: [UInt8]? = nil) throws -> Object {
        let entry = try entry(of: model)
        let id = givenID ?? ObjectID.generate()
        if new.isEmpty {
            throw SatchelError(.invalidObject, "an object needs at least one non-null attribute", model: model.name, objectID: id)
        }
        try entry.definition.validate(new, objectID: id)
        if givenID != nil, try readObject(model, id, entry: entry) != nil {
            throw SatchelError(.alreadyExists, "model '\(model.name)' already has an object '\(id)'", model: model.name, objectID: id)
        }
        try apply(entry, model, id: id, old: nil, new: new, storedJSON: storedJSON)
        return Object(id: id, attributes: new)
    }

    /// Makes object `id` exactly `new` (no id, no nulls; empty: deleted).
    private func replace(_ id: String, with new: JSONObject, in model: Model, storedJSON: [UInt8]? = nil) throws -> Object? {
        let entry = try entry(of: model)
        let old = try readObject(model, id, entry: entry)
        try entry.definition.validate(new, objectID: id, old: old)
        if new.isEmpty {
            if let old { try apply(entry, model, id: id, old: old, new: nil) }
            return nil
        }
        try apply(entry, model, id: id, old: old, new: new, storedJSON: storedJSON)
        return Object(id: id, attributes: new)
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

    // MARK: - Public reads

    /// The object `id`, as this transaction sees it (its own writes included).
    public func find(_ id: String, in model: Model) throws -> Object? {
        checkOpen()
        return try readObject(model, id, entry: entry(of: model)).map { Object(id: id, attributes: $0) }
    }

    /// The objects `query` selects, as this transaction sees them. Before the transaction has
    /// written to the model the store is its view (indexes included) and the query runs as
    /// anywhere. After, the planner runs over the store as committed, with neither offset nor
    /// limit, for the objects this transaction did not write; the ones it wrote are read
    /// through it and checked against the condition; then the order, offset, limit and
    /// projection apply to them all.
    public func findAll(_ query: Query, in model: Model) throws -> [Object] {
        checkOpen()
        try query.validate()
        let partition = try store.entry(model.name).definition.partition
        if partition != buffer.partition || !buffer.hasTouched(model.name) {
            // Nothing of the model pending here, and this thread holds the writer lock: the store
            // is this transaction's view of it (indexes included).
            return try model.cursor(query, storeScanGuard: false).all()
        }
        let prefix = model.objectPrefix
        var written = Set<String>()
        for (key, _) in buffer.pendingWrites(prefix: prefix, partition: partition) {
            written.insert(try key.withUnsafeBytes { try Keys.objectID(fromKey: $0, prefixLength: prefix.count) })
        }
        var whole = query
        whole.limit = nil
        whole.offset = 0
        whole.projection = nil
        var matches = try model.cursor(whole, storeScanGuard: false).all().filter { !written.contains($0.id) }
        for id in written.sorted(by: UTF8Order.less) {
            if let object = try find(id, in: model), query.condition.matches(object) { matches.append(object) }
        }
        if !query.order.isEmpty { matches = Sorter(order: query.order).sort(matches) }
        let projection = query.projection.map(ProjectionTree.init)
        var result = matches.dropFirst(query.offset).map { projection?.project($0) ?? $0 }
        if let limit = query.limit, result.count > limit { result.removeLast(result.count - limit) }
        return result
    }

    /// How `query` would run (the planner's choice over the store's indexes; after writes to the
    /// model, ``findAll(_:in:)`` also reads the objects this transaction wrote).
    public func explain(_ query: Query, in model: Model) throws -> QueryPlan {
        checkOpen()
        return try model.explain(query)
    }

    /// The pending changes of `model`, this transaction's included.
    public func pendingChanges(of model: Model) throws -> [PendingChange] {
        try objectSyncStates(of: model).compactMap(\.records.pending)
    }

    public func modelDefinition(named name: String) -> ModelDefinition? { store.existingModel(name).flatMap { try? store.entry($0.name).definition } }

    // MARK: - The write primitive

    /// What a write does to the server version an object's record carries.
    enum VersionUpdate {
        /// The object keeps its version (a deleted object's moves to its version record).
        case keep
        /// The version becomes this compact JSON (nil: none).
        case set([UInt8]?)
    }

    /// Moves object `id` from `old` to `new` (nil: deleted), in this transaction's batch: the
    /// object, its index entries, the statistics and, for a model that records changes (unless
    /// `recordChange` is false: a server write), the coalesced pending change. Every write of an
    /// object goes through here. The object's record carries its server version (`version`);
    /// a deleted object's version goes to its version record, where a pushed delete finds its
    /// base (`StoredObject.swift`). `storedJSON`, when given, is `new` encoded already.
    func apply(
        _ entry: ModelEntry, _ model: Model, id: String, old: JSONObject?, new: JSONObject?, recordChange: Bool = true,
        version: VersionUpdate = .keep, storedJSON: [UInt8]? = nil
    ) throws {
        let partition = entry.definition.partition
        try buffer.claim(partition, model: model.name)
        buffer.touch(model.name)
        try withWorkingStatistics(model.name) { statistics in
            try apply(
                entry, model, id: id, old: old, new: new, recordChange: recordChange, version: version, storedJSON: storedJSON,
                statistics: &statistics)
        }
    }

    /// ``apply(_:_:id:old:new:recordChange:version:storedJSON:)`` counting in `statistics`.
    private func apply(
        _ entry: ModelEntry, _ model: Model, id: String, old: JSONObject?, new: JSONObject?, recordChange: Bool, version: VersionUpdate,
        storedJSON: [UInt8]?, statistics: inout StoredStatistics
    ) throws {
        assert(storedJSON == nil || storedJSON == new.map { JSONWriter.encode(.object($0)) }, "the stored JSON given is not the object's")
        let bytes = try new.map { new in try storedJSON ?? StoredObject.encode(new, model: model.name, id: id) }
        let key = Keys.object(prefix: model.objectPrefix, id)
        let (carried, given): ([UInt8]?, Bool)
        switch version {
        case .set(let version): (carried, given) = (version, true)
        case .keep: (carried, given) = (old == nil ? nil : try storedVersion(key, model: model, id: id, entry: entry), false)
        }
        if let bytes {
            buffer.put(key, StoredObject.record(json: bytes, version: carried))
            // No version: nor an older version record behind the record.
            if given && carried == nil { buffer.put(Keys.objectRecord(.version, model.name, id), nil) }
        } else {
            buffer.put(key, nil)
            // A version the record carried, or one given, outlives the object; a version record
            // the object had (a record without one) stays unless a version is given.
            if given || carried != nil { buffer.put(Keys.objectRecord(.version, model.name, id), carried) }
        }
        statistics.objects += (new == nil ? 0 : 1) - (old == nil ? 0 : 1)
        statistics.adjustArrays(old: old, new: new)
        moveIndexEntries(entry, model, id: id, old: old, new: new, bytes: bytes, statistics: &statistics)
        if recordChange && entry.definition.recordsChanges {
            try logChange(entry, model, id: id, old: old, new: new, statistics: &statistics)
        }
        noteChange(model.name, id: id, old: old, new: new, origin: recordChange ? .local : .server)
    }

    /// Remembers that a model's synced data was wiped whole: its change set, published at
    /// commit, says so instead of listing ids.
    func noteWipe(_ model: String) {
        if !changedModels.contains(model) { changedModels.append(model) }
        guard observed else { return }
        changeSets[model] = ChangeSet(model: model, origin: .server, wiped: true)
        objectChanges[model, default: []].append(ObjectChange(id: "", old: nil, new: nil, wiped: true))
    }

    /// Remembers what a write did, for the change sets published at commit.
    private func noteChange(_ model: String, id: String, old: JSONObject?, new: JSONObject?, origin: ChangeSet.Origin) {
        if changedModels.last != model && !changedModels.contains(model) { changedModels.append(model) }
        guard observed else { return }
        objectChanges[model, default: []].append(ObjectChange(id: id, old: old, new: new))
        var set = changeSets[model] ?? ChangeSet(model: model, origin: origin)
        if origin == .local { set.origin = .local }
        switch (old, new) {
        case (nil, _?): set.created.append(id)
        case (_?, nil): set.deleted.append(id)
        case (_?, _?): set.updated.append(id)
        case (nil, nil): break
        }
        changeSets[model] = set
    }

    /// Turns the delete of `from` and the create of `to` that a rename just noted into one
    /// rename: the change set says `renamed: from → to`, and live queries see one object
    /// changing its id. When `to` already held an object (overwritten), the writes stay as noted.
    func noteRename(_ model: String, from: String, to: String) {
        // Ids by their bytes, as the store tells objects apart.
        func same(_ a: String, _ b: String) -> Bool { a.utf8.elementsEqual(b.utf8) }
        guard observed, var set = changeSets[model], let created = set.created.lastIndex(where: { same($0, to) }),
            let deleted = set.deleted.lastIndex(where: { same($0, from) }), var changes = objectChanges[model], changes.count >= 2
        else { return }
        let (removal, creation) = (changes[changes.count - 2], changes[changes.count - 1])
        guard same(removal.id, from), removal.new == nil, same(creation.id, to), creation.old == nil else { return }
        set.created.remove(at: created)
        set.deleted.remove(at: deleted)
        set.renamed[from] = to
        changeSets[model] = set
        changes.removeLast(2)
        changes.append(ObjectChange(id: to, old: removal.old, new: creation.new, renamedFrom: from))
        objectChanges[model] = changes
    }

    // MARK: - Commit

    /// Writes the buffer and the touched statistics in one batch, then publishes the statistics
    /// and the catalog changes.
    func commit(durable: Bool) throws {
        checkOpen()
        try writeTextPostings()
        guard let partition = buffer.partition, !buffer.isEmpty || !catalogUpdates.isEmpty else { return }
        let statistics = self.statistics.all
        try store.database(partition).write(buffer.batch(statistics: statistics), sync: durable)
        store.catalog.withLock { catalog in
            for (model, statistics) in statistics { catalog.models[model]?.statistics = statistics }
            for update in catalogUpdates { update(&catalog) }
        }
        if !catalogUpdates.isEmpty { store.catalogVersion.add(1, ordering: .releasing) }
        if !changedModels.isEmpty && !store.changeObservers.isEmpty {
            store.changeObservers.publish(
                changedModels.map { changeSets[$0] ?? ChangeSet(model: $0, origin: .local) }, objects: objectChanges)
        }
    }

    /// Changes the in-memory catalog once the transaction has committed.
    func onCommit(_ update: @escaping (inout Catalog) -> Void) { catalogUpdates.append(update) }
}

@available(*, unavailable)
extension Transaction: Sendable {}
