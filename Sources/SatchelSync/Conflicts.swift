public import Satchel

/// A true conflict: an update pushed from this device that the server refused because its
/// object changed meanwhile (Kinto's `412`, a version check), where the server changed at least
/// one of the attributes this device changed, to another value.
///
/// A conflict whose two sides changed different attributes is not a ``SyncConflict``: the
/// engine merges it attribute by attribute and sends the local change again in the same sync.
/// A true one goes to the model's resolver (``SyncEngine/setConflictResolver(for:_:)``) when
/// the app set one, and otherwise is kept as a refused change (``RefusedChange``) for the app to
/// resolve, as before.
public struct SyncConflict: Sendable, Hashable {
    /// What to make of a conflict.
    public enum Answer: Sendable, Hashable {
        /// The server's values stand where both sides changed an attribute: those local changes
        /// are dropped. Local changes of other attributes, no conflict, are sent as ever.
        case takeServer
        /// The local changes stand: they are sent again over the server's version; attributes
        /// changed only on the server follow the server.
        case keepLocal
        /// The object becomes exactly these attributes (device-only ones stay): what differs
        /// from the server's object is sent (a missing attribute removed there).
        case merge(JSONObject)
    }

    public var model: String
    public var objectID: String
    /// The server's object as the server sent it with its refusal.
    public var server: JSONObject
    /// The server's version of it (the base of the next push).
    public var serverVersion: JSONValue?
    /// The object here, with its local changes.
    public var local: JSONObject
    /// The attributes changed here and not yet acknowledged, with their new values (null:
    /// removed).
    public var localChanges: JSONObject
    /// The values the locally changed attributes had before they were changed here (null:
    /// absent), where the store knows them.
    public var base: JSONObject
    /// The server version the local change was made on.
    public var baseVersion: JSONValue?
    /// The attributes changed on both sides, to different values, sorted.
    public var conflicting: [String]

    public init(
        model: String, objectID: String, server: JSONObject, serverVersion: JSONValue?, local: JSONObject, localChanges: JSONObject,
        base: JSONObject, baseVersion: JSONValue?, conflicting: [String]
    ) {
        self.model = model
        self.objectID = objectID
        self.server = server
        self.serverVersion = serverVersion
        self.local = local
        self.localChanges = localChanges
        self.base = base
        self.baseVersion = baseVersion
        self.conflicting = conflicting
    }
}

/// Decides a true conflict of one model (see ``SyncConflict``). Called on the engine's storage
/// queue, inside the batch that applies the push's results: it must answer at once, without
/// touching the store.
public typealias ConflictResolver = @Sendable (SyncConflict) -> SyncConflict.Answer

extension MergePolicy {
    /// What became of an update the server refused as a conflict, by name (`docs/SYNC.md`,
    /// "Conflicts"; each has a row in `Tests/SatchelSyncTests/MergePolicyTests.swift`).
    enum ConflictRule: String, Sendable, CaseIterable {
        /// The two sides changed different attributes (or the same ones to the same values):
        /// merged, the local change sent again over the server's version.
        case merged
        /// A true conflict and no resolver: kept as a refused change with the server's copy.
        case refused
        /// The resolver took the server's object.
        case tookServer
        /// The resolver kept the local changes: sent again over the server's version.
        case keptLocal
        /// The resolver gave the object's attributes: what differs from the server's is sent.
        case resolvedByMerge
    }

    struct ConflictOutcome: Equatable, Sendable {
        var rule: ConflictRule
        var write: Write
        var records: ObjectSyncState
        /// Whether the object has a change to send again in this sync.
        var resend: Bool
        /// The true conflict the resolver was asked about (nil: none was).
        var conflict: SyncConflict?
    }

    /// The attributes of `localChanges` that the server changed too, to another value: those
    /// whose server value differs from the local one, from the base (an unknown base counts as
    /// changed there) and from what a lost push of this device sent (`sent`).
    static func conflicting(localChanges: JSONObject, base: JSONObject, server: JSONObject, sent: JSONObject = JSONObject()) -> [String] {
        func same(_ a: JSONValue?, _ b: JSONValue?) -> Bool { (a?.isNull ?? true) ? (b?.isNull ?? true) : a == b }
        return localChanges.compactMap { name, value -> String? in
            let serverValue = server[name]
            if same(value, serverValue) { return nil }
            if let mine = sent[name], same(mine, serverValue) { return nil }
            guard let was = base[name] else { return name }
            return same(was, serverValue) ? nil : name
        }.sorted()
    }

    /// An update in flight that the server refused because its object changed meanwhile, with
    /// the server's object and version: merged when the changes touch different attributes,
    /// else answered by `resolver`, else kept as a refused change (`message`, `code`).
    static func conflict(
        server serverCopy: JSONObject, serverVersion: JSONValue?, message: String, code: String?, local: Local,
        configuration: ModelSyncConfiguration, resolver: ConflictResolver?
    ) -> ConflictOutcome {
        var records = local.records
        let refused = { () -> ConflictOutcome in
            var kept = local.records
            kept.inFlight = nil
            kept.refusal = RefusedChange(
                model: local.model, objectID: local.id, kind: .update, message: message, code: code,
                attributes: local.records.inFlight?.attributes ?? JSONObject(), serverCopy: serverCopy)
            return ConflictOutcome(rule: .refused, write: .keep, records: kept, resend: false, conflict: nil)
        }
        guard let inFlight = records.inFlight, inFlight.kind == .update, let attributes = local.attributes,
            records.pending.map({ $0.kind == .update }) ?? true
        else { return refused() }
        // The local side: the change in flight under any later edit.
        var changes = inFlight.attributes
        var base = inFlight.baseValues
        var sent = inFlight.sentValues
        if let later = records.pending {
            for (name, value) in configuration.syncing(later.attributes) {
                if !changes.contains(name), let was = later.baseValues[name] { base[name] = was }
                changes[name] = value
            }
            sent.addSent(later.sentValues)
        }
        let server = configuration.syncing(serverCopy)
        let conflicting = conflicting(localChanges: changes, base: base, server: server, sent: sent)
        var conflict: SyncConflict?
        let answer: SyncConflict.Answer
        let rule: ConflictRule
        if conflicting.isEmpty {
            (answer, rule) = (.keepLocal, .merged)
        } else if let resolver {
            let asked = SyncConflict(
                model: local.model, objectID: local.id, server: serverCopy, serverVersion: serverVersion, local: attributes, localChanges: changes,
                base: base, baseVersion: inFlight.baseVersion, conflicting: conflicting)
            conflict = asked
            answer = resolver(asked)
            switch answer {
            case .takeServer: rule = .tookServer
            case .keepLocal: rule = .keptLocal
            case .merge: rule = .resolvedByMerge
            }
        } else {
            return refused()
        }
        records.inFlight = nil
        records.pending = nil
        // From now on the server's values are the base of what is sent.
        func pending(_ changes: JSONObject) -> PendingChange? {
            guard !changes.isEmpty else { return nil }
            var base = JSONObject()
            for (name, _) in changes { base[name] = server[name] ?? .null }
            return PendingChange(model: local.model, objectID: local.id, kind: .update, attributes: changes, baseValues: base)
        }
        let write: Write
        switch answer {
        case .takeServer, .keepLocal:
            // Taken from the server, the attributes changed on both sides take its values; a
            // local change of another attribute is no conflict, and goes as under keepLocal.
            let conflictingNames = Set(conflicting)
            records.pending = pending(
                answer == .keepLocal ? changes : JSONObject(changes.filter { !conflictingNames.contains($0.key) }.map { ($0.key, $0.value) }))
            // The server's object, with the attributes still changed here kept (what a pull does).
            let merged = upsert(
                ServerObject(id: local.id, attributes: serverCopy, version: serverVersion),
                local: Local(
                    model: local.model, id: local.id, attributes: attributes, records: records), configuration: configuration)
            (write, records) = (merged.write, merged.records)
        case .merge(let given):
            var object = given.filter { name, value in name != Object.idAttribute && !value.isNull && configuration.syncs(name) }
            for (name, value) in attributes where !configuration.syncs(name) { object[name] = value }
            var changes = JSONObject()
            for (name, value) in object where configuration.syncs(name) && server[name] != value { changes[name] = value }
            for (name, value) in server where !value.isNull && object[name] == nil { changes[name] = .null }
            records.pending = pending(changes)
            records.version = serverVersion
            write = .replace(object)
        }
        return ConflictOutcome(rule: rule, write: write, records: records, resend: records.pending != nil, conflict: conflict)
    }
}
