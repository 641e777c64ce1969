import Foundation
import Satchel
import Synchronization

extension SyncEngine {
    /// Pushes the pending changes of `model`, a chunk at a time (the backend's
    /// ``SyncCapabilities/maxPushBatch``; all at once when it has no limit).
    ///
    /// 1. Changes left in flight by an earlier push that failed go back to pending (merged with
    ///    what changed since), so they are sent again.
    /// 2. For each chunk, in one batch, its pending changes become changes in flight (read then:
    ///    an edit made while earlier chunks were under way goes with its object's change); edits
    ///    made after that start new pending changes, so none is lost.
    /// 3. The server's results apply in one batch: accepted changes are no longer in flight (a create
    ///    may be renamed to its server id, with the references to it), refused ones become record
    ///    errors, changes to retry go back to pending.
    ///
    /// A push stopped between chunks leaves the later chunks' changes pending, and a chunk whose
    /// answer never came in flight (step 1 sends it again). Objects with an unresolved record
    /// error are not pushed (their error says why), nor objects whose associations point at an
    /// object the server does not have yet (they go after its id arrives). An unresolved error
    /// never blocks the other objects.
    ///
    /// For a server whose results come in pull pages (``SyncCapabilities/pushResultsViaPull``),
    /// a chunk whose answer was lost is not sent again at once: its changes wait in flight for
    /// the model's next complete pull (``settleAfterPull(_:)``), and the push returns the
    /// error, so that the sync pulls before it fails.
    @discardableResult
    func push(
        _ model: Model, definition: ModelDefinition, modelConfiguration: ModelSyncConfiguration, session: SyncSession, report: inout SyncReport
    ) async throws -> SyncError? {
        let settledByPull = backend.capabilities.pushResultsViaPull
        var ids: [String] = try await onStorageQueue { store in
            try store.bulkUpdate { tx in
                try Self.requeueInFlight(model, tx, settledByPull: settledByPull)
                return try tx.pushableChanges(of: model)
            }
        }
        guard !ids.isEmpty else { return nil }
        let syncState = try storage { try store.read { try $0.syncState(model) } }
        let limit = backend.capabilities.maxPushBatch
        let resolver = conflictResolvers[definition.name]
        var pushed = 0
        let refusedBefore = report.refused
        var waiting: [String] = []
        // Changes merged with a conflicting server change, or kept by the resolver, go again in
        // the same sync (twice at most: a server changing the object as fast stops it there,
        // and the changes wait, pending, for the next sync).
        for round in 0..<3 {
            guard !ids.isEmpty else { break }
            let outcome = try await pushRound(
                ids, of: model, definition: definition, modelConfiguration: modelConfiguration, session: session, syncState: syncState,
                limit: limit, resolver: resolver, pushed: &pushed, report: &report)
            ids = round < 2 ? outcome.resend : []
            waiting += outcome.waiting
            if let lost = outcome.lost { return lost }
        }
        // Objects that pointed at an object of this model the server did not have yet (a parent
        // and its children made together) go once their parents have: a pass per level of a
        // chain, until a pass sends none of them (a parent refused, or linked only by a later
        // pull: they wait for the next sync).
        //
        // New objects whose references form a cycle (one pointing at itself included) would
        // wait for each other for ever: when a pass sends none, one of them is created without
        // its references to objects the server does not have yet, which follow as an update
        // once their ids are known.
        //
        // A cycle may also pass through other models' new objects: the first of this model on it
        // is created without its references, and they follow as an update once the other
        // objects are on the server (by the next sync at the latest: their model may come later
        // in this one).
        waiting = Self.inKeyOrder(waiting)
        let referencesItself = definition.associations.values.contains(definition.name)
        var retry = referencesItself
        var cut: Set<String> = []
        while !waiting.isEmpty {
            if retry {
                let outcome = try await pushRound(
                    waiting, of: model, definition: definition, modelConfiguration: modelConfiguration, session: session, syncState: syncState,
                    limit: limit, resolver: resolver, pushed: &pushed, report: &report)
                if let lost = outcome.lost { return lost }
                let progressed = outcome.waiting.count < waiting.count
                waiting = outcome.waiting
                if progressed { continue }
            }
            guard let member = try storage({ try cycleMember(waiting, of: model, definition: definition) }), cut.insert(member).inserted
            else { break }
            let created = try await pushRound(
                [member], of: model, definition: definition, modelConfiguration: modelConfiguration, session: session, syncState: syncState,
                limit: limit, resolver: resolver, pushed: &pushed, report: &report, cutting: member)
            if let lost = created.lost { return lost }
            // Its references go as an update, with the objects that waited.
            let id = report.serverIDs[definition.name]?[member] ?? member
            waiting = Self.inKeyOrder(waiting.filter { $0 != member } + (referencesItself ? [id] : []))
            retry = referencesItself
        }
        if pushed > 0 {
            let refused = report.refused - refusedBefore
            let message = "pushed \(pushed) change(s)" + (refused > 0 ? ", \(refused) refused" : "")
            emit(.sync(SyncNotification(status: .inProgress, model: definition.name, message: message)))
        }
        if !waiting.isEmpty {
            // Said, not left silent: a parent refused, linked only by a later pull, or in a
            // cycle through another model.
            let shown = waiting.prefix(5).joined(separator: ", ") + (waiting.count > 5 ? ", …" : "")
            let message =
                "\(waiting.count) change(s) wait for objects they point at to reach the server (\(shown)): a later sync sends them once those are there"
            emit(.sync(SyncNotification(status: .inProgress, model: definition.name, message: message)))
        }
        return nil
    }

    /// Pushes the pending changes of objects `ids`, a chunk at a time; returns the objects whose
    /// change is to be sent again (merged or resolved conflicts), those whose change waits for
    /// an object they point at to reach the server, and — for a server whose results come in
    /// pull pages — the error of a chunk whose answer was lost: its changes wait for the pull
    /// (``markAwaitingPull(_:of:_:)``), and the chunks after it stay pending.
    private func pushRound(
        _ ids: [String], of model: Model, definition: ModelDefinition, modelConfiguration: ModelSyncConfiguration, session: SyncSession,
        syncState: ModelSyncState, limit: Int?, resolver: ConflictResolver?, pushed: inout Int, report: inout SyncReport, cutting: String? = nil
    ) async throws -> (resend: [String], waiting: [String], lost: SyncError?) {
        let blocked = try storage { try unsyncedParents(of: definition) }
        let chunkSize = max(1, limit ?? ids.count)
        var resend: [String] = []
        var waiting: [String] = []
        var start = 0
        while start < ids.count {
            try checkStopped()
            let chunkIDs = Array(ids[start..<min(start + chunkSize, ids.count)])
            start += chunkIDs.count
            let (chunk, waitingInChunk) = try await onStore(bounded: limit != nil) { store in
                try store.bulkUpdate { tx in
                    try Self.putInFlight(
                        chunkIDs, of: model, definition: definition, configuration: modelConfiguration, blocked: blocked, cutting: cutting, tx: tx)
                }
            }
            waiting += waitingInChunk
            guard !chunk.isEmpty else { continue }
            let withBlobs = definition.blobAttributes.isEmpty ? chunk : try storage { try chunk.map { try attachBlobs($0, definition: definition) } }
            let request = PushRequest(
                model: definition, changes: withBlobs, session: session, configuration: modelConfiguration, metadata: syncState.metadata,
                cursor: syncState.cursor)
            let results: [PushResult]
            // A server whose results come in pull pages says in them what it carried out of a
            // push whose answer was lost: such a push is not sent again at once (its creates
            // would be made twice), it waits for the pull.
            let settledByPull = backend.capabilities.pushResultsViaPull
            do {
                // Sent again, a create carries what it sent, as one put back among the pending
                // ones does (``requeue(_:_:_:)``): the first try may have made its object, which
                // the adapter then looks for (a black-box probe: Parse's retry, answered 159,
                // made it a second time under another request id).
                let tried = Locked(false)
                results = try await withRetry(retrying: { !settledByPull || !Self.mayHaveBeenCarriedOut($0) }) {
                    let retry = tried.withLock { was in
                        defer { was = true }
                        return was
                    }
                    return try await self.backend.push(retry ? Self.sentAgain(request) : request)
                }
            } catch {
                let failure = Self.syncError(error)
                if failure.refusedBeforeApplying {
                    // The server refused the whole request: nothing of it was carried out, so the
                    // chunk's changes are pending again, not in flight.
                    try await onStore(bounded: limit != nil) { store in
                        try store.bulkUpdate { tx in for change in chunk { try Self.requeue(model, change.objectID, tx) } }
                    }
                } else if settledByPull && Self.mayHaveBeenCarriedOut(failure) {
                    try await onStore(bounded: limit != nil) { store in
                        try store.bulkUpdate { tx in try Self.markAwaitingPull(chunk.map(\.objectID), of: model, tx) }
                    }
                    return (resend, waiting, failure)
                }
                throw failure
            }
            let outcome = try await onStore(bounded: limit != nil && !Self.renamesObjects(results)) { store in
                try Self.apply(results, of: withBlobs, to: model, in: store, configuration: modelConfiguration, resolver: resolver)
            }
            tally(outcome, of: definition.name, into: &report)
            pushed += chunk.count
            resend += outcome.resend
            if let lost = outcome.unanswered.first(where: { $0.code == .unauthorized }) ?? outcome.unanswered.first {
                // Sent, its answer lost: the sync stops before a pull could bring what it made.
                // A refused session is dropped, as on any other request (a black-box probe:
                // Parse's 209 on some creates of a push left it, to be sent again).
                if lost.code == .unauthorized { try? expireSession() }
                throw lost
            }
        }
        return (resend, waiting, nil)
    }

    /// `ids` without repeats, in the order of their keys (the order a push reads them in).
    static func inKeyOrder(_ ids: [String]) -> [String] {
        Array(Set(ids)).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// Makes the pending changes of objects `ids` changes in flight, in `tx`; returns what to
    /// send, and the objects that wait. An object with a refused change, a create awaiting its
    /// link or a reference to an object the server does not have yet keeps its change pending
    /// (the last are the ones that wait).
    static func putInFlight(
        _ ids: [String], of model: Model, definition: ModelDefinition, configuration: ModelSyncConfiguration, blocked: [String: Set<String>],
        cutting: String? = nil, tx: Transaction
    ) throws -> (changes: [OutgoingChange], waiting: [String]) {
        tx.reserveCapacity(2 * ids.count)  // each change: its pending record goes, its in-flight one comes
        // The ids come in id order (a chunk of the pending changes' scan): their records and
        // objects are read in key order.
        return try tx.readingInOrder(reads: ids.count) {
            try putInFlightInOrder(ids, of: model, definition: definition, configuration: configuration, blocked: blocked, cutting: cutting, tx: tx)
        }
    }

    /// ``putInFlight(_:of:definition:configuration:blocked:cutting:tx:)`` on ids in key order.
    /// The create of `cutting` goes without its references to objects the server does not have
    /// yet (a cycle's member): they stay pending, an update.
    private static func putInFlightInOrder(
        _ ids: [String], of model: Model, definition: ModelDefinition, configuration: ModelSyncConfiguration, blocked: [String: Set<String>],
        cutting: String?, tx: Transaction
    ) throws -> (changes: [OutgoingChange], waiting: [String]) {
        var changes: [OutgoingChange] = []
        var waiting: [String] = []
        for id in ids {
            let records = try tx.objectSyncState(model, id)
            guard let change = records.pending else { continue }
            // A create awaiting its link, or a change waiting for a pull to say whether it was
            // carried out, keeps later edits pending.
            if records.refusal != nil || records.inFlight.map({ $0.state != .awaitingResult }) == true { continue }
            let object = try tx.find(id, in: model)
            var deferred = JSONObject()
            if let object, refersTo(blocked, object: object, definition: definition) {
                guard change.kind == .create, id == cutting else {
                    waiting.append(id)
                    continue
                }
                deferred = references(blocked, object: object, definition: definition)
            }
            var next = records
            next.pending = nil
            var attributes: JSONObject
            switch change.kind {
            case .create:
                guard let object else {
                    try tx.setObjectSyncState(model, id, next, replacing: records)
                    continue
                }
                attributes = configuration.syncing(object.attributes)
                if !deferred.isEmpty {
                    for name in deferred.keys { attributes[name] = nil }
                    // Absent on the server until the update sets them.
                    next.pending = PendingChange(
                        model: model.name, objectID: id, kind: .update, attributes: deferred,
                        baseValues: JSONObject(deferred.keys.map { ($0, JSONValue.null) }))
                }
            case .update, .delete:
                attributes = configuration.syncing(change.attributes)
                if change.kind == .update && attributes.isEmpty {
                    // Only device-only or ignored attributes changed: nothing to send.
                    try tx.setObjectSyncState(model, id, next, replacing: records)
                    continue
                }
            }
            next.inFlight = InFlightChange(
                kind: change.kind, attributes: attributes, baseVersion: records.version, baseValues: configuration.syncing(change.baseValues),
                sentValues: configuration.syncing(change.sentValues))
            try tx.setObjectSyncState(model, id, next, replacing: records)
            let whole = change.kind == .update ? object.map { configuration.syncing($0.attributes) } : nil
            changes.append(
                OutgoingChange(
                    objectID: id, kind: change.kind, attributes: attributes, baseVersion: records.version, object: whole,
                    sentValues: configuration.syncing(change.sentValues)))
        }
        return (changes, waiting)
    }

    /// `request` sent again after a failure: each create carries what it sent (its attributes),
    /// as ``requeue(_:_:_:)`` gives a create put back among the pending ones.
    static func sentAgain(_ request: PushRequest) -> PushRequest {
        var again = request
        for index in again.changes.indices where again.changes[index].kind == .create {
            again.changes[index].sentValues.addSent(again.changes[index].attributes)
        }
        return again
    }

    /// Puts the unanswered changes in flight back among the pending ones, merged with later
    /// edits — or, for a server whose results come in pull pages (`settledByPull`), where the
    /// push may have been carried out (the app was stopped as its answer came), leaves them to
    /// the next complete pull (``markAwaitingPull(_:of:_:)``).
    static func requeueInFlight(_ model: Model, _ tx: Transaction, settledByPull: Bool = false) throws {
        let unanswered = try tx.changesInFlight(of: model).filter { $0.value.state == .awaitingResult }.map(\.id)
        if settledByPull {
            try markAwaitingPull(unanswered, of: model, tx)
        } else {
            for id in unanswered { try requeue(model, id, tx) }
        }
    }

    /// Whether the server may have carried out (part of) a request that failed with `failure`:
    /// no answer came, or a 5xx did.
    static func mayHaveBeenCarriedOut(_ failure: SyncError) -> Bool {
        failure.code == .network || (failure.code == .server && (failure.httpStatus ?? 500) >= 500)
    }

    /// Marks the changes in flight of objects `ids` — a push whose answer was lost, to a server
    /// whose results come in pull pages — as waiting for the model's next complete pull.
    static func markAwaitingPull(_ ids: [String], of model: Model, _ tx: Transaction) throws {
        for id in ids {
            let before = try tx.objectSyncState(model, id)
            guard before.inFlight?.state == .awaitingResult else { continue }
            var records = before
            records.inFlight?.state = .awaitingPull
            try tx.setObjectSyncState(model, id, records, replacing: before)
        }
    }

    /// After a complete pull of `model`, for a server whose results come in pull pages: the
    /// changes of a push whose answer was lost that the pull did not confirm (a link for a
    /// create) go back among the pending ones, to be sent again; a create the server took
    /// whose link the pull did not bring either — its refusal came in a page whose answer was
    /// lost, and RhoConnect sends a refusal once — becomes a refused change (``noLinkCode``),
    /// for the app to `recreate` or `delete`, instead of waiting for ever. Returns how many
    /// went back to pending, and the unlinked creates. A delete the server took is done. With
    /// `deletesOnly` (the pull after a second push in one sync), only that.
    func settleAfterPull(_ model: Model, deletesOnly: Bool = false) async throws -> (requeued: Int, unlinked: [String]) {
        guard backend.capabilities.pushResultsViaPull else { return (0, []) }
        return try await onStorageQueue { store in
            guard try model.statistics().inFlight > 0 else { return (0, []) }
            return try store.bulkUpdate { tx in
                var requeued = 0
                var unlinked: [String] = []
                for (id, change) in try tx.changesInFlight(of: model) where !deletesOnly || change.kind == .delete {
                    switch (change.state, change.kind) {
                    case (.awaitingPull, _):
                        try Self.requeue(model, id, tx)
                        requeued += 1
                    case (.awaitingLink, .delete):
                        // Done: the pull after it is complete, and it brought nothing back.
                        let before = try tx.objectSyncState(model, id)
                        var records = before
                        records.inFlight = nil
                        records.version = nil
                        try tx.setObjectSyncState(model, id, records, replacing: before)
                    case (.awaitingLink, .create):
                        let before = try tx.objectSyncState(model, id)
                        var records = before
                        records.inFlight = nil
                        records.refusal = RefusedChange(
                            model: model.name, objectID: id, kind: .create,
                            message:
                                "the server took this create but neither linked nor refused it in the complete pull after it (a page may have been lost): recreate sends it again, delete drops it",
                            code: Self.noLinkCode, attributes: change.attributes)
                        try tx.setObjectSyncState(model, id, records, replacing: before)
                        unlinked.append(id)
                    default:
                        break
                    }
                }
                return (requeued, unlinked)
            }
        }
    }

    /// The code of a create kept as a refused change because no pull linked it
    /// (``settleAfterPull(_:)``).
    static let noLinkCode = "noLink"

    /// Puts object `id`'s change in flight back among the pending ones, merged with later edits.
    static func requeue(_ model: Model, _ id: String, _ tx: Transaction) throws {
        let before = try tx.objectSyncState(model, id)
        guard let record = before.inFlight else { return }
        var records = before
        records.inFlight = nil
        let later = before.pending
        var kind = record.kind
        var attributes = record.attributes
        var base = record.baseValues
        // The push may have gone through, its answer lost: what it sent for attributes edited
        // since may be the server's now, and is this device's own, not a change made elsewhere.
        var sent = record.sentValues
        switch (record.kind, later?.kind) {
        case (.create, nil), (.update, nil):
            // The change goes again as it was; what it sent says it may have made the object, or
            // that a server value equal to it is this device's own: an edit merged into it before
            // it is sent again must not lose that (a black-box probe: a push that failed before
            // it did, and the edit after, was refused as a conflict with its own earlier write).
            sent.addSent(record.attributes)
        case (_, nil): break
        case (.create, .delete?), (.update, .delete?), (.delete, .delete?):
            // Whatever reached the server, the object must go: send the delete. What an update
            // sent may be on the server now, this device's own (``explainedDelete``).
            // A create's too: it may have made the object, under an id the server chose (Parse),
            // which the adapter finds by what the create sent.
            if record.kind == .update || record.kind == .create {
                sent.addSent(record.attributes)
            }
            sent.addSent(later!.sentValues)
            kind = .delete
            attributes = later!.attributes
        case (.create, _):
            // Still a create: it carries the object's current attributes. What the lost one sent
            // may be on the server, this device's own (``KintoBackend``'s earlier form).
            sent.addSent(record.attributes)
        case (.update, _):
            for (name, value) in later!.attributes {
                // An attribute changed before keeps its earlier base.
                if !attributes.contains(name), let was = later!.baseValues[name] { base[name] = was }
                if let sentValue = attributes[name], sentValue != value, sent[name] == nil { sent[name] = sentValue }
                attributes[name] = value
            }
            sent.addSent(later!.sentValues)
        case (.delete, _):
            // Deleted, then created again under the same id: an update that also removes what
            // the old object had.
            kind = .update
            var update = later!.attributes
            if later!.kind == .create, let object = try tx.find(id, in: model) { update = object.attributes }
            for (name, _) in attributes where !update.contains(name) { update[name] = .null }
            attributes = update
        }
        records.pending = PendingChange(
            model: model.name, objectID: id, kind: kind, attributes: kind == .create ? JSONObject() : attributes, baseValues: base,
            sentValues: sent)
        try tx.setObjectSyncState(model, id, records, replacing: before)
    }

    /// Ids, per parent model, of objects the server does not have yet (created locally, not
    /// linked): children referring to them wait.
    func unsyncedParents(of definition: ModelDefinition) throws -> [String: Set<String>] {
        var blocked: [String: Set<String>] = [:]
        for parent in Set(definition.associations.values) {
            guard let model = store.existingModel(parent) else { continue }
            let ids = try store.read { snapshot in
                Set(try snapshot.objectSyncStates(of: model).filter { MergePolicy.isLocalOnly($0.records) }.map(\.id))
            }
            if !ids.isEmpty { blocked[parent] = ids }
        }
        return blocked
    }

    /// The attributes of `object` that refer to objects in `blocked` (an array, when one of its
    /// elements does), with their values.
    static func references(_ blocked: [String: Set<String>], object: Object, definition: ModelDefinition) -> JSONObject {
        var found = JSONObject()
        for (attribute, parent) in definition.associations {
            guard let ids = blocked[parent], let value = object[attribute] else { continue }
            let refers =
                switch value {
                case .string(let id): ids.contains(id)
                case .array(let elements): elements.contains { $0.stringValue.map(ids.contains) == true }
                default: false
                }
            if refers { found[attribute] = value }
        }
        return found
    }

    /// The first (in key order) of the objects `waiting` whose pending create is on a cycle of
    /// references among new objects — of this model, or through others' (an order pointing at
    /// its customer, the customer at its last order): each waits for the next, the last for the
    /// first. Nil when none is.
    func cycleMember(_ waiting: [String], of model: Model, definition: ModelDefinition) throws -> String? {
        struct Node: Hashable {
            let model: String
            let id: String
        }
        // The objects of each model the server does not have yet, read once.
        var localOnly: [String: Set<String>] = [:]
        func local(_ name: String) throws -> Set<String> {
            if let known = localOnly[name] { return known }
            let ids =
                try store.existingModel(name).map { handle in
                    try store.read { snapshot in
                        Set(try snapshot.objectSyncStates(of: handle).filter { MergePolicy.isLocalOnly($0.records) }.map(\.id))
                    }
                } ?? []
            localOnly[name] = ids
            return ids
        }
        // A pending create's references to such objects.
        var edges: [Node: [Node]] = [:]
        func references(_ node: Node) throws -> [Node] {
            if let known = edges[node] { return known }
            edges[node] = []
            guard let target = store.models.first(where: { $0.name == node.model }), let handle = store.existingModel(node.model),
                try store.read({ try $0.objectSyncState(handle, node.id).pending?.kind == .create }), let object = try handle.find(node.id)
            else { return [] }
            var found: [Node] = []
            for (attribute, parent) in target.associations.sorted(by: { $0.key < $1.key }) {
                let ids = try local(parent)
                let values = object[attribute].map { $0.arrayValue ?? [$0] } ?? []
                for case .string(let id) in values where ids.contains(id) { found.append(Node(model: parent, id: id)) }
            }
            edges[node] = found
            return found
        }
        for id in Self.inKeyOrder(waiting) {
            let start = Node(model: definition.name, id: id)
            var seen: Set<Node> = []
            var stack = try references(start)
            while let next = stack.popLast() {
                if next == start { return id }
                if seen.insert(next).inserted { stack += try references(next) }
            }
        }
        return nil
    }

    static func refersTo(_ blocked: [String: Set<String>], object: Object, definition: ModelDefinition) -> Bool {
        for (attribute, parent) in definition.associations {
            guard let ids = blocked[parent] else { continue }
            switch object[attribute] {
            case .string(let id)?: if ids.contains(id) { return true }
            case .array(let elements)?: if elements.contains(where: { $0.stringValue.map(ids.contains) == true }) { return true }
            default: break
            }
        }
        return false
    }

    /// The change with the bytes of its blob attributes attached.
    func attachBlobs(_ change: OutgoingChange, definition: ModelDefinition) throws -> OutgoingChange {
        guard change.kind != .delete, !definition.blobAttributes.isEmpty else { return change }
        var change = change
        for name in definition.blobAttributes {
            guard let reference = change.attributes[name]?.stringValue, BlobStore.isReference(change.attributes[name]) else { continue }
            if let data = try store.blobs.data(for: reference) { change.blobs[name] = data }
        }
        return change
    }

    /// What a push's results did.
    struct PushOutcomeSummary: Sendable {
        var renamed: [(from: String, to: String)] = []
        var accepted = 0
        var refused = 0
        var refusals: [String] = []
        /// Changes the server could not take now (a transient error of its own), pending again.
        var postponed: [String] = []
        /// Changes sent whose answers never came (left in flight).
        var unanswered: [SyncError] = []
        /// Conflicts merged attribute by attribute, and those the resolver answered.
        var merged = 0
        var resolved = 0
        /// What became of each conflict, a phrase per object.
        var conflicts: [String] = []
        /// Objects whose change goes again (merged, or kept by the resolver).
        var resend: [String] = []
    }

    /// Applies a push's results in one batch; a conflict is settled as
    /// ``MergePolicy/conflict(server:serverVersion:message:code:local:configuration:resolver:)`` says.
    static func apply(
        _ results: [PushResult], of changes: [OutgoingChange], to model: Model, in store: Store,
        configuration: ModelSyncConfiguration = ModelSyncConfiguration(), resolver: ConflictResolver? = nil
    ) throws -> PushOutcomeSummary {
        // An adapter usually answers change by change in the order sent; else by id.
        let aligned = results.count == changes.count && zip(results, changes).allSatisfy { $0.objectID.utf8.elementsEqual($1.objectID.utf8) }
        let byID = aligned ? [:] : Dictionary(results.map { (Array($0.objectID.utf8), $0.outcome) }, uniquingKeysWith: { _, last in last })
        var summary = PushOutcomeSummary()
        try store.bulkUpdate { tx in
            tx.reserveCapacity(2 * changes.count)  // each change: its in-flight record goes, its version comes
            // The chunk's changes are in id order: their records are read in key order — unless
            // the server gave creates ids of its own, which fall anywhere among the keys.
            try tx.readingInOrder(reads: changes.count, when: !renamesObjects(results)) {
                for position in changes.indices {
                    let change = ChangeSent(changes[position])
                    // A change the server did not answer for is sent again next time.
                    var outcome =
                        aligned ? results[position].outcome : byID[Array(change.objectID.utf8)] ?? .retryLater(message: "no result from the server")
                    // A plain acceptance only removes the change in flight and sets the version:
                    // nothing else is read, nor what the change held.
                    let accepted = if case .accepted = outcome { true } else { false }
                    let before = try tx.objectSyncState(model, change.objectID, finishing: accepted ? change.kind : nil)
                    guard let record = before.inFlight else { continue }
                    var records = before
                    if case .refused(_, _, let serverCopy?) = outcome, change.kind == .update, Self.holds(serverCopy, record.attributes) {
                        // A conflict with a copy that already holds the change: an earlier push of it
                        // went through and its answer was lost.
                        outcome = .accepted()
                    }
                    if case .conflict(let message, let code, let serverCopy, let version) = outcome {
                        if change.kind == .update && Self.holds(serverCopy, record.attributes) {
                            outcome = .accepted(version: version)
                        } else if change.kind == .delete, let version,
                            Self.explainedDelete(
                                server: configuration.syncing(serverCopy), deleted: record.attributes, sent: record.sentValues)
                        {
                            // The server's newer version holds nothing this device has not seen
                            // or sent itself (its own push, the answer lost): the delete goes
                            // again, on that version.
                            records.version = version
                            try tx.setObjectSyncState(model, change.objectID, records, replacing: before)
                            try Self.requeue(model, change.objectID, tx)
                            summary.resend.append(change.objectID)
                            continue
                        } else if change.kind != .update {
                            outcome = .refused(message: message, code: code, serverCopy: serverCopy)
                        }
                    }
                    switch outcome {
                    case .accepted(let serverID, let version):
                        summary.accepted += 1
                        records.inFlight = nil
                        // An unknown version is no base for the next change (nil: unchecked).
                        records.version = change.kind == .delete ? nil : version
                        try tx.setObjectSyncState(model, change.objectID, records, replacing: before)
                        if change.kind == .create, let serverID, !serverID.utf8.elementsEqual(change.objectID.utf8) {
                            try tx.rename(model, from: change.objectID, to: serverID)
                            summary.renamed.append((change.objectID, serverID))
                        }
                    case .awaitingLink:
                        // A delete is counted now (its pull only confirms it); a create when linked.
                        if change.kind == .delete { summary.accepted += 1 }
                        records.inFlight?.state = .awaitingLink
                        try tx.setObjectSyncState(model, change.objectID, records, replacing: before)
                    case .refused(let message, let code, let serverCopy):
                        summary.refused += 1
                        summary.refusals.append("\(change.kind.rawValue) \(change.objectID): \(message)")
                        records.inFlight = nil
                        records.refusal = RefusedChange(
                            model: model.name, objectID: change.objectID, kind: change.kind, message: message, code: code,
                            attributes: record.attributes,
                            serverCopy: serverCopy)
                        try tx.setObjectSyncState(model, change.objectID, records, replacing: before)
                    case .notFound(let message, let code):
                        records.inFlight = nil
                        if change.kind == .delete {
                            summary.accepted += 1
                            records.version = nil
                        } else {
                            let message = message ?? "the object does not exist on the server"
                            summary.refused += 1
                            summary.refusals.append("\(change.kind.rawValue) \(change.objectID): \(message)")
                            records.refusal = RefusedChange(
                                model: model.name, objectID: change.objectID, kind: change.kind, message: message, code: code ?? "404",
                                attributes: record.attributes, serverDeleted: true)
                        }
                        try tx.setObjectSyncState(model, change.objectID, records, replacing: before)
                    case .retryLater(let message):
                        try Self.requeue(model, change.objectID, tx)
                        summary.postponed.append("\(change.kind.rawValue) \(change.objectID): \(message)")
                    case .unanswered(let error):
                        // Left in flight: the next push sends it again.
                        summary.unanswered.append(error)
                    case .conflict(let message, let code, let serverCopy, let version):
                        let local = MergePolicy.Local(
                            model: model.name, id: change.objectID, attributes: try tx.find(change.objectID, in: model)?.attributes, records: before)
                        let settled = MergePolicy.conflict(
                            server: serverCopy, serverVersion: version, message: message, code: code, local: local, configuration: configuration,
                            resolver: resolver)
                        var notification = ChangeSet(model: model.name, origin: .server)
                        try Self.apply(
                            MergePolicy.Outcome(rule: .localChangesWin, write: settled.write, records: settled.records), local, to: model, tx: tx,
                            notification: &notification)
                        let id = change.objectID
                        switch settled.rule {
                        case .refused:
                            summary.refused += 1
                            summary.refusals.append("update \(id): \(message)")
                        case .merged:
                            summary.merged += 1
                            summary.conflicts.append("merged \(id) (changed here: \(record.attributes.keys.sorted().joined(separator: ", ")))")
                        case .tookServer, .keptLocal, .resolvedByMerge:
                            summary.resolved += 1
                            let both = settled.conflict?.conflicting.joined(separator: ", ") ?? ""
                            summary.conflicts.append("resolved \(id) (\(settled.rule.rawValue); changed on both sides: \(both))")
                        }
                        if settled.resend { summary.resend.append(id) }
                    }
                }
            }
            // References to the renamed objects change in the same batch (or, in another
            // partition, from a record written in it).
            try tx.rewriteReferences(to: model, renames: Dictionary(summary.renamed, uniquingKeysWith: { _, last in last }))
        }
        return summary
    }

    /// What ``apply(_:of:to:in:configuration:resolver:)`` reads of a change sent, taken without
    /// copying the change's attributes.
    private struct ChangeSent {
        let objectID: String
        let kind: PendingChange.Kind

        init(_ change: borrowing OutgoingChange) {
            objectID = change.objectID
            kind = change.kind
        }
    }

    /// Whether the server gave a created object an id of its own.
    static func renamesObjects(_ results: [PushResult]) -> Bool {
        results.contains { result in
            if case .accepted(let serverID?, _) = result.outcome { serverID != result.objectID } else { false }
        }
    }

    /// Reports what a push's results did: counts, new ids, refusals.
    func tally(_ summary: PushOutcomeSummary, of model: String, into report: inout SyncReport) {
        for (local, server) in summary.renamed { report.serverIDs[model, default: [:]][local] = server }
        report.accepted += summary.accepted
        report.refused += summary.refused
        report.postponed += summary.postponed.count
        report.merged += summary.merged
        report.resolved += summary.resolved
        if !summary.conflicts.isEmpty {
            emit(.sync(SyncNotification(status: .inProgress, model: model, message: "conflicts: " + summary.conflicts.joined(separator: "; "))))
        }
        if !summary.renamed.isEmpty {
            emit(.objects(ChangeSet(model: model, renamed: Dictionary(summary.renamed, uniquingKeysWith: { _, last in last }), origin: .server)))
        }
        if !summary.refusals.isEmpty {
            emit(.sync(SyncNotification(status: .error, model: model, errorCode: .refusedChanges, message: summary.refusals.joined(separator: "; "))))
        }
        if !summary.postponed.isEmpty {
            let message = "not taken by the server this time, pending for the next sync: " + summary.postponed.joined(separator: "; ")
            emit(.sync(SyncNotification(status: .error, model: model, errorCode: .server, message: message)))
        }
    }

    /// Whether a delete refused because the object changed on the server meanwhile may go on:
    /// every attribute of the server's copy (`server`, its attributes that travel) is as this
    /// device last had it when deleting (`deleted`) or as a push of its own, whose answer was
    /// lost, sent it (`sent`, null: absent).
    static func explainedDelete(server: JSONObject, deleted: JSONObject, sent: JSONObject) -> Bool {
        func same(_ value: JSONValue?, _ other: JSONValue?) -> Bool { (value?.isNull ?? true) ? (other?.isNull ?? true) : value == other }
        var names = Set(server.keys)
        names.formUnion(deleted.keys)
        return names.allSatisfy { name in
            same(server[name], deleted[name]) || (sent[name].map { same(server[name], $0) } ?? false)
        }
    }

    /// Whether `server` already has every attribute of `change` (null: absent).
    static func holds(_ server: JSONObject, _ change: JSONObject) -> Bool {
        change.allSatisfy { name, value in value.isNull ? server[name] == nil : server[name] == value }
    }
}

extension JSONObject {
    /// Adds the values of `sent` under the names it does not hold yet: of the values pushes
    /// sent for one attribute, the earlier stays (the server may hold either as this device's own;
    /// ``PendingChange/sentValues``).
    mutating func addSent(_ sent: JSONObject) {
        for (name, value) in sent where self[name] == nil { self[name] = value }
    }
}
