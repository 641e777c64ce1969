import Foundation
import Satchel

extension SyncEngine {
    /// Pushes the pending changes of `model`.
    ///
    /// 1. Changes left in flight by an earlier push that failed go back to pending (merged with
    ///    what changed since), so they are sent again.
    /// 2. In one batch, the pending changes to push become changes in flight; edits made while the push
    ///    is under way start new pending changes, so none is lost.
    /// 3. The server's results apply in one batch: accepted changes are no longer in flight (a create
    ///    may be renamed to its server id, with the references to it), refused ones become record
    ///    errors, changes to retry go back to pending.
    ///
    /// Objects with an unresolved record error are not pushed (their error says why), nor objects
    /// whose associations point at an object the server does not have yet (they go after its id
    /// arrives). An unresolved error never blocks the other objects.
    func push(
        _ model: Model, definition: ModelDefinition, modelConfiguration: ModelSyncConfiguration, session: SyncSession, report: inout SyncReport
    ) async throws {
        let blocked = try storage { try unsyncedParents(of: definition) }
        let batch: [OutgoingChange] = try storage {
            try store.bulkUpdate { tx in
                try Self.requeueInFlight(model, tx)
                var changes: [OutgoingChange] = []
                for change in try tx.pendingChanges(of: model) {
                    if try tx.recordError(model, change.objectID) != nil { continue }
                    if let inFlight = try tx.inFlightChange(model, change.objectID), inFlight.state == .awaitingLink { continue }
                    let object = try tx.find(change.objectID, in: model)
                    if let object, Self.refersTo(blocked, object: object, definition: definition) { continue }
                    var attributes: JSONObject
                    switch change.kind {
                    case .create:
                        guard let object else {
                            try tx.setPendingChange(model, change.objectID, kind: nil)
                            continue
                        }
                        attributes = modelConfiguration.syncing(object.attributes)
                    case .update, .delete:
                        attributes = modelConfiguration.syncing(change.attributes)
                        if change.kind == .update && attributes.isEmpty {
                            // Only device-only or ignored attributes changed: nothing to send.
                            try tx.setPendingChange(model, change.objectID, kind: nil)
                            continue
                        }
                    }
                    let version = try tx.version(model, change.objectID)
                    try tx.setPendingChange(model, change.objectID, kind: nil)
                    try tx.setInFlightChange(model, change.objectID, InFlightChange(kind: change.kind, attributes: attributes, baseVersion: version))
                    let whole = change.kind == .update ? object.map { modelConfiguration.syncing($0.attributes) } : nil
                    changes.append(OutgoingChange(id: change.objectID, kind: change.kind, attributes: attributes, baseVersion: version, object: whole))
                }
                return changes
            }
        }
        guard !batch.isEmpty else { return }
        let withBlobs = try storage { try batch.map { try attachBlobs($0, definition: definition) } }
        let chunkSize = backend.capabilities.maxPushBatch ?? withBlobs.count
        var start = 0
        while start < withBlobs.count {
            try checkStopped()
            let chunk = Array(withBlobs[start..<min(start + chunkSize, withBlobs.count)])
            let request = PushRequest(model: definition, changes: chunk, session: session, configuration: modelConfiguration)
            let results = try await withRetry { try await self.backend.push(request) }
            try storage { try apply(results, of: chunk, to: model, definition: definition, report: &report) }
            start += chunkSize
        }
        emit(.sync(SyncNotification(status: .inProgress, model: definition.name, message: "pushed \(batch.count) change(s)")))
    }

    /// Puts the unanswered changes in flight back among the pending ones, merged with later edits.
    static func requeueInFlight(_ model: Model, _ tx: Transaction) throws {
        for (id, record) in try tx.inFlightChanges(of: model) where record.state == .awaitingResult {
            try requeue(model, id, record, tx)
        }
    }

    /// Puts one change in flight back among the pending ones, merged with later edits.
    static func requeue(_ model: Model, _ id: String, _ record: InFlightChange, _ tx: Transaction) throws {
        try tx.setInFlightChange(model, id, nil)
        let later = try tx.pendingChange(model, id)
        var kind = record.kind
        var attributes = record.attributes
        switch (record.kind, later?.kind) {
        case (_, nil): break
        case (.create, .delete?), (.update, .delete?), (.delete, .delete?):
            // Whatever reached the server, the object must go: send the delete.
            kind = .delete
            attributes = later!.attributes
        case (.create, _):
            break  // still a create: it carries the object's current attributes
        case (.update, _):
            for (name, value) in later!.attributes { attributes[name] = value }
        case (.delete, _):
            // Deleted, then created again under the same id: an update that also removes what
            // the old object had.
            kind = .update
            var update = later!.attributes
            if later!.kind == .create, let object = try tx.find(id, in: model) { update = object.attributes }
            for (name, _) in attributes where !update.contains(name) { update[name] = .null }
            attributes = update
        }
        try tx.setPendingChange(model, id, kind: kind, attributes: attributes)
    }

    /// Ids, per parent model, of objects the server does not have yet (created locally, not
    /// linked): children referring to them wait.
    func unsyncedParents(of definition: ModelDefinition) throws -> [String: Set<String>] {
        var blocked: [String: Set<String>] = [:]
        for parent in Set(definition.associations.values) {
            guard let model = store.existingModel(parent) else { continue }
            let ids = try store.bulkUpdate { tx -> Set<String> in
                var ids = Set<String>()
                for change in try tx.pendingChanges(of: model) where change.kind == .create { ids.insert(change.objectID) }
                for (id, record) in try tx.inFlightChanges(of: model) where record.kind == .create { ids.insert(id) }
                for (id, record) in try tx.recordErrors(of: model) where record.kind == .create { ids.insert(id) }
                return ids
            }
            if !ids.isEmpty { blocked[parent] = ids }
        }
        return blocked
    }

    static func refersTo(_ blocked: [String: Set<String>], object: Object, definition: ModelDefinition) -> Bool {
        for (attribute, parent) in definition.associations {
            if let id = object[attribute]?.stringValue, blocked[parent]?.contains(id) == true { return true }
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

    /// Applies a push's results in one batch.
    func apply(
        _ results: [PushResult], of changes: [OutgoingChange], to model: Model, definition: ModelDefinition, report: inout SyncReport
    ) throws {
        let byID = Dictionary(results.map { ($0.id, $0.outcome) }, uniquingKeysWith: { _, last in last })
        var renamed: [(from: String, to: String)] = []
        var accepted = 0, rejected = 0
        var refusals: [String] = []
        try store.bulkUpdate { tx in
            for change in changes {
                guard let record = try tx.inFlightChange(model, change.id) else { continue }
                // A change the server did not answer for is sent again next time.
                var outcome = byID[change.id] ?? .retryLater(message: "no result from the server")
                if case .rejected(_, _, let serverCopy?) = outcome, change.kind == .update, Self.holds(serverCopy, record.attributes) {
                    // A conflict with a copy that already holds the change: an earlier push of it
                    // went through and its answer was lost.
                    outcome = .accepted()
                }
                switch outcome {
                case .accepted(let serverID, let version):
                    accepted += 1
                    try tx.setInFlightChange(model, change.id, nil)
                    var id = change.id
                    if change.kind == .create, let serverID, serverID != change.id {
                        try tx.rename(model, from: change.id, to: serverID)
                        renamed.append((change.id, serverID))
                        id = serverID
                    }
                    // An unknown version is no base for the next change (nil: unchecked).
                    try tx.setVersion(model, id, change.kind == .delete ? nil : version)
                case .awaitingLink:
                    var waiting = record
                    waiting.state = .awaitingLink
                    try tx.setInFlightChange(model, change.id, waiting)
                case .rejected(let message, let code, let serverCopy):
                    rejected += 1
                    refusals.append("\(change.kind.rawValue) \(change.id): \(message)")
                    try tx.setInFlightChange(model, change.id, nil)
                    try tx.setRecordError(
                        model, change.id,
                        RecordErrorRecord(kind: change.kind, message: message, code: code, attributes: record.attributes, server: serverCopy))
                case .notFound:
                    try tx.setInFlightChange(model, change.id, nil)
                    if change.kind == .delete {
                        accepted += 1
                        try tx.setVersion(model, change.id, nil)
                    } else {
                        rejected += 1
                        refusals.append("\(change.kind.rawValue) \(change.id): the object does not exist on the server")
                        try tx.setRecordError(
                            model, change.id,
                            RecordErrorRecord(
                                kind: change.kind, message: "the object does not exist on the server", code: "404",
                                attributes: record.attributes, serverDeleted: true))
                    }
                case .retryLater:
                    try Self.requeue(model, change.id, record, tx)
                }
            }
            // References to the renamed objects change in the same batch (or, in another
            // partition, from a record written in it).
            try tx.rewriteReferences(to: model, renames: Dictionary(renamed, uniquingKeysWith: { _, last in last }))
        }
        for (local, server) in renamed { report.serverIDs[definition.name, default: [:]][local] = server }
        report.accepted += accepted
        report.rejected += rejected
        if !renamed.isEmpty { emit(.objects(ObjectNotification(model: definition.name, created: renamed.map(\.to)))) }
        if !refusals.isEmpty {
            emit(.sync(SyncNotification(
                status: .error, model: definition.name, errorCode: .rejectedRecords, message: refusals.joined(separator: "; "))))
        }
    }

    /// Whether `server` already has every attribute of `change` (null: absent).
    static func holds(_ server: JSONObject, _ change: JSONObject) -> Bool {
        change.allSatisfy { name, value in value.isNull ? server[name] == nil : server[name] == value }
    }
}
