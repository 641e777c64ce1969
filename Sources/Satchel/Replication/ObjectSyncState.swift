/// Everything the sync engine keeps beside one object: its pending change (the change log's), its
/// change in flight, its refused change and its server version. Public as the type of what the
/// engine's seam reads and writes (apps read where their changes stand through SatchelSync's
/// `changeFates(model:)`). The engine reads them together
/// (``Transaction/objectSyncState(_:_:)``, ``Snapshot/objectSyncState(_:_:)``) and writes them together
/// (``Transaction/setObjectSyncState(_:_:_:replacing:)``): this is the seam between the store and the
/// engine, with the server writes, the sync state, renames and the session.
public struct ObjectSyncState: Equatable, Sendable {
    /// The local change not yet pushed.
    public var pending: PendingChange?
    /// The change pushed whose outcome has not come yet.
    public var inFlight: InFlightChange?
    /// The change the server refused, until the app resolves it.
    public var refusal: RefusedChange?
    /// The object's version on the server (nil when unknown).
    public var version: JSONValue?

    public init(pending: PendingChange? = nil, inFlight: InFlightChange? = nil, refusal: RefusedChange? = nil, version: JSONValue? = nil) {
        self.pending = pending
        self.inFlight = inFlight
        self.refusal = refusal
        self.version = version
    }

    /// Whether the object has a local change the server has not taken (pending, in flight, or
    /// refused).
    public var hasLocalChange: Bool { pending != nil || inFlight != nil || refusal != nil }
}

/// Reads of one model's sync records through a view: a transaction's (its own writes included) or
/// a snapshot's. The records of a family the model has none of (its statistics say so) are not
/// read at all: most objects have none. Nor is the store read for a family it holds none of
/// (`stored`): a push puts a chunk's changes in flight one by one, and the store's in-flight
/// records, all deleted by earlier results, are tombstones a read would step over one by one.
struct SyncRecordsAccess {
    let model: Model
    /// The statistics as the view sees them (a transaction's own writes included).
    let statistics: StoredStatistics
    /// The statistics of what the store holds (a snapshot's: `statistics`).
    let stored: StoredStatistics
    /// Key `key`'s value as the view sees it; the store is not read when `inStore` is false.
    let value: (_ key: [UInt8], _ inStore: Bool) throws -> [UInt8]?
    let scan: ([UInt8], (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void) throws -> Void

    /// Object `id`'s records; with `finishing` (the kind of the change sent), only whether it has
    /// a change in flight (that kind, left unread: no attributes) and its version.
    func records(_ id: String, finishing: PendingChange.Kind? = nil) throws -> ObjectSyncState {
        var records = ObjectSyncState()
        if finishing == nil, statistics.pendingTotal > 0, let bytes = try value(Keys.change(model.name, id), stored.pendingTotal > 0) {
            let change = try bytes.withUnsafeBytes { try StoredChange(decoding: $0) }
            records.pending = change.pendingChange(model: model.name, objectID: id)
        }
        if statistics.inFlight > 0, let bytes = try value(Keys.objectRecord(.inFlight, model.name, id), stored.inFlight > 0) {
            if let finishing {
                records.inFlight = InFlightChange(kind: finishing, attributes: JSONObject())
            } else {
                records.inFlight = try bytes.withUnsafeBytes { bytes throws(SatchelError) in try InFlightChange(decoding: bytes) }
            }
        }
        if finishing == nil, statistics.errors > 0, let bytes = try value(Keys.objectRecord(.error, model.name, id), stored.errors > 0) {
            records.refusal = try RefusedChange(model: model.name, objectID: id, stored: try JSONObject(parsingRecord: bytes))
        }
        records.version = try version(id)
        return records
    }

    /// Object `id`'s server version: the one its record carries, else its version record's
    /// (an object gone with a delete to push, or stored by an earlier format).
    func version(_ id: String) throws -> JSONValue? {
        if statistics.objects > 0, let record = try value(Keys.object(prefix: model.objectPrefix, id), stored.objects > 0),
            let version = try record.withUnsafeBytes({ try StoredObject.version($0, model: model.name, id: id) })
        {
            return version
        }
        return try value(Keys.objectRecord(.version, model.name, id), true).map { try JSONValue(parsing: $0) }
    }

    /// Every object with a pending change, a change in flight or a refused change, by id bytes,
    /// with its version when `withVersions` (one read each). Each family's records are scanned in
    /// key order, which is id order (the key codec keeps it), and merged: no table of every id,
    /// no sort.
    func allRecords(withVersions: Bool = false) throws -> [(id: String, records: ObjectSyncState)] {
        var merged: [(id: String, records: ObjectSyncState)] = []
        if statistics.pendingTotal > 0 {
            try each(.change) { id, value in
                let change = try StoredChange(decoding: value)
                merged.append((id, ObjectSyncState(pending: change.pendingChange(model: model.name, objectID: id))))
            }
        }
        if statistics.inFlight > 0 {
            merged = try Self.merge(merged, inFlight()) { $0.inFlight = $1 }
        }
        if statistics.errors > 0 {
            var errors: [(id: String, value: RefusedChange)] = []
            try each(.error) { id, value in
                errors.append((id, try RefusedChange(model: model.name, objectID: id, stored: try JSONObject(parsingRecord: value))))
            }
            merged = try Self.merge(merged, errors) { $0.refusal = $1 }
        }
        if withVersions {
            for i in merged.indices {
                merged[i].records.version = try version(merged[i].id)
            }
        }
        return merged
    }

    /// Every object with a pending change and neither a refused change nor a change in flight
    /// awaiting its link or a pull's word (``InFlightChange/State/awaitingPull``), by id bytes.
    /// The pending changes are not decoded: their keys say it.
    func pendingUnheld() throws -> [String] {
        var ids: [String] = []
        guard statistics.pendingTotal > 0 else { return ids }
        ids.reserveCapacity(statistics.pendingTotal)
        try each(.change) { id, _ in ids.append(id) }
        var held = Set(try inFlight().lazy.filter { $0.value.state != .awaitingResult }.map(\.id))
        if statistics.errors > 0 { try each(.error) { id, _ in held.insert(id) } }
        return held.isEmpty ? ids : ids.filter { !held.contains($0) }
    }

    /// Every object with a change in flight, by id bytes.
    func inFlight() throws -> [(id: String, value: InFlightChange)] {
        var changes: [(id: String, value: InFlightChange)] = []
        guard statistics.inFlight > 0 else { return changes }
        try each(.inFlight) { id, value in changes.append((id, try InFlightChange(json: try JSONObject(parsingRecord: value)))) }
        return changes
    }

    /// Calls `body` with each object id and value of `family`'s records of the model, in id order.
    private func each(_ family: KeyFamily, _ body: (String, UnsafeRawBufferPointer) throws -> Void) throws {
        let prefix = Keys.objectRecordPrefix(family, model.name)
        try scan(prefix) { key, value in try body(try Keys.objectID(fromKey: key, prefixLength: prefix.count), value) }
    }

    /// Merges `records` with `values` (both in id order), `set` putting a value into an id's
    /// records.
    private static func merge<Value>(
        _ records: [(id: String, records: ObjectSyncState)], _ values: [(id: String, value: Value)], _ set: (inout ObjectSyncState, Value) -> Void
    ) throws -> [(id: String, records: ObjectSyncState)] {
        var result: [(id: String, records: ObjectSyncState)] = []
        result.reserveCapacity(records.count + values.count)
        var i = 0, j = 0
        while i < records.count || j < values.count {
            let order = i == records.count ? 1 : j == values.count ? -1 : UTF8Order.compare(records[i].id, values[j].id)
            if order < 0 {
                result.append(records[i])
                i += 1
            } else {
                var entry = order == 0 ? records[i] : (id: values[j].id, records: ObjectSyncState())
                set(&entry.records, values[j].value)
                result.append(entry)
                if order == 0 { i += 1 }
                j += 1
            }
        }
        return result
    }

    func syncState() throws -> ModelSyncState {
        try value(Keys.syncState(model.name), true).map { ModelSyncState(json: try JSONObject(parsing: $0)) } ?? ModelSyncState()
    }
}

extension Transaction {
    func access(_ model: Model) throws(SatchelError) -> SyncRecordsAccess {
        let entry = try entry(of: model)
        let partition = entry.definition.partition
        // The entry is read under the writer's lock: its statistics are the committed ones.
        return SyncRecordsAccess(
            model: model, statistics: try workingStatistics(model.name), stored: entry.statistics,
            value: { key, inStore in
                inStore ? try self.read(key, partition: partition) : self.buffer.pending(key, partition: partition) ?? nil
            },
            scan: { prefix, body in try self.scan(prefix: prefix, partition: partition, body) })
    }

    /// What the sync engine keeps beside object `id` of `model`, as this transaction sees it.
    /// With `finishing` (the kind of the change the caller sent), for a caller that only removes
    /// the change in flight and sets the version (an accepted change): only those two are read,
    /// and the change in flight, if any, comes as that kind without its attributes (unread); the
    /// pending and refused changes come nil. Written back through
    /// ``setObjectSyncState(_:_:_:replacing:)`` with these as `old`, they stay as they are (only
    /// what differs is written); written back any other way, they would be lost.
    package func objectSyncState(_ model: Model, _ id: String, finishing: PendingChange.Kind? = nil) throws -> ObjectSyncState {
        try access(model).records(id, finishing: finishing)
    }

    /// Every object of `model` with a pending change, a change in flight or a refused change, by
    /// id, as this transaction sees them (their versions only when `withVersions`).
    package func objectSyncStates(of model: Model, withVersions: Bool = false) throws -> [(id: String, records: ObjectSyncState)] {
        try access(model).allRecords(withVersions: withVersions)
    }

    /// Every object of `model` whose pending change can be pushed (it has neither a refused
    /// change nor a create in flight awaiting its link), by id, as this transaction sees them.
    package func pushableChanges(of model: Model) throws -> [String] { try access(model).pendingUnheld() }

    /// Every object of `model` with a change in flight, by id, as this transaction sees them
    /// (nothing is read when the model has none).
    package func changesInFlight(of model: Model) throws -> [(id: String, value: InFlightChange)] { try access(model).inFlight() }

    /// Makes object `id`'s sync records `records`, writing only what changed from `old` (what
    /// this transaction holds; read when not given), and keeping the statistics right. A pending
    /// create stores no attributes: the object's are pushed.
    package func setObjectSyncState(_ model: Model, _ id: String, _ records: ObjectSyncState, replacing old: ObjectSyncState? = nil) throws {
        checkOpen()
        let old = try old ?? objectSyncState(model, id)
        let countedChange = old.pending != records.pending || old.inFlight != records.inFlight || old.refusal != records.refusal
        if !countedChange && old.version == records.version { return }
        let entry = try entry(of: model)
        try buffer.claim(entry.definition.partition, model: model.name)
        if old.version != records.version { try setVersion(model, id, records.version, entry: entry, differs: true) }
        // Only the version: no statistic moves (a pulled object's usual case).
        if !countedChange { return }
        var statistics = try workingStatistics(model.name)
        if old.pending != records.pending {
            let new = records.pending.map(StoredChange.init)
            buffer.put(Keys.change(model.name, id), new?.encoded)
            statistics.adjustPending(old.pending?.kind, by: -1)
            statistics.adjustPending(new?.kind, by: 1)
        }
        if old.inFlight != records.inFlight {
            buffer.put(Keys.objectRecord(.inFlight, model.name, id), records.inFlight?.json.jsonBytes)
            statistics.inFlight += (records.inFlight == nil ? 0 : 1) - (old.inFlight == nil ? 0 : 1)
        }
        if old.refusal != records.refusal {
            buffer.put(Keys.objectRecord(.error, model.name, id), records.refusal?.stored.jsonBytes)
            statistics.errors += (records.refusal == nil ? 0 : 1) - (old.refusal == nil ? 0 : 1)
        }
        setStatistics(statistics, model: model.name)
    }

    /// The model's sync state, as this transaction sees it.
    package func syncState(_ model: Model) throws -> ModelSyncState { try access(model).syncState() }

    package func setSyncState(_ model: Model, _ state: ModelSyncState) throws {
        let partition = try entry(of: model).definition.partition
        try buffer.claim(partition, model: model.name)
        buffer.put(Keys.syncState(model.name), state.json.jsonBytes)
    }

    /// Owes `model` a full pull when it synced before (a cursor, or a first pull complete):
    /// what a repair that lost objects, and a restore, leave it. Returns whether it is owed one.
    func oweFullPullIfSynced(_ model: Model) throws -> Bool {
        var state = try syncState(model)
        guard state.cursor != nil || state.initialSyncComplete else { return false }
        if !state.fullPullPending {
            state.fullPullPending = true
            try setSyncState(model, state)
        }
        return true
    }
}
