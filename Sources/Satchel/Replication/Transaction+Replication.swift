import Synchronization

/// The writes the sync engine makes inside a ``Transaction`` beyond its sync records
/// (`ObjectSyncState.swift`): server data (which records no pending change), renames and the
/// references to renamed objects. Every one goes into the transaction's single batch, with the
/// objects, index entries and statistics, so a page applied, or a push's results, land whole or
/// not at all.
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
    ///
    /// A caller that has just read the object gives it as `old`: what this transaction holds
    /// for it (`.some(nil)`: none); without, it is read. With `version`, the object's server
    /// version becomes it in the same write (``ObjectSyncState/version``; an object the server
    /// deleted keeps it in its version record); without, it stays as it was. With `checkingSchema`,
    /// attributes the model's definition refuses (its fixed schema, since a migration) are an
    /// error (`.schemaViolation`), nothing written: for a write the app asked for, not the server.
    @discardableResult
    package func writeServerObject(
        _ model: Model, _ id: String, _ attributes: JSONObject?, replacing given: JSONObject?? = .none, version: JSONValue?? = .none,
        checkingSchema: Bool = false
    ) throws -> ObjectEffect {
        checkOpen()
        let entry = try entry(of: model)
        let old = try given ?? readObject(model, id, entry: entry)
        var new = attributes?.splitting(Object.idAttribute).rest
        if new?.isEmpty == true { new = nil }
        if checkingSchema, let new { try entry.definition.validate(new, objectID: id) }
        let update: VersionUpdate = version.map { .set($0?.jsonBytes) } ?? .keep
        switch (old, new) {
        case (nil, nil):
            if let version { try setVersion(model, id, version, entry: entry) }
            return .unchanged
        case (.some, nil):
            try apply(entry, model, id: id, old: old, new: nil, recordChange: false, version: update)
            return .deleted
        case (nil, .some(let n)):
            try apply(entry, model, id: id, old: nil, new: n, recordChange: false, version: update)
            return .created
        case (.some(let o), .some(let n)):
            if o.isIdentical(to: n) {
                if let version { try setVersion(model, id, version, entry: entry) }
                return .unchanged
            }
            try apply(entry, model, id: id, old: o, new: n, recordChange: false, version: update)
            return .updated
        }
    }

    /// Makes object `id`'s server version `version` (nil: none), where its record says the
    /// version lives (`StoredObject.swift`): in the object's record when that carries one
    /// (rewritten when the version differs; index entries do not hold versions), else in its
    /// version record — an object made here, whose push or a result of it set the version, is
    /// not written again for it, only its small version record. `differs`: the caller read the
    /// object's version and knows it is not `version` (the version record is not read again).
    func setVersion(_ model: Model, _ id: String, _ version: JSONValue?, entry: ModelEntry, differs: Bool = false) throws {
        let key = Keys.object(prefix: model.objectPrefix, id)
        let versionKey = Keys.objectRecord(.version, model.name, id)
        let new = version?.jsonBytes
        let record = try objectRecord(key, entry: entry)
        try buffer.claim(entry.definition.partition, model: model.name)
        if let record {
            // A record that carries a version: rewritten when it differs.
            var carries = false
            let rewritten: [UInt8]? = try record.withUnsafeBytes { bytes in
                let parts = try StoredObject.split(bytes, model: model.name, id: id)
                guard let old = parts.version else { return nil }
                carries = true
                // The version it has already (a pulled object sent back unchanged): nothing to write.
                if let new, old.elementsEqual(new) { return nil }
                return StoredObject.record(json: Array(parts.attributes), version: new)
            }
            if carries {
                if let rewritten { buffer.put(key, rewritten) }
                // A record without a version defers to the version record: none is left behind it.
                if new == nil { buffer.put(versionKey, nil) }
                return
            }
        }
        // No object, or a record that defers to its version record: the version record holds
        // it (not written again when it holds it already: an echo writes nothing).
        guard let new else { return buffer.put(versionKey, nil) }
        if try differs || read(versionKey, partition: entry.definition.partition) != new { buffer.put(versionKey, new) }
    }

    /// Makes room in the transaction for about `count` more object and sync record writes (the
    /// engine knows a page's or a push's size before it writes).
    package func reserveCapacity(_ count: Int) {
        checkOpen()
        buffer.reserveCapacity(count)
    }

    /// Whether `model` has pending changes, changes in flight or refused changes: when it has
    /// none, no object of it needs protecting from server data.
    package func hasLocalChanges(_ model: Model) throws -> Bool {
        let statistics = try workingStatistics(model.name)
        return statistics.pendingCreates + statistics.pendingUpdates + statistics.pendingDeletes + statistics.inFlight + statistics.errors > 0
    }

    // MARK: - Renames

    /// Gives object `from` the id `to`: its object, index entries and sync records (pending
    /// change, change in flight, error, version) move, with no pending change recorded. Returns
    /// false when nothing had the old id.
    @discardableResult
    package func rename(_ model: Model, from: String, to: String) throws -> Bool {
        checkOpen()
        renamed = true
        let entry = try entry(of: model)
        var moved = false
        if let attributes = try readObject(model, from, entry: entry) {
            try apply(entry, model, id: from, old: attributes, new: nil, recordChange: false)
            let existing = try readObject(model, to, entry: entry)
            try apply(entry, model, id: to, old: existing, new: attributes, recordChange: false)
            if existing == nil { noteRename(model.name, from: from, to: to) }
            moved = true
        }
        let records = try objectSyncState(model, from)
        if records != ObjectSyncState() {
            moved = moved || records.hasLocalChange
            try setObjectSyncState(model, from, ObjectSyncState(), replacing: records)
            // Each record the old id had replaces the new id's; the others stay.
            let existing = try objectSyncState(model, to)
            var moving = existing
            if let pending = records.pending {
                moving.pending = PendingChange(
                    model: model.name, objectID: to, kind: pending.kind, attributes: pending.attributes, baseValues: pending.baseValues,
                    sentValues: pending.sentValues)
            }
            if let inFlight = records.inFlight { moving.inFlight = inFlight }
            if var error = records.refusal {
                error.objectID = to
                moving.refusal = error
            }
            if let version = records.version { moving.version = version }
            try setObjectSyncState(model, to, moving, replacing: existing)
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
        try buffer.claim(partition, model: parent.name)
        buffer.put(Keys.rewrite(parent.name, ObjectID.generate()), RewriteRecord.encode(renames))
        leftRewrites = true
    }

    /// Rewrites, in one pass, `attribute` of the objects of `model` — and of their pending and
    /// in-flight changes — where it holds an old id of `renames` (old id → new id): as its value
    /// (to-one) or as an element of its array value (to-many). The objects are found with one
    /// query (`in` or'ed with `contains`, for arrays), so a push that renames many parents reads
    /// each child model once, not once per parent; the `||` makes that read a scan of the model.
    func rewriteReferences(in model: Model, attribute: String, renames: [String: String]) throws {
        guard !renames.isEmpty else { return }
        func renamed(_ value: JSONValue?) -> JSONValue? {
            switch value {
            case .string(let id)?: return renames[id].map(JSONValue.string)
            case .array(let elements)?:
                var changed = false
                let rewritten = elements.map { element -> JSONValue in
                    guard let id = element.stringValue, let new = renames[id] else { return element }
                    changed = true
                    return .string(new)
                }
                return changed ? .array(rewritten) : nil
            default: return nil
            }
        }
        let field = Field(components: [attribute])
        let oldIDs = renames.keys.map(JSONValue.string)
        let condition = oldIDs.reduce(field.isIn(oldIDs)) { $0 || field.contains($1) }
        // The objects rewritten: their reference before, and after.
        var rewritten: [String: (old: JSONValue, new: JSONValue)] = [:]
        for object in try findAll(Query(where: condition), in: model) {
            guard let old = object[attribute], let new = renamed(old) else { continue }
            var attributes = object.attributes
            attributes[attribute] = new
            try writeServerObject(model, object.id, attributes, replacing: object.attributes)
            rewritten[object.id] = (old, new)
        }
        for (id, var records) in try objectSyncStates(of: model) {
            let before = records
            if let pending = records.pending, let new = renamed(pending.attributes[attribute]) {
                var attributes = pending.attributes
                attributes[attribute] = new
                records.pending = PendingChange(
                    model: model.name, objectID: id, kind: pending.kind, attributes: attributes, baseValues: pending.baseValues,
                    sentValues: pending.sentValues)
            }
            if let new = renamed(records.inFlight?.attributes[attribute]) { records.inFlight?.attributes[attribute] = new }
            if records != before { try setObjectSyncState(model, id, records, replacing: before) }
        }
        // A synced object whose reference no change of its own carries holds it as the server
        // does: the renamed object was the server's (made again under a new id, as Parse does
        // for a retried update of an object its server deleted), so the rewrite is a change to
        // push (a black-box probe: it stayed here). A reference to an object new here is always
        // carried by the change that made it.
        for (id, reference) in rewritten {
            let records = try objectSyncState(model, id)
            guard records.version != nil, records.inFlight?.attributes[attribute] == nil,
                records.pending.map({ $0.kind == .update && $0.attributes[attribute] == nil }) ?? true
            else { continue }
            var next = records
            var attributes = records.pending?.attributes ?? JSONObject()
            var base = records.pending?.baseValues ?? JSONObject()
            attributes[attribute] = reference.new
            base[attribute] = reference.old
            next.pending = PendingChange(
                model: model.name, objectID: id, kind: .update, attributes: attributes, baseValues: base,
                sentValues: records.pending?.sentValues ?? JSONObject())
            try setObjectSyncState(model, id, next, replacing: records)
        }
    }

    // MARK: - Wipes

    /// Deletes every object of `model` with its index entries, pending changes, changes in
    /// flight, errors, versions and sync state (the app's configuration of the model's sync
    /// stays); its statistics start again from zero. Observers see one change set marked
    /// `wiped`.
    package func wipeSyncedData(of model: Model) throws {
        let entry = try entry(of: model)
        try buffer.claim(entry.definition.partition, model: model.name)
        let db = try store.database(entry.definition.partition)
        for prefix in [KeyFamily.object, .change, .inFlight, .error, .version].map({ Keys.objectRecordPrefix($0, model.name) })
            + [Keys.indexModelPrefix(model.name)]
        {
            let iterator = try db.makeIterator(fillCache: false)
            iterator.seek(prefix)
            while iterator.isValid && iterator.keyHasPrefix(prefix) {
                buffer.put(iterator.key, nil)
                iterator.next()
            }
            try iterator.checkError()
        }
        // The app's configuration of the model outlives its data.
        let configuration = try syncState(model).configuration
        buffer.put(Keys.syncState(model.name), configuration.map { ModelSyncState(configuration: $0).json.jsonBytes })
        setStatistics(StoredStatistics(), model: model.name)
        noteWipe(model.name)
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
            for (partition, db) in openPartitions {
                var records: [(key: [UInt8], model: String, renames: [String: String])] = []
                for entry in try db.entries(withPrefix: Keys.rewritePrefix) {
                    let (_, elements) = try Keys.decode(entry.key)
                    guard elements.count == 3, let model = elements[1].stringValue, let renames = entry.value.withUnsafeBytes(RewriteRecord.renames)
                    else { throw SatchelError(.corruption, "an undecodable rewrite record in the \(partition.rawValue) partition") }
                    records.append((entry.key, model, renames))
                }
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
        for (partition, db) in openPartitions {
            let iterator = try db.makeIterator()
            iterator.seek(Keys.rewritePrefix)
            while iterator.isValid && iterator.keyHasPrefix(Keys.rewritePrefix) {
                let elements = (try? Keys.decode(iterator.key))?.1 ?? []
                let renames = iterator.withValue(RewriteRecord.renames) ?? [:]
                result.append((partition, elements.count > 1 ? elements[1].stringValue ?? "?" : "?", renames.keys.sorted()))
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
    /// definitions and each model's sync configuration. One transaction per partition, through the
    /// one write path (``Transaction/wipeSyncedData(of:)``). Models that do not sync (sync type
    /// `none`) keep their data unless `includingUnsynced`.
    package func wipeSyncedData(in partitions: [Partition], includingUnsynced: Bool = false) throws {
        for partition in partitions {
            let names = models.filter { $0.partition == partition && (includingUnsynced || $0.syncType != .none) }.map(\.name)
            guard !names.isEmpty else { continue }
            try bulkUpdate { tx in
                for name in names { try tx.wipeSyncedData(of: Model(store: self, name: name)) }
            }
        }
        // The blob files the wiped objects held go too: one user's photos never stay for the
        // next. (A file stored by a write racing the reset may go with them.)
        try blobs.removeOrphans(olderThan: .zero)
    }
}
