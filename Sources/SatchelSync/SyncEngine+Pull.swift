import Foundation
public import Satchel

extension SyncEngine {
    /// Pulls pages of `model` until the server says done, applying each in one batch with its
    /// cursor. With `full`, starts from no cursor and, at the end, deletes the objects the
    /// server no longer sent; for servers that report no deletions, the ids the server lists
    /// are compared after every complete pull.
    func pull(
        _ model: Model, definition: ModelDefinition, modelConfiguration: ModelSyncConfiguration, session: SyncSession, full: Bool,
        report: inout SyncReport
    ) async throws {
        var state = try storage { try store.bulkUpdate { try $0.syncState(model) } }
        if full { state.cursor = nil }
        var seen: Set<String>? = full ? [] : nil
        // Attributes a full pull sent of objects it sent in parts (RhoConnect's inserts): the
        // others are gone from the server.
        var seenAttributes: [String: Set<String>] = [:]
        var processed = 0
        while true {
            try checkStopped()
            let request = pullRequest(definition, cursor: state.cursor, session: session, modelConfiguration: modelConfiguration)
            let page = try await withRetry { try await self.backend.pull(request) }
            if page.schemaChanged {
                // The cursor acknowledges the page that said so.
                state.cursor = page.nextCursor
                let stored = state
                try storage { try store.bulkUpdate { try $0.setSyncState(model, stored) } }
                report.schemaChanged = true
                emit(.sync(SyncNotification(status: .schemaChanged, model: definition.name, totalCount: page.totalCount)))
                return
            }
            if let sourceError = page.sourceError {
                emit(.sync(SyncNotification(status: .error, model: definition.name, errorCode: .server, message: sourceError)))
            }
            let blobs = try await downloadBlobs(page, definition: definition, modelConfiguration: modelConfiguration, session: session, state: state)
            let outcome = try storage {
                try apply(page, to: model, definition: definition, modelConfiguration: modelConfiguration, blobs: blobs, state: &state)
            }
            seen?.formUnion(page.upserts.map(\.id))
            if full {
                for object in page.upserts where !object.isWhole { seenAttributes[object.id, default: []].formUnion(object.attributes.keys) }
            }
            // A linked object is the server's too, even when the server does not send it again.
            seen?.formUnion(page.links.values)
            processed += page.count
            report.pulled += page.count
            report.rejected += page.errors.count
            report.accepted += outcome.acknowledged
            if !outcome.objects.isEmpty { emit(.objects(outcome.objects)) }
            if page.count > 0 || !page.errors.isEmpty {
                emit(.sync(SyncNotification(
                    status: .inProgress, model: definition.name, totalCount: page.totalCount, processedCount: processed,
                    cumulativeCount: page.count)))
            }
            for (local, server) in outcome.links { report.serverIDs[definition.name, default: [:]][local] = server }
            if !page.errors.isEmpty {
                emit(.sync(SyncNotification(
                    status: .error, model: definition.name, errorCode: .rejectedRecords,
                    message: page.errors.map { "\($0.kind.rawValue) \($0.id): \($0.message)" }.joined(separator: "; "))))
            }
            if page.done { break }
        }
        if let seen {
            try reconcile(model, definition: definition, keeping: seen, attributes: seenAttributes, modelConfiguration: modelConfiguration, endingFullPull: true)
        } else if backend.capabilities.deletions == .byListingIDs {
            let request = pullRequest(definition, cursor: state.cursor, session: session, modelConfiguration: modelConfiguration)
            let ids = try await withRetry { try await self.backend.remoteIDs(request) }
            try reconcile(model, definition: definition, keeping: Set(ids))
        }
    }

    /// Replaces `model`'s data with the server's bulk snapshot, in one batch, then re-applies
    /// the pending local changes on top (they stay pending, to be pushed).
    func bulk(
        _ model: Model, definition: ModelDefinition, modelConfiguration: ModelSyncConfiguration, session: SyncSession, report: inout SyncReport
    ) async throws {
        var objects: [ServerObject] = []
        var cursor: JSONValue? = nil
        var total: Int?
        while true {
            try checkStopped()
            let request = pullRequest(definition, cursor: cursor, session: session, modelConfiguration: modelConfiguration)
            let page = try await withRetry { try await self.backend.bulkSnapshot(request) }
            objects += page.upserts
            cursor = page.nextCursor
            total = page.totalCount ?? total
            if page.done { break }
        }
        var state = try storage { try store.bulkUpdate { try $0.syncState(model) } }
        let snapshot = PullPage(upserts: objects, nextCursor: cursor, done: true, totalCount: total)
        let blobs = try await downloadBlobs(snapshot, definition: definition, modelConfiguration: modelConfiguration, session: session, state: state)
        let outcome = try storage {
            try store.bulkUpdate { tx -> ObjectNotification in
                let keep = Set(objects.map(\.id))
                var notification = ObjectNotification(model: definition.name)
                // Everything not in the snapshot goes, except what exists only here (pending or
                // in-flight creates).
                for object in try tx.findAll(in: model) where !keep.contains(object.id) {
                    if try Self.isLocalOnly(model, object.id, tx) { continue }
                    if try tx.writeServerObject(model, object.id, nil) == .deleted { notification.deleted.append(object.id) }
                }
                try Self.applyUpserts(objects, to: model, modelConfiguration: modelConfiguration, blobs: blobs, tx: tx, notification: &notification)
                state.cursor = cursor
                state.fullPullPending = false
                state.initialSyncComplete = true
                state.lastSync = Self.now()
                try tx.setSyncState(model, state)
                return notification
            }
        }
        report.pulled += objects.count
        if !outcome.isEmpty { emit(.objects(outcome)) }
        emit(.sync(SyncNotification(status: .inProgress, model: definition.name, totalCount: total, processedCount: objects.count, cumulativeCount: objects.count)))
    }

    /// Asks the server for the objects of `model` matching `query` and stores them, in one
    /// batch, as a pulled page would (local unacknowledged changes win); the model's cursor does
    /// not move. RhoConnect's `search`.
    ///
    /// - Returns: the ids found.
    /// - Throws: ``SyncError`` `.notSupported` when the server has no search.
    @discardableResult
    public func search(_ name: String, query: JSONObject) async throws -> [String] {
        guard let definition = store.models.first(where: { $0.name == name }) else {
            throw SyncError(.notSupported, "no model named '\(name)'")
        }
        let session = try await preparedSession()
        let model = try storage { try store.model(name) }
        let modelConfiguration = configuration(of: name)
        let request = pullRequest(definition, cursor: nil, session: session, modelConfiguration: modelConfiguration)
        let page = try await withRetry { try await self.backend.search(request, query: query) }
        let state = try storage { try store.bulkUpdate { try $0.syncState(model) } }
        let blobs = try await downloadBlobs(page, definition: definition, modelConfiguration: modelConfiguration, session: session, state: state)
        let notification = try storage {
            try store.bulkUpdate { tx -> ObjectNotification in
                var notification = ObjectNotification(model: name)
                try Self.applyUpserts(page.upserts, to: model, modelConfiguration: modelConfiguration, blobs: blobs, tx: tx, notification: &notification)
                return notification
            }
        }
        if !notification.isEmpty { emit(.objects(notification)) }
        return page.upserts.map(\.id)
    }

    /// Deletes the synced objects of `model` not in `keeping` (unless they exist only here or
    /// have local changes, which are then reported), in one batch. Objects with an entry in
    /// `attributes` lose the attributes not in it (those without local changes). With
    /// `endingFullPull`, the same batch records that no full pull is owed any more.
    func reconcile(
        _ model: Model, definition: ModelDefinition, keeping: Set<String>, attributes: [String: Set<String>] = [:],
        modelConfiguration: ModelSyncConfiguration = ModelSyncConfiguration(), endingFullPull: Bool = false
    ) throws {
        let notification = try storage {
            try store.bulkUpdate { tx -> ObjectNotification in
                var notification = ObjectNotification(model: definition.name)
                if endingFullPull {
                    var state = try tx.syncState(model)
                    state.fullPullPending = false
                    try tx.setSyncState(model, state)
                }
                for object in try tx.findAll(in: model) {
                    guard keeping.contains(object.id) else {
                        if try Self.isLocalOnly(model, object.id, tx) { continue }
                        if try Self.applyServerDelete(object.id, to: model, tx: tx) { notification.deleted.append(object.id) }
                        continue
                    }
                    guard let sent = attributes[object.id],
                        object.attributes.keys.contains(where: { !sent.contains($0) && modelConfiguration.syncs($0) })
                    else { continue }
                    let protected = try Self.protectedAttributes(model, object.id, modelConfiguration: modelConfiguration, tx: tx)
                    if protected.all || protected.deletedLocally { continue }
                    let kept = object.attributes.filter { name, _ in sent.contains(name) || !modelConfiguration.syncs(name) || protected.names.contains(name) }
                    notification.note(try tx.writeServerObject(model, object.id, kept, replacing: object.attributes), object.id)
                }
                return notification
            }
        }
        if !notification.isEmpty { emit(.objects(notification)) }
    }

    // MARK: - Applying a page

    struct PageOutcome {
        var objects: ObjectNotification
        var links: [(String, String)]
        /// Creates the page acknowledged (with a link).
        var acknowledged: Int
    }

    /// Applies one page in one batch: links, errors, deletes, removals, upserts, then the cursor.
    func apply(
        _ page: PullPage, to model: Model, definition: ModelDefinition, modelConfiguration: ModelSyncConfiguration,
        blobs: [String: [String: String]], state: inout SyncStateRecord
    ) throws -> PageOutcome {
        var newState = state
        let outcome = try store.bulkUpdate { tx -> PageOutcome in
            var notification = ObjectNotification(model: definition.name)
            var links: [(String, String)] = []
            var acknowledged = 0
            for (local, server) in page.links.sorted(by: { $0.key < $1.key }) {
                if local != server, try tx.rename(model, from: local, to: server) {
                    links.append((local, server))
                    notification.created.append(server)
                }
                // The create is acknowledged (a link to the same id included).
                if let inFlight = try tx.inFlightChange(model, server), inFlight.kind == .create {
                    try tx.setInFlightChange(model, server, nil)
                    acknowledged += 1
                }
            }
            // References to the renamed objects change in the same batch (or, in another
            // partition, from a record written in it).
            try tx.rewriteReferences(to: model, renames: Dictionary(links, uniquingKeysWith: { _, last in last }))
            for error in page.errors {
                let pushed = try tx.inFlightChange(model, error.id)
                try tx.setInFlightChange(model, error.id, nil)
                try tx.setRecordError(
                    model, error.id,
                    RecordErrorRecord(
                        kind: error.kind, message: error.message, code: error.code,
                        attributes: error.attributes ?? pushed?.attributes ?? JSONObject(), server: error.serverCopy))
            }
            for id in page.deletes where try Self.applyServerDelete(id, to: model, tx: tx) { notification.deleted.append(id) }
            for (id, names) in page.removals.sorted(by: { $0.key < $1.key }) {
                guard let object = try tx.find(id, in: model) else { continue }
                let listed = Set(names)
                let keys = object.attributes.keys
                if keys.contains(where: listed.contains), keys.allSatisfy({ listed.contains($0) || !modelConfiguration.syncs($0) }) {
                    // Every attribute the server could know of is removed: the object is.
                    if try Self.applyServerDelete(id, to: model, tx: tx) { notification.deleted.append(id) }
                    continue
                }
                let protected = try Self.protectedAttributes(model, id, modelConfiguration: modelConfiguration, tx: tx)
                if protected.all { continue }
                var remaining = object.attributes
                for name in names where modelConfiguration.syncs(name) && !protected.names.contains(name) { remaining[name] = nil }
                notification.note(try tx.writeServerObject(model, id, remaining, replacing: object.attributes), id)
            }
            try Self.applyUpserts(page.upserts, to: model, modelConfiguration: modelConfiguration, blobs: blobs, tx: tx, notification: &notification)
            newState.cursor = page.nextCursor
            if let metadata = page.metadata { newState.metadata = metadata }
            if page.done {
                newState.initialSyncComplete = true
                newState.lastSync = Self.now()
            }
            try tx.setSyncState(model, newState)
            return PageOutcome(objects: notification, links: links, acknowledged: acknowledged)
        }
        state = newState
        return outcome
    }

    /// Upserts objects, local unacknowledged changes and device-only attributes winning.
    static func applyUpserts(
        _ objects: [ServerObject], to model: Model, modelConfiguration: ModelSyncConfiguration, blobs: [String: [String: String]],
        tx: Transaction, notification: inout ObjectNotification
    ) throws {
        // With no local change anywhere in the model, no object needs protecting (the usual case
        // of a first sync): three reads per object saved.
        let quiet = try !tx.hasLocalChanges(model)
        let deviceOnly = Set(modelConfiguration.deviceOnlyAttributes)
        for object in objects {
            let protected = quiet ? (all: false, names: deviceOnly, deletedLocally: false) : try protectedAttributes(model, object.id, modelConfiguration: modelConfiguration, tx: tx)
            if protected.all { continue }
            // The server's version is the base of the next push of a change to the object.
            if let version = object.version { try tx.setVersion(model, object.id, version) }
            var incoming = modelConfiguration.syncing(object.attributes)
            if !quiet, var error = try tx.recordError(model, object.id), error.kind == .update {
                // Keep the error's copy of the server's object current, for a rollback.
                var copy = object.isWhole ? JSONObject() : (error.server ?? JSONObject())
                for (name, value) in incoming { copy[name] = value.isNull ? nil : value }
                error.server = copy
                error.serverDeleted = false
                try tx.setRecordError(model, object.id, error)
            }
            if protected.deletedLocally { continue }
            let old = try tx.find(object.id, in: model)?.attributes
            for (name, reference) in blobs[object.id] ?? [:] { incoming[name] = .string(reference) }
            var new: JSONObject
            if object.isWhole {
                new = incoming
                for (name, value) in old ?? JSONObject() where !modelConfiguration.syncs(name) || protected.names.contains(name) {
                    new[name] = value
                }
                for name in protected.names where old?[name] == nil { new[name] = nil }
            } else {
                new = old ?? JSONObject()
                for (name, value) in incoming where !protected.names.contains(name) { new[name] = value.isNull ? nil : value }
            }
            notification.note(try tx.writeServerObject(model, object.id, new, replacing: old), object.id)
        }
    }

    /// Applies a server delete. An object with local changes the server has not seen is kept,
    /// and the conflict stored as a record error; a local delete pending or in flight is simply
    /// done. Returns whether the object was deleted.
    static func applyServerDelete(_ id: String, to model: Model, tx: Transaction) throws -> Bool {
        let pending = try tx.pendingChange(model, id)
        let inFlight = try tx.inFlightChange(model, id)
        if var error = try tx.recordError(model, id) {
            switch error.kind {
            case .create:
                return false  // the server never had this object
            case .delete:
                // What the refused delete wanted happened.
                try tx.setRecordError(model, id, nil)
            case .update:
                // The refused update now meets a deleted object: `retry` creates it again.
                error.serverDeleted = true
                error.server = nil
                try tx.setRecordError(model, id, error)
                try tx.setVersion(model, id, nil)
                return false
            }
        }
        if pending?.kind == .delete || inFlight?.kind == .delete {
            try tx.setPendingChange(model, id, kind: nil)
            try tx.setInFlightChange(model, id, nil)
            try tx.setVersion(model, id, nil)
            return false
        }
        if let inFlight, inFlight.kind == .create, inFlight.state == .awaitingLink {
            // The server did not keep the object under this id (RhoConnect: a create without a
            // link): it will send the real one.
            try tx.setInFlightChange(model, id, nil)
        } else if pending?.kind == .create {
            return false  // created here and never pushed: not the server's object
        } else if let change = pending ?? inFlight.map({ PendingChange(model: model.name, objectID: id, kind: $0.kind, attributes: $0.attributes) }) {
            try tx.setInFlightChange(model, id, nil)
            try tx.setRecordError(
                model, id,
                RecordErrorRecord(
                    kind: .update, message: "deleted on the server while changed here", code: "deleted",
                    attributes: change.attributes, serverDeleted: true))
            return false
        }
        try tx.setVersion(model, id, nil)
        return try tx.writeServerObject(model, id, nil) == .deleted
    }

    /// Attributes the server must not overwrite: those with local changes it has not
    /// acknowledged (all of them for an object created here), and device-only ones.
    static func protectedAttributes(
        _ model: Model, _ id: String, modelConfiguration: ModelSyncConfiguration, tx: Transaction
    ) throws -> (all: Bool, names: Set<String>, deletedLocally: Bool) {
        var names = Set(modelConfiguration.deviceOnlyAttributes)
        var all = false
        var deleted = false
        if let error = try tx.recordError(model, id) {
            // A refused change keeps its local values until the app resolves it.
            switch error.kind {
            case .create: all = true
            case .update: names.formUnion(error.attributes.keys)
            case .delete: deleted = true
            }
        }
        if let pending = try tx.pendingChange(model, id) {
            switch pending.kind {
            case .create: all = true
            case .update: names.formUnion(pending.attributes.keys)
            case .delete: deleted = true
            }
        }
        if let inFlight = try tx.inFlightChange(model, id) {
            switch inFlight.kind {
            case .create: all = true
            case .update: names.formUnion(inFlight.attributes.keys)
            case .delete: deleted = true
            }
        }
        return (all, names, deleted)
    }

    /// Whether object `id` exists only here: created locally, not yet on the server.
    static func isLocalOnly(_ model: Model, _ id: String, _ tx: Transaction) throws -> Bool {
        if try tx.pendingChange(model, id)?.kind == .create { return true }
        if try tx.inFlightChange(model, id)?.kind == .create { return true }
        if try tx.recordError(model, id)?.kind == .create { return true }
        return false
    }

    /// Downloads the blob URLs of a page into the blob store: object id → attribute → reference.
    /// During a model's first sync, with ``ModelSyncConfiguration/skipBlobsOnFirstSync``, they
    /// are left as URLs.
    func downloadBlobs(
        _ page: PullPage, definition: ModelDefinition, modelConfiguration: ModelSyncConfiguration, session: SyncSession, state: SyncStateRecord
    ) async throws -> [String: [String: String]] {
        if modelConfiguration.skipBlobsOnFirstSync && !state.initialSyncComplete { return [:] }
        var references: [String: [String: String]] = [:]
        for object in page.upserts where !object.blobURLs.isEmpty {
            for (attribute, url) in object.blobURLs.sorted(by: { $0.key < $1.key }) {
                try checkStopped()
                let data = try await withRetry { try await self.backend.downloadBlob(url, session: session) }
                references[object.id, default: [:]][attribute] = try storage { try store.blobs.put(data) }
            }
        }
        return references
    }

    static func now() -> String { ISO8601DateFormatter().string(from: Date()) }
}

extension ObjectNotification {
    /// Lists `id` under what a write of server data did to it.
    mutating func note(_ effect: Transaction.ObjectEffect, _ id: String) {
        switch effect {
        case .created: created.append(id)
        case .updated: updated.append(id)
        case .deleted: deleted.append(id)
        case .unchanged: break
        }
    }
}
