import Synchronization

/// The writes the sync engine makes inside a ``Transaction``: server data (which records no
/// pending change), changes in flight, record errors, server versions, sync state, renames. Every one
/// goes into the transaction's single batch, with the objects, index entries and statistics, so
/// a page applied, or a push's results, land whole or not at all.
///
/// `package`: the sync engine's seam into the core, not app API.
extension Transaction {
    /// What a server write did to an object, for object notifications.
    package enum ObjectEffect: Sendable, Equatable {
        case created, updated, deleted, unchanged
    }

    // MARK: - Server data

    /// Makes object `id` hold exactly `attributes` (nulls dropped; nil or empty deletes it),
    /// recording no pending change. Indexes and statistics follow.
    @discardableResult
    package func writeServerObject(_ model: Model, _ id: String, _ attributes: JSONObject?) throws -> ObjectEffect {
        let old = try readObject(model, id, partition: entry(of: model).definition.partition)
        return try writeServerObject(model, id, attributes, replacing: old)
    }

    /// ``writeServerObject(_:_:_:)`` for a caller that has just read the object: `old` must be
    /// what this transaction holds for it (nil: none).
    @discardableResult
    package func writeServerObject(_ model: Model, _ id: String, _ attributes: JSONObject?, replacing old: JSONObject?) throws -> ObjectEffect {
        checkOpen()
        let entry = try entry(of: model)
        var new = attributes?.removingNulls().filtering(out: Object.idAttribute)
        if new?.isEmpty == true { new = nil }
        switch (old, new) {
        case (nil, nil):
            return .unchanged
        case (.some, nil):
            try apply(entry, model, id: id, old: old, new: nil, recordChange: false)
            return .deleted
        case (nil, .some(let n)):
            try apply(entry, model, id: id, old: nil, new: n, recordChange: false)
            return .created
        case (.some(let o), .some(let n)):
            if o.isIdentical(to: n) { return .unchanged }
            try apply(entry, model, id: id, old: o, new: n, recordChange: false)
            return .updated
        }
    }

    /// Whether `model` has pending changes, changes in flight or record errors: when it has
    /// none, no object of it needs protecting from server data.
    package func hasLocalChanges(_ model: Model) throws -> Bool {
        let statistics = try workingStatistics(model.name)
        return statistics.pendingCreates + statistics.pendingUpdates + statistics.pendingDeletes + statistics.inFlight + statistics.errors > 0
    }

    // MARK: - Per-object records

    /// The pending (not yet pushed) change of object `id`.
    package func pendingChange(_ model: Model, _ id: String) throws -> PendingChange? {
        let partition = try entry(of: model).definition.partition
        return try read(Keys.change(model.name, id), partition: partition).map { bytes in
            let record = try bytes.withUnsafeBytes { try ChangeRecord(decoding: $0) }
            return PendingChange(model: model.name, objectID: id, kind: record.kind, attributes: record.attributes)
        }
    }

    /// Replaces (nil: removes) the pending change of object `id`, keeping the statistics right.
    package func setPendingChange(_ model: Model, _ id: String, kind: PendingChange.Kind?, attributes: JSONObject = JSONObject()) throws {
        let partition = try entry(of: model).definition.partition
        let key = Keys.change(model.name, id)
        let old = try read(key, partition: partition).map { bytes in try bytes.withUnsafeBytes { try ChangeRecord(decoding: $0) } }
        let new = kind.map { ChangeRecord(kind: $0, attributes: $0 == .create ? JSONObject() : attributes) }
        if old == new { return }
        try claim(partition, model: model.name)
        overlay[key] = .some(new?.encoded)
        var statistics = try workingStatistics(model.name)
        statistics.adjustPending(old?.kind, by: -1)
        statistics.adjustPending(new?.kind, by: 1)
        setStatistics(statistics, model: model.name)
    }

    /// The in-flight change of object `id`.
    package func inFlightChange(_ model: Model, _ id: String) throws -> InFlightChange? {
        try record(.inFlight, model, id).map { try InFlightChange(json: $0) }
    }

    /// Replaces (nil: removes) the in-flight change of object `id`.
    package func setInFlightChange(_ model: Model, _ id: String, _ record: InFlightChange?) throws {
        try setRecord(.inFlight, model, id, record?.json) { $0.inFlight += $1 }
    }

    /// The stored error of object `id`.
    package func recordError(_ model: Model, _ id: String) throws -> RecordErrorRecord? {
        try record(.error, model, id).map { try RecordErrorRecord(json: $0) }
    }

    /// Replaces (nil: removes) the stored error of object `id`.
    package func setRecordError(_ model: Model, _ id: String, _ record: RecordErrorRecord?) throws {
        try setRecord(.error, model, id, record?.json) { $0.errors += $1 }
    }

    /// The object's version on the server.
    package func version(_ model: Model, _ id: String) throws -> JSONValue? {
        let partition = try entry(of: model).definition.partition
        return try read(Keys.objectRecord(.version, model.name, id), partition: partition).map { try JSONValue(parsing: $0) }
    }

    package func setVersion(_ model: Model, _ id: String, _ version: JSONValue?) throws {
        let partition = try entry(of: model).definition.partition
        try claim(partition, model: model.name)
        overlay[Keys.objectRecord(.version, model.name, id)] = .some(version?.jsonBytes)
    }

    private func record(_ family: KeyFamily, _ model: Model, _ id: String) throws -> JSONObject? {
        let partition = try entry(of: model).definition.partition
        return try read(Keys.objectRecord(family, model.name, id), partition: partition).map { try JSONObject(parsing: $0) }
    }

    private func setRecord(
        _ family: KeyFamily, _ model: Model, _ id: String, _ json: JSONObject?, count: (inout StoredStatistics, Int) -> Void
    ) throws {
        let partition = try entry(of: model).definition.partition
        let key = Keys.objectRecord(family, model.name, id)
        let existed = try read(key, partition: partition) != nil
        if !existed && json == nil { return }
        try claim(partition, model: model.name)
        overlay[key] = .some(json?.jsonBytes)
        let delta = (json == nil ? 0 : 1) - (existed ? 1 : 0)
        if delta != 0 {
            var statistics = try workingStatistics(model.name)
            count(&statistics, delta)
            setStatistics(statistics, model: model.name)
        }
    }

    /// Every in-flight change of `model`, by id.
    package func inFlightChanges(of model: Model) throws -> [(id: String, record: InFlightChange)] {
        try records(.inFlight, of: model).map { ($0.id, try InFlightChange(json: $0.value)) }
    }

    /// Every stored error of `model`, by id.
    package func recordErrors(of model: Model) throws -> [(id: String, record: RecordErrorRecord)] {
        try records(.error, of: model).map { ($0.id, try RecordErrorRecord(json: $0.value)) }
    }

    /// The ids and values of every record of `family` for `model`, as this transaction sees
    /// them, by id.
    func records(_ family: KeyFamily, of model: Model) throws -> [(id: String, value: JSONObject)] {
        let partition = try entry(of: model).definition.partition
        let prefix = Keys.objectRecordPrefix(family, model.name)
        var result: [(String, JSONObject)] = []
        try scan(prefix: prefix, partition: partition) { key, value in
            result.append((try Keys.objectID(fromKey: key, prefixLength: prefix.count), try JSONObject(parsing: value)))
        }
        return result
    }

    /// Every pending change of `model`, by id.
    package func pendingChanges(of model: Model) throws -> [PendingChange] {
        try records(.change, of: model).map { id, value in
            let record = try ChangeRecord(json: value)
            return PendingChange(model: model.name, objectID: id, kind: record.kind, attributes: record.attributes)
        }
    }

    // MARK: - Sync state

    package func syncState(_ model: Model) throws -> SyncStateRecord {
        let partition = try entry(of: model).definition.partition
        return try read(Keys.syncState(model.name), partition: partition).map { SyncStateRecord(json: try JSONObject(parsing: $0)) }
            ?? SyncStateRecord()
    }

    package func setSyncState(_ model: Model, _ state: SyncStateRecord) throws {
        let partition = try entry(of: model).definition.partition
        try claim(partition, model: model.name)
        overlay[Keys.syncState(model.name)] = .some(state.json.jsonBytes)
    }

    // MARK: - Renames

    /// Gives object `from` the id `to`: its object, index entries, pending change, inFlight
    /// record, error and version move, with no pending change recorded. Returns false when
    /// nothing had the old id.
    @discardableResult
    package func rename(_ model: Model, from: String, to: String) throws -> Bool {
        checkOpen()
        renamed = true
        let entry = try entry(of: model)
        var moved = false
        if let attributes = try readObject(model, from, partition: entry.definition.partition) {
            try apply(entry, model, id: from, old: attributes, new: nil, recordChange: false)
            let existing = try readObject(model, to, partition: entry.definition.partition)
            try apply(entry, model, id: to, old: existing, new: attributes, recordChange: false)
            moved = true
        }
        if let change = try pendingChange(model, from) {
            try setPendingChange(model, from, kind: nil)
            try setPendingChange(model, to, kind: change.kind, attributes: change.attributes)
            moved = true
        }
        if let inFlight = try inFlightChange(model, from) {
            try setInFlightChange(model, from, nil)
            try setInFlightChange(model, to, inFlight)
            moved = true
        }
        if let error = try recordError(model, from) {
            try setRecordError(model, from, nil)
            try setRecordError(model, to, error)
            moved = true
        }
        if let version = try version(model, from) {
            try setVersion(model, from, nil)
            try setVersion(model, to, version)
        }
        return moved
    }

    /// Rewrites the references to objects of `parent` that were given new ids (`renames`: old
    /// id → new id), in every model whose associations point at `parent`: their objects, pending
    /// changes and changes in flight. Those in this transaction's partition are rewritten in this
    /// batch, so the renames and the references land together. Those in other partitions cannot
    /// share the batch: a durable record of the renames goes in it instead, and once the batch has
    /// landed the store rewrites them and deletes the record — at once, or, if the process dies
    /// first, when the store next opens (or before the next sync). See ``Store/finishRewrites()``.
    package func rewriteReferences(to parent: Model, renames: [String: String]) throws {
        guard !renames.isEmpty else { return }
        let partition = try entry(of: parent).definition.partition
        var elsewhere = false
        for child in store.models where child.associations.values.contains(parent.name) {
            guard child.partition == partition else {
                elsewhere = true
                continue
            }
            let model = Model(store: store, name: child.name)
            for (attribute, target) in child.associations where target == parent.name {
                try rewriteReferences(in: model, attribute: attribute, renames: renames)
            }
        }
        guard elsewhere else { return }
        try claim(partition, model: parent.name)
        let record: JSONObject = ["renames": .object(JSONObject(renames.map { ($0.key, JSONValue.string($0.value)) }))]
        overlay[Keys.rewrite(parent.name, ObjectID.generate())] = .some(record.jsonBytes)
        leftRewrites = true
    }

    /// Rewrites, in one pass, `attribute` of the objects of `model` — and of their pending and
    /// in-flight changes — where it holds an old id of `renames` (old id → new id). The objects
    /// are found with one `in` query (index-served when `attribute` is indexed), so a push that
    /// renames many parents reads each child model once, not once per parent.
    func rewriteReferences(in model: Model, attribute: String, renames: [String: String]) throws {
        guard !renames.isEmpty else { return }
        func renamed(_ value: JSONValue?) -> JSONValue? { value?.stringValue.flatMap { renames[$0] }.map(JSONValue.string) }
        let field = Field(components: [attribute])
        for object in try findAll(Query(where: field.isIn(renames.keys.map(JSONValue.string))), in: model) {
            guard let new = renamed(object[attribute]) else { continue }
            var attributes = object.attributes
            attributes[attribute] = new
            try writeServerObject(model, object.id, attributes, replacing: object.attributes)
        }
        for change in try pendingChanges(of: model) {
            guard let new = renamed(change.attributes[attribute]) else { continue }
            var attributes = change.attributes
            attributes[attribute] = new
            try setPendingChange(model, change.objectID, kind: change.kind, attributes: attributes)
        }
        for (id, var record) in try inFlightChanges(of: model) {
            guard let new = renamed(record.attributes[attribute]) else { continue }
            record.attributes[attribute] = new
            try setInFlightChange(model, id, record)
        }
    }
}

extension Store {
    // MARK: - Unfinished rewrites

    /// Finishes every rewrite of references that a rename's batch left for other partitions
    /// (see ``Transaction/rewriteReferences(to:renames:)``): rewrites them, one batch per
    /// partition, then deletes the record. Idempotent: a reference already rewritten holds no
    /// old id. Runs after such a batch, when the store opens, and before each sync.
    package func finishRewrites() throws {
        try writer.withLock(allowingReentry: true) {
            for partition in Partition.allCases {
                let db = database(partition)
                var records: [(key: [UInt8], model: String, renames: [String: String])] = []
                let iterator = try db.makeIterator()
                let prefix = Keys.rewritePrefix
                iterator.seek(prefix)
                while iterator.isValid && iterator.keyHasPrefix(prefix) {
                    let key = iterator.key
                    let (_, elements) = try Keys.decode(key)
                    guard elements.count == 3, let model = elements[1].stringValue,
                        let renames = try? JSONObject(parsing: iterator.value)["renames"]?.objectValue
                    else { throw SatchelError(.corruption, "an undecodable rewrite record in the \(partition.rawValue) partition") }
                    records.append((key, model, renames.reduce(into: [:]) { $0[$1.key] = $1.value.stringValue }))
                    iterator.next()
                }
                try iterator.checkError()
                for record in records {
                    for child in models where child.partition != partition && child.associations.values.contains(record.model) {
                        let transaction = Transaction(store: self)
                        defer { transaction.finish() }
                        let model = Model(store: self, name: child.name)
                        for (attribute, target) in child.associations where target == record.model {
                            try transaction.rewriteReferences(in: model, attribute: attribute, renames: record.renames)
                        }
                        try transaction.commit(durable: configuration.durableWrites)
                    }
                    var batch = LevelDBWriteBatch()
                    batch.delete(record.key)
                    try db.write(batch, sync: configuration.durableWrites)
                }
            }
        }
    }

    /// The unfinished rewrites, for ``verify()``: partition, model, and the old ids.
    func unfinishedRewrites() throws -> [(partition: Partition, model: String, oldIDs: [String])] {
        var result: [(Partition, String, [String])] = []
        for partition in Partition.allCases {
            let iterator = try database(partition).makeIterator()
            iterator.seek(Keys.rewritePrefix)
            while iterator.isValid && iterator.keyHasPrefix(Keys.rewritePrefix) {
                let elements = (try? Keys.decode(iterator.key))?.1 ?? []
                let renames = (try? JSONObject(parsing: iterator.value))?["renames"]?.objectValue ?? JSONObject()
                result.append((partition, elements.count > 1 ? elements[1].stringValue ?? "?" : "?", renames.keys))
                iterator.next()
            }
            try iterator.checkError()
        }
        return result
    }

    // MARK: - Session

    /// The stored sync session (in the `user` partition), or nil when logged out.
    package func storedSession() throws -> JSONObject? {
        try user.get(Keys.session).map { try JSONObject(parsing: $0) }
    }

    /// Stores (nil: removes) the sync session.
    package func setStoredSession(_ session: JSONObject?) throws {
        try writer.withLock(allowingReentry: true) {
            var batch = LevelDBWriteBatch()
            if let session { batch.put(Keys.session, session.jsonBytes) } else { batch.delete(Keys.session) }
            try user.write(batch, sync: configuration.durableWrites)
        }
    }

    // MARK: - Resets

    /// Deletes every object of the synced models of `partitions`, with their index entries,
    /// pending changes, changes in flight, errors, versions and sync state; keeps model and index
    /// definitions. One write batch per partition. Models that do not sync (sync type `none`)
    /// keep their data unless `includingUnsynced`.
    package func wipeSyncedData(in partitions: [Partition], includingUnsynced: Bool = false) throws {
        try writer.withLock {
            for partition in partitions {
                let entries = catalog.withLock { $0.models.filter { $0.value.definition.partition == partition } }
                let db = database(partition)
                var batch = LevelDBWriteBatch()
                var reset: [NameKey: StoredStatistics] = [:]
                for (name, entry) in entries where includingUnsynced || entry.definition.syncType != .none {
                    for prefix in [KeyFamily.object, .change, .inFlight, .error, .version].map({ Keys.objectRecordPrefix($0, name.name) })
                        + [Keys.indexModelPrefix(name.name)]
                    {
                        let iterator = try db.makeIterator(fillCache: false)
                        iterator.seek(prefix)
                        while iterator.isValid && iterator.keyHasPrefix(prefix) {
                            batch.delete(iterator.key)
                            iterator.next()
                        }
                        try iterator.checkError()
                    }
                    batch.delete(Keys.syncState(name.name))
                    batch.put(Keys.modelStatistics(name.name), StoredStatistics().encoded)
                    reset[name] = StoredStatistics()
                }
                try db.write(batch, sync: configuration.durableWrites)
                catalog.withLock { catalog in
                    for (name, statistics) in reset { catalog.models[name]?.statistics = statistics }
                }
            }
        }
    }
}
