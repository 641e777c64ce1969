import Foundation
import Logging
import Satchel

extension SyncEngine {
    /// Pulls pages of `model` until the server says done, applying each in one batch with its
    /// cursor. With `full`, starts from no cursor and, at the end, deletes the objects the
    /// server no longer sent; for servers that report no deletions, the ids the server lists
    /// are compared after every complete pull.
    func pull(
        _ model: Model, definition: ModelDefinition, modelConfiguration: ModelSyncConfiguration, session: SyncSession, full: Bool,
        report: inout SyncReport
    ) async throws {
        var definition = definition
        var state = try storage { try store.read { try $0.syncState(model) } }
        // A sync after the first downloads the blobs the first one left as URLs.
        let fetchesDeferredBlobs = state.blobsDeferred && state.initialSyncComplete
        if full { state.cursor = nil }
        var seen: Set<[UInt8]>? = full ? [] : nil
        // Attributes a full pull sent of objects it sent in parts (RhoConnect's inserts): the
        // others are gone from the server.
        var seenAttributes: [String: Set<String>] = [:]
        var processed = 0
        // The server's count of the model, when a page says it: later pages of the pull show the
        // last one said (a server may count only on the first page).
        var total: Int?
        var listIDs = backend.capabilities.deletions == .byListingIDs
        var pages = PageLoopGuard(model: definition.name)
        // The next page, asked for while this one is applied (a backend that
        // ``SyncCapabilities/pullsAhead``), with the cursor it was asked from.
        var ahead: (cursor: JSONValue?, page: Task<PullPage, any Error>)?
        defer { ahead?.page.cancel() }
        while true {
            let request = pullRequest(
                definition, cursor: state.cursor, session: session, modelConfiguration: modelConfiguration, metadata: state.metadata)
            let asked = ahead.flatMap { $0.cursor == request.cursor ? $0.page : nil }
            if asked == nil {
                ahead?.page.cancel()
                // A stop is seen before a page is asked for: a page asked ahead is applied, as
                // a page asked for in turn would be.
                try checkStopped()
            }
            ahead = nil
            // The page asked ahead is the first attempt: its failure is retried (or ends the
            // sync, a 401 dropping the session) as any request's.
            let page = try await withRetry(firstAttempt: asked) { try await self.backend.pull(request) }
            try pages.check(page, after: request.cursor)
            total = page.totalCount ?? total
            try Self.checkTypes(page, model: definition.name)
            definition = try declare(page, in: definition, configuration: modelConfiguration)
            if page.reconcileIDs { listIDs = true }
            if page.schemaChanged {
                // The cursor acknowledges the page that said so.
                state.cursor = page.nextCursor
                let stored = state
                try storage { try store.bulkUpdate { try $0.setSyncState(model, stored) } }
                report.schemaChanged = true
                emit(.sync(SyncNotification(status: .schemaChanged, model: definition.name, totalCount: total)))
                return
            }
            if let sourceError = page.sourceError {
                emit(.sync(SyncNotification(status: .error, model: definition.name, errorCode: .server, message: sourceError)))
            }
            if backend.capabilities.pullsAhead && !page.done && !isStopping {
                // Off the engine's actor, so that the server answers while the page is applied.
                let next = pullRequest(
                    definition, cursor: page.nextCursor, session: session, modelConfiguration: modelConfiguration,
                    metadata: page.metadata ?? state.metadata)
                let backend = self.backend
                ahead = (page.nextCursor, Task.detached { try await backend.pull(next) })
            }
            let blobs = try await downloadBlobs(page, definition: definition, modelConfiguration: modelConfiguration, session: session, state: state)
            var applying = page
            applying.refusals = try await downloadBlobs(ofCopiesIn: page.refusals, definition: definition, session: session)
            if full {
                // A full pull follows a reset of this client's copy on the server (RhoConnect's):
                // a refusal whose server copy is empty says only that the copy is not sent yet,
                // not that the server deleted the object (a black-box probe: a full sync killed
                // there left it so, and retry made the object again, twice over). A delete comes
                // as such, or with the reconciliation that ends the pull.
                for index in applying.refusals.indices where applying.refusals[index].serverDeleted && applying.refusals[index].serverCopy == nil {
                    applying.refusals[index].serverDeleted = false
                }
            }
            if Self.defersBlobs(of: page.upserts, modelConfiguration: modelConfiguration, state: state) { state.blobsDeferred = true }
            // A page is bounded by the page size: applied on the actor (the hop to the storage
            // queue cost a tenth of the pull rate), unless its links rename objects.
            let before = state
            let (outcome, after) = try await onStore(bounded: page.links.isEmpty) { [applying] store in
                do {
                    return try Self.apply(applying, to: model, in: store, modelConfiguration: modelConfiguration, blobs: blobs, state: before)
                } catch {
                    throw Self.refusedByTheStore(error, model: model.name)
                }
            }
            state = after
            if !page.related.isEmpty { try await applyRelated(page.related, modelConfiguration: modelConfiguration, report: &report) }
            seen?.formUnion(page.upserts.map { Array($0.id.utf8) })
            if full {
                for object in page.upserts where !object.isWhole { seenAttributes[object.id, default: []].formUnion(object.attributes.keys) }
            }
            // A linked object is the server's too, even when the server does not send it again.
            seen?.formUnion(page.links.values.map { Array($0.utf8) })
            processed += page.count
            report.pulled += page.count
            report.refused += page.refusals.count
            report.accepted += outcome.acknowledged
            noteDeletedWhileChanged(outcome.deletedWhileChanged, of: definition.name, report: &report)
            if !outcome.objects.isEmpty { emit(.objects(outcome.objects)) }
            if page.count > 0 || !page.refusals.isEmpty {
                emit(
                    .sync(
                        SyncNotification(
                            status: .inProgress, model: definition.name, totalCount: total, processedCount: processed,
                            cumulativeCount: page.count)))
            }
            for (local, server) in outcome.links { report.serverIDs[definition.name, default: [:]][local] = server }
            if !page.refusals.isEmpty {
                emit(
                    .sync(
                        SyncNotification(
                            status: .error, model: definition.name, errorCode: .refusedChanges,
                            message: page.refusals.map { "\($0.kind.rawValue) \($0.objectID): \($0.message)" }.joined(separator: "; "))))
            }
            if page.done { break }
        }
        // The listing is the server's word on what exists, after the pull (a full one too: an
        // object deleted while it paged is gone from the listing). A full pull under a fetch
        // limit brought the first N objects only, so what it did not send is not gone: the
        // listing says what is, where the server has one; else nothing goes.
        let limited = full && modelConfiguration.fetchLimit != nil
        if listIDs || limited {
            let request = pullRequest(
                definition, cursor: state.cursor, session: session, modelConfiguration: modelConfiguration, metadata: state.metadata)
            let ids: [String]
            do {
                ids = try await withRetry { try await self.backend.remoteIDs(request) }
            } catch let error as SyncError where error.code == .notSupported && !listIDs {
                return try owesFullPull(model, false)
            }
            try await reconcile(
                model, definition: definition, keeping: Set(ids.map { Array($0.utf8) }), attributes: seenAttributes,
                modelConfiguration: modelConfiguration, endingFullPull: full, report: &report)
        } else if let seen {
            try await reconcile(
                model, definition: definition, keeping: seen, attributes: seenAttributes, modelConfiguration: modelConfiguration,
                endingFullPull: true, report: &report)
        }
        if fetchesDeferredBlobs { try await downloadDeferredBlobs(model, definition: definition, session: session) }
    }

    /// A failure to apply a page, said as the server's doing when the store refused one of its
    /// objects for nesting deeper than a store holds (a black-box probe: a `storage` error that
    /// named neither the model nor the object).
    static func refusedByTheStore(_ error: any Error, model: String, during what: String = "pull") -> any Error {
        guard let refusal = error as? SatchelError, refusal.code == .malformedJSON, let id = refusal.objectID else { return error }
        return SyncError(
            .protocolViolation,
            "\(what) of \(model): the server sent object \(id) nested deeper than a store holds (\(refusal.message)); nothing of the page was applied"
        )
    }

    /// Whether a page's blobs are left as URLs, to be downloaded by a later sync: the app asked
    /// the model's first sync to skip them (``ModelSyncConfiguration/skipBlobsOnFirstSync``).
    static func defersBlobs(of upserts: [ServerObject], modelConfiguration: ModelSyncConfiguration, state: ModelSyncState) -> Bool {
        modelConfiguration.skipBlobsOnFirstSync && !state.initialSyncComplete && upserts.contains { !$0.blobURLs.isEmpty }
    }

    /// Downloads the blobs a first sync left as URLs (``ModelSyncConfiguration/skipBlobsOnFirstSync``,
    /// MM_RSF's `disable-initial-blob-download`: skipped "during the initial sync process", not for
    /// ever; a black-box probe found them left as URLs by every sync after). Each blob attribute
    /// holding a value that is no blob here is fetched and written, as a pull writes it, a few
    /// objects a batch; one the app changed here since is left to its change. A blob the server no
    /// longer has stays its URL, said in a notification. The model's mark goes when all were
    /// tried; a sync stopped before keeps it, and the next goes on.
    func downloadDeferredBlobs(_ model: Model, definition: ModelDefinition, session: SyncSession) async throws {
        var deferred: [(id: String, attribute: String, url: String)] = []
        try storage {
            try model.forEach { object in
                for attribute in definition.blobAttributes {
                    guard case .string(let url)? = object[attribute], !BlobStore.isReference(object[attribute]) else { continue }
                    deferred.append((object.id, attribute, url))
                }
            }
        }
        var start = 0
        while start < deferred.count {
            let chunk = deferred[start..<min(start + 100, deferred.count)]
            start += chunk.count
            var downloaded: [(id: String, attribute: String, url: String, reference: String)] = []
            for blob in chunk {
                if let reference = try await downloadBlob(blob.url, of: blob.id, blob.attribute, definition: definition, session: session) {
                    downloaded.append((blob.id, blob.attribute, blob.url, reference))
                }
            }
            let written = try await onStorageQueue { [downloaded] store in
                try store.bulkUpdate { tx -> ChangeSet in
                    var notification = ChangeSet(model: definition.name, origin: .server)
                    for blob in downloaded {
                        guard let object = try tx.find(blob.id, in: model), object[blob.attribute] == .string(blob.url),
                            try tx.objectSyncState(model, blob.id).pending?.attributes[blob.attribute] == nil
                        else { continue }
                        var attributes = object.attributes
                        attributes[blob.attribute] = .string(blob.reference)
                        notification.note(try tx.writeServerObject(model, blob.id, attributes, replacing: object.attributes), blob.id)
                    }
                    return notification
                }
            }
            if !written.isEmpty { emit(.objects(written)) }
        }
        try await onStorageQueue { store in
            try store.bulkUpdate { tx in
                var state = try tx.syncState(model)
                state.blobsDeferred = false
                try tx.setSyncState(model, state)
            }
        }
    }

    /// Checks a page's objects against the attribute types it declares (Salesforce's describe):
    /// a value of another type would be stored into a schema it does not fit, which `check`
    /// then reports and which refuses every later local write of the object.
    ///
    /// - Throws: ``SyncError`` `.protocolViolation` naming the object, the attribute and the type.
    static func checkTypes(_ page: PullPage, model: String) throws(SyncError) {
        guard let types = page.schema.attributeTypes else { return }
        for object in page.upserts {
            for (attribute, value) in object.attributes where !value.isNull && object.blobURLs[attribute] == nil {
                guard let type = types[attribute], !type.accepts(value) else { continue }
                throw SyncError(
                    .protocolViolation,
                    "the server sent object \(object.id) of \(model) with \(attribute) \(String(value.description.prefix(40))), not of its schema's type \(type.rawValue); nothing of the page was applied"
                )
            }
        }
    }

    /// Adds the associations, blob attributes, choices and attribute types a page showed to the model's definition
    /// (stored at once: a definition is not part of a batch, and adding them twice is harmless).
    /// The types are those of the attributes that travel (`onlyList` and `ignoreList` applied: a
    /// local write of one they leave out is refused, as it would never be pushed), and the
    /// device-only attributes, of any type. An attribute the server's schema no longer lists (a
    /// field its admin deleted, an `extra-device` attribute no longer named) keeps its type:
    /// objects here may hold it, and a schema they did not fit would refuse every later pull and
    /// update of theirs.
    func declare(_ page: PullPage, in definition: ModelDefinition, configuration: ModelSyncConfiguration = ModelSyncConfiguration()) throws
        -> ModelDefinition
    {
        var updated = definition
        if var types = page.schema.attributeTypes?.filter({ configuration.syncs($0.key) }) {
            for attribute in configuration.deviceOnlyAttributes where types[attribute] == nil { types[attribute] = .any }
            if case .fixedSchema(let kept) = definition.kind {
                for (attribute, type) in kept where types[attribute] == nil { types[attribute] = type }
            }
            updated.kind = .fixedSchema(types)
        }
        for (attribute, target) in page.schema.associations where updated.associations[attribute] == nil {
            updated.associations[attribute] = target
        }
        for attribute in page.schema.associationsGone where page.schema.associations[attribute] == nil {
            updated.associations[attribute] = nil
        }
        for attribute in page.schema.blobAttributes where !updated.blobAttributes.contains(attribute) {
            updated.blobAttributes.append(attribute)
        }
        for (attribute, choices) in page.schema.choices { updated.choices[attribute] = choices }
        guard updated != definition else { return definition }
        try storage {
            do {
                _ = try store.register(updated)
            } catch let error as SatchelError where error.code == .schemaViolation && page.schema.attributeTypes != nil {
                // Objects written here before the server's schema was known, with attributes
                // it does not declare: said with the way to keep them (a black-box probe).
                throw SatchelError(
                    .schemaViolation,
                    "the server declares the attributes of '\(definition.name)', and objects here hold others (\(error.message)): keep such attributes on this device with extra-device (satchel sync --objects) or deviceOnlyAttributes, or remove them with a migration",
                    model: definition.name, objectID: error.objectID)
            }
        }
        return updated
    }

    /// Applies objects of other models that came with a page (Parse's `include`d pointers),
    /// upserted as pulled objects are (whole, or attributes merged in), in one batch per model.
    func applyRelated(_ related: [String: [ServerObject]], modelConfiguration: ModelSyncConfiguration, report: inout SyncReport) async throws {
        for (name, objects) in related.sorted(by: { $0.key < $1.key }) where !objects.isEmpty {
            let configuration = try self.configuration(of: name)
            let notification = try await onStorageQueue { store in
                let model = try store.model(name)
                return try store.bulkUpdate { tx -> ChangeSet in
                    var notification = ChangeSet(model: name, origin: .server)
                    try Self.applyUpserts(objects, to: model, modelConfiguration: configuration, blobs: [:], tx: tx, notification: &notification)
                    return notification
                }
            }
            if !notification.isEmpty { emit(.objects(notification)) }
        }
    }

    /// Replaces `model`'s data with the server's bulk snapshot, in one batch, then re-applies
    /// the pending local changes on top (they stay pending, to be pushed). Returns false, having
    /// changed nothing, when the server has no snapshot of the model (its first page is
    /// `.notSupported`).
    func bulk(
        _ model: Model, definition: ModelDefinition, modelConfiguration: ModelSyncConfiguration, session: SyncSession, report: inout SyncReport
    ) async throws -> Bool {
        var objects: [ServerObject] = []
        var cursor: JSONValue? = nil
        var total: Int?
        var pages = PageLoopGuard(model: definition.name)
        while true {
            try checkStopped()
            let request = pullRequest(definition, cursor: cursor, session: session, modelConfiguration: modelConfiguration)
            let page: PullPage
            do {
                page = try await withRetry { try await self.backend.bulkSnapshot(request) }
            } catch let error as SyncError where error.code == .notSupported && cursor == nil && objects.isEmpty {
                configuration.logger.notice("no bulk snapshot", metadata: ["model": "\(definition.name)", "reason": "\(error.message)"])
                return false
            }
            try pages.check(page, after: request.cursor)
            total = page.totalCount ?? total
            objects += page.upserts
            cursor = page.nextCursor
            total = page.totalCount ?? total
            if page.done { break }
        }
        var stored = try storage { try store.read { try $0.syncState(model) } }
        if Self.defersBlobs(of: objects, modelConfiguration: modelConfiguration, state: stored) { stored.blobsDeferred = true }
        let state = stored
        let snapshot = PullPage(upserts: objects, nextCursor: cursor, done: true, totalCount: total)
        let blobs = try await downloadBlobs(snapshot, definition: definition, modelConfiguration: modelConfiguration, session: session, state: state)
        let (upserts, lastCursor) = (objects, cursor)
        let outcome = try await onStorageQueue { store in
            try store.bulkUpdate { tx -> ChangeSet in
                let keep = Set(upserts.map(\.id))
                var notification = ChangeSet(model: definition.name, origin: .server)
                // Everything not in the snapshot goes, except what exists only here (pending or
                // in-flight creates).
                for object in try tx.findAll(in: model) where !keep.contains(object.id) {
                    if MergePolicy.isLocalOnly(try tx.objectSyncState(model, object.id)) { continue }
                    if try tx.writeServerObject(model, object.id, nil, replacing: object.attributes) == .deleted {
                        notification.deleted.append(object.id)
                    }
                }
                try Self.applyUpserts(upserts, to: model, modelConfiguration: modelConfiguration, blobs: blobs, tx: tx, notification: &notification)
                var state = state
                state.cursor = lastCursor
                state.fullPullPending = false
                state.initialSyncComplete = true
                state.lastSync = Self.now()
                try tx.setSyncState(model, state)
                return notification
            }
        }
        report.pulled += objects.count
        if !outcome.isEmpty { emit(.objects(outcome)) }
        emit(
            .sync(
                SyncNotification(
                    status: .inProgress, model: definition.name, totalCount: total, processedCount: objects.count, cumulativeCount: objects.count)))
        return true
    }

    /// Deletes the synced objects of `model` not in `keeping` (unless they exist only here or
    /// have local changes, which are then reported), in one batch. Objects with an entry in
    /// `attributes` lose the attributes not in it (those without local changes). With
    /// `endingFullPull`, the same batch records that no full pull is owed any more.
    func reconcile(
        _ model: Model, definition: ModelDefinition, keeping: Set<[UInt8]>, attributes: [String: Set<String>] = [:],
        modelConfiguration: ModelSyncConfiguration, endingFullPull: Bool = false, report: inout SyncReport
    ) async throws {
        let (notification, deletedWhileChanged) = try await onStorageQueue { store in
            try store.bulkUpdate { tx -> (ChangeSet, [String]) in
                var notification = ChangeSet(model: definition.name, origin: .server)
                var deletedWhileChanged: [String] = []
                if endingFullPull {
                    var state = try tx.syncState(model)
                    state.fullPullPending = false
                    try tx.setSyncState(model, state)
                }
                for object in try tx.findAll(in: model) {
                    let local = MergePolicy.Local(
                        model: model.name, id: object.id, attributes: object.attributes, records: try tx.objectSyncState(model, object.id))
                    if !keeping.contains(Array(object.id.utf8)) {
                        if MergePolicy.isLocalOnly(local.records) { continue }
                        let outcome = MergePolicy.delete(local: local)
                        if outcome.rule == .deletedWhileChanged { deletedWhileChanged.append(object.id) }
                        try Self.apply(outcome, local, to: model, tx: tx, notification: &notification)
                    } else if let sent = attributes[object.id],
                        object.attributes.keys.contains(where: { !sent.contains($0) && modelConfiguration.syncs($0) })
                    {
                        try Self.apply(
                            MergePolicy.keepOnly(sent, local: local, configuration: modelConfiguration), local, to: model, tx: tx,
                            notification: &notification)
                    }
                }
                return (notification, deletedWhileChanged)
            }
        }
        if !notification.isEmpty { emit(.objects(notification)) }
        noteDeletedWhileChanged(deletedWhileChanged, of: definition.name, report: &report)
    }

    /// Counts local changes that met the server's delete among the refused ones, and says so:
    /// they are kept until resolved, so the sync is not a clean one (a black-box probe: it
    /// exited 0 with nothing said).
    func noteDeletedWhileChanged(_ ids: [String], of model: String, report: inout SyncReport) {
        guard !ids.isEmpty else { return }
        report.refused += ids.count
        let message = ids.map { "update \($0): deleted on the server while changed here (retry creates it again, rollback deletes it here)" }
        emit(.sync(SyncNotification(status: .error, model: model, errorCode: .refusedChanges, message: message.joined(separator: "; "))))
    }

    // MARK: - Applying a page

    struct PageOutcome: Sendable {
        var objects: ChangeSet
        var links: [(String, String)]
        /// Creates the page acknowledged (with a link).
        var acknowledged: Int
        /// Objects whose local change met the server's delete, kept as refused changes.
        var deletedWhileChanged: [String] = []
    }

    /// Applies one page in one batch: links (and the references to the renamed objects), errors,
    /// deletes, removals, upserts, then the cursor. Returns what it did and the new sync state.
    static func apply(
        _ page: PullPage, to model: Model, in store: Store, modelConfiguration: ModelSyncConfiguration,
        blobs: [String: [String: String]], state: ModelSyncState
    ) throws -> (PageOutcome, ModelSyncState) {
        var newState = state
        let outcome = try store.bulkUpdate { tx -> PageOutcome in
            tx.reserveCapacity(page.upserts.count + 2 * (page.deletes.count + page.links.count + page.refusals.count))
            var notification = ChangeSet(model: model.name, origin: .server)
            var links: [(String, String)] = []
            var acknowledged = 0
            for (local, server) in page.links.sorted(by: { $0.key < $1.key }) {
                if local != server, try tx.rename(model, from: local, to: server) {
                    links.append((local, server))
                    notification.renamed[local] = server
                } else if local != server, try tx.find(server, in: model) == nil, try tx.objectSyncState(model, server) == ObjectSyncState() {
                    // The server made an object of a create gone from here (an unlinked create
                    // the app deleted, its link come late): it sends this client no more of it,
                    // so the model owes a full pull, which brings it (a black-box probe: it
                    // stayed on the server only).
                    newState.fullPullPending = true
                }
                // The create is acknowledged (a link to the same id included).
                var records = try tx.objectSyncState(model, server)
                if let inFlight = records.inFlight, inFlight.kind == .create {
                    let before = records
                    records.inFlight = nil
                    try tx.setObjectSyncState(model, server, records, replacing: before)
                    acknowledged += 1
                } else if let error = records.refusal, error.kind == .create, error.code == Self.noLinkCode {
                    // A create kept as unlinked whose link came after all (a server that
                    // carries pushes out later): it is done.
                    let before = records
                    records.refusal = nil
                    try tx.setObjectSyncState(model, server, records, replacing: before)
                    acknowledged += 1
                }
            }
            // References to the renamed objects change in the same batch (or, in another
            // partition, from a record written in it).
            try tx.rewriteReferences(to: model, renames: Dictionary(links, uniquingKeysWith: { _, last in last }))
            for error in page.refusals {
                let before = try tx.objectSyncState(model, error.objectID)
                var records = before
                var stored = error
                stored.model = model.name
                // What was pushed, when the server does not echo it.
                if stored.attributes.isEmpty { stored.attributes = before.inFlight?.attributes ?? JSONObject() }
                // A refusal that says nothing of the server's copy keeps what an earlier one
                // knew: that the server deleted the object (its delete met the change here).
                if let earlier = before.refusal, earlier.kind == stored.kind, earlier.serverDeleted, stored.serverCopy == nil {
                    stored.serverDeleted = true
                }
                records.inFlight = nil
                records.refusal = stored
                try tx.setObjectSyncState(model, error.objectID, records, replacing: before)
            }
            var deletedWhileChanged: [String] = []
            for id in page.deletes {
                let local = MergePolicy.Local(
                    model: model.name, id: id, attributes: try tx.find(id, in: model)?.attributes, records: try tx.objectSyncState(model, id))
                let outcome = MergePolicy.delete(local: local)
                if outcome.rule == .deletedWhileChanged { deletedWhileChanged.append(id) }
                try apply(outcome, local, to: model, tx: tx, notification: &notification)
            }
            for (id, names) in page.removals.sorted(by: { $0.key < $1.key }) {
                // An object gone here may be one deleted here: its delete's record says.
                let object = try tx.find(id, in: model)
                let records = try tx.objectSyncState(model, id)
                guard object != nil || MergePolicy.lastAttributes(deletedIn: records) != nil else { continue }
                let local = MergePolicy.Local(model: model.name, id: id, attributes: object?.attributes, records: records)
                try apply(
                    MergePolicy.remove(names, local: local, configuration: modelConfiguration), local, to: model, tx: tx, notification: &notification)
            }
            try applyUpserts(page.upserts, to: model, modelConfiguration: modelConfiguration, blobs: blobs, tx: tx, notification: &notification)
            newState.cursor = page.nextCursor
            if let metadata = page.metadata { newState.metadata = metadata }
            if page.done {
                newState.initialSyncComplete = true
                newState.lastSync = Self.now()
            }
            try tx.setSyncState(model, newState)
            return PageOutcome(objects: notification, links: links, acknowledged: acknowledged, deletedWhileChanged: deletedWhileChanged)
        }
        return (outcome, newState)
    }

    /// Upserts pulled objects, as ``MergePolicy/upsert(_:local:configuration:blobs:)`` says.
    static func applyUpserts(
        _ objects: [ServerObject], to model: Model, modelConfiguration: ModelSyncConfiguration, blobs: [String: [String: String]],
        tx: Transaction, notification: inout ChangeSet
    ) throws {
        // With no local change anywhere in the model, no object needs protecting (the usual case
        // of a first sync): its records are not read (a version the page brings overwrites the
        // stored one).
        let quiet = try !tx.hasLocalChanges(model)
        // And when every attribute travels, a whole object without blobs is simply taken: what
        // the policy answers for it is known (checked against the policy in debug builds).
        let taken = quiet && modelConfiguration.everyAttributeTravels
        // A page in id order (an in-memory or RhoConnect page; a push's echo) is read in key
        // order; another order reads each object on its own.
        let inOrder = zip(objects, objects.dropFirst()).allSatisfy { $0.id.utf8.lexicographicallyPrecedes($1.id.utf8) }
        try tx.readingInOrder(reads: objects.count, when: inOrder) {
            try applyUpserts(
                objects, to: model, modelConfiguration: modelConfiguration, blobs: blobs, quiet: quiet, taken: taken, tx: tx,
                notification: &notification)
        }
    }

    private static func applyUpserts(
        _ objects: [ServerObject], to model: Model, modelConfiguration: ModelSyncConfiguration, blobs: [String: [String: String]], quiet: Bool,
        taken: Bool, tx: Transaction, notification: inout ChangeSet
    ) throws {
        for var object in objects {
            let old = try tx.find(object.id, in: model)?.attributes
            // A value this device wrote, sent back as text, keeps its type here (a black-box
            // probe: the echo of an update made its numbers strings).
            if object.valuesAsText, let old { object = object.keepingTypes(of: old) }
            let objectBlobs = blobs[object.id] ?? [:]
            if taken && object.isWhole && objectBlobs.isEmpty {
                assert(
                    MergePolicy.upsert(
                        object, local: MergePolicy.Local(model: model.name, id: object.id, attributes: old), configuration: modelConfiguration)
                        == MergePolicy.Outcome(
                            rule: .taken, write: .replace(modelConfiguration.syncing(object.attributes)),
                            records: ObjectSyncState(version: object.version)))
                // The version lands in the object's own record (none given: it keeps its own).
                let version: JSONValue?? = object.version.map(Optional.some)
                notification.note(try tx.writeServerObject(model, object.id, object.attributes, replacing: old, version: version), object.id)
                continue
            }
            let records = quiet ? ObjectSyncState() : try tx.objectSyncState(model, object.id)
            let local = MergePolicy.Local(model: model.name, id: object.id, attributes: old, records: records)
            let outcome = MergePolicy.upsert(object, local: local, configuration: modelConfiguration, blobs: objectBlobs)
            try apply(outcome, local, to: model, tx: tx, notification: &notification)
        }
    }

    /// Writes what the merge policy decided for `local`: the object (with its new version, in the
    /// same record), then its other sync records when they changed.
    static func apply(
        _ outcome: MergePolicy.Outcome, _ local: MergePolicy.Local, to model: Model, tx: Transaction, notification: inout ChangeSet
    ) throws {
        var written = local.records
        let version: JSONValue?? = outcome.records.version != local.records.version ? .some(outcome.records.version) : .none
        switch outcome.write {
        case .keep: break
        case .replace(let attributes):
            notification.note(try tx.writeServerObject(model, local.id, attributes, replacing: local.attributes, version: version), local.id)
            written.version = outcome.records.version
        case .delete:
            notification.note(try tx.writeServerObject(model, local.id, nil, replacing: local.attributes, version: version), local.id)
            written.version = outcome.records.version
        }
        if outcome.records != written {
            try tx.setObjectSyncState(model, local.id, outcome.records, replacing: written)
        }
    }

    /// Downloads the blob URLs of a page into the blob store: object id → attribute → reference.
    /// During a model's first sync, with ``ModelSyncConfiguration/skipBlobsOnFirstSync``, they
    /// are left as URLs. A blob the server says is gone (404, 410) is left as its URL too, with
    /// an `error` notification naming it: a file removed from the server's storage must not
    /// stop the model's pulls for good (its page would be asked again forever). So is a value
    /// no request can fetch (`mailto:…`, not a URL).
    func downloadBlobs(
        _ page: PullPage, definition: ModelDefinition, modelConfiguration: ModelSyncConfiguration, session: SyncSession, state: ModelSyncState
    ) async throws -> [String: [String: String]] {
        if modelConfiguration.skipBlobsOnFirstSync && !state.initialSyncComplete { return [:] }
        var references: [String: [String: String]] = [:]
        for object in page.upserts where !object.blobURLs.isEmpty {
            for (attribute, url) in object.blobURLs.sorted(by: { $0.key < $1.key }) {
                if let reference = try await downloadBlob(url, of: object.id, attribute, definition: definition, session: session) {
                    references[object.id, default: [:]][attribute] = reference
                }
            }
        }
        return references
    }

    /// The refusals with the blobs their server copies hold as URLs downloaded, each then its
    /// reference here, as a pulled object's is: what a rollback writes (a black-box probe: the
    /// URL was written, and the blob was gone).
    func downloadBlobs(ofCopiesIn refusals: [RefusedChange], definition: ModelDefinition, session: SyncSession) async throws -> [RefusedChange] {
        guard !definition.blobAttributes.isEmpty else { return refusals }
        var refusals = refusals
        for index in refusals.indices {
            guard var copy = refusals[index].serverCopy else { continue }
            for attribute in definition.blobAttributes {
                guard let url = copy[attribute]?.stringValue, url.hasPrefix("http://") || url.hasPrefix("https://"),
                    let reference = try await downloadBlob(url, of: refusals[index].objectID, attribute, definition: definition, session: session)
                else { continue }
                copy[attribute] = .string(reference)
            }
            refusals[index].serverCopy = copy
        }
        return refusals
    }

    /// The blob at `url` (object `id`'s `attribute`) downloaded into the store: its reference,
    /// nil (with an error line) when the server says it is gone or it cannot be fetched.
    private func downloadBlob(_ url: String, of id: String, _ attribute: String, definition: ModelDefinition, session: SyncSession) async throws
        -> String?
    {
        try checkStopped()
        let data: Data
        do {
            data = try await withRetry { try await self.backend.downloadBlob(url, session: session) }
        } catch let error as SyncError where error.code == .server && [403, 404, 410].contains(error.httpStatus) {
            // Gone, or not to be read (a file store answers 403 for a missing file): the
            // same answer again at every sync.
            let message =
                "the blob of object \(id)'s \(attribute) is not on the server, or not readable (HTTP \(error.httpStatus ?? 0)): kept as its URL"
            emit(.sync(SyncNotification(status: .error, model: definition.name, errorCode: .server, message: message)))
            return nil
        } catch let error as SyncError where error.code == .protocolViolation {
            // A value no request can fetch (not an http URL): as permanent as a 404.
            let message = "the blob of object \(id)'s \(attribute) cannot be downloaded (\(error.message)): kept as its value"
            emit(.sync(SyncNotification(status: .error, model: definition.name, errorCode: .protocolViolation, message: message)))
            return nil
        }
        return try await onStorageQueue { store in try store.blobs.put(data) }
    }

    static func now() -> String { ISO8601DateFormatter().string(from: Date()) }
}

extension ChangeSet {
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

/// Stops a pull whose server pages in a circle: `Next-Page` links back to an earlier page, a
/// token handed out again and again, a keyset that does not advance. Without it such a server
/// keeps a sync busy forever, and a bulk snapshot, which gathers its pages before applying
/// them, grows without end. A position given back once or twice is tolerated (a replayed
/// answer is re-applied harmlessly, as the conformance kit's repeated page shows); the same
/// position a fourth time is a loop. So is the same content under ever new positions, a token
/// made afresh for each answer, the fifth time: the same number of objects and deletes, the
/// same first and last ones, at the same versions.
struct PageLoopGuard {
    static let maximumRepeats = 3
    let model: String
    private var given: [JSONValue: Int] = [:]
    private var contents: [Int: Int] = [:]
    private var pages = 0

    init(model: String) { self.model = model }

    mutating func check(_ page: PullPage, after cursor: JSONValue?) throws(SyncError) {
        pages += 1
        guard !page.done, !page.schemaChanged else { return }
        if !page.upserts.isEmpty || !page.deletes.isEmpty {
            // The page's first and last objects (ids and versions) and its counts: a few hashes
            // a page, whatever its size (hashing every id cost the echo pull 3 %).
            var hasher = Hasher()
            for object in [page.upserts.first, page.upserts.last] {
                hasher.combine(object?.id)
                hasher.combine(object?.version)
            }
            hasher.combine(page.upserts.count)
            hasher.combine(page.deletes.first)
            hasher.combine(page.deletes.last)
            hasher.combine(page.deletes.count)
            let content = hasher.finalize()
            contents[content, default: 0] += 1
            guard contents[content]! <= Self.maximumRepeats + 1 else {
                throw SyncError(
                    .protocolViolation,
                    "the server's pages of \(model) loop: after \(pages) pages it sent the same objects \(Self.maximumRepeats + 2) times under new positions; the sync stops there"
                )
            }
        }
        if given.isEmpty { given[cursor ?? .null] = 1 }
        let next = page.nextCursor ?? .null
        given[next, default: 0] += 1
        guard given[next]! <= Self.maximumRepeats else {
            throw SyncError(
                .protocolViolation,
                "the server's pages of \(model) loop: after \(pages) pages it gave the same position \(Self.maximumRepeats + 1) times (\(String(next.description.prefix(120)))); the sync stops there"
            )
        }
    }
}
