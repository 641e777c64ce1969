public import Satchel

extension SyncEngine {
    // MARK: - Search

    /// The server's objects of model `name` that match `condition`, read a page at a time until
    /// the server is done. The adapter sends what its query language can say of the condition
    /// (Parse's `where`, SOQL, Kinto's filters, RhoConnect's search parameters); the answer is
    /// then held to the whole condition under Satchel's semantics, so the objects returned are
    /// exactly the server's objects that match, whatever the server could express. With
    /// `storing`, each page is stored as a pulled page would be (local unacknowledged changes
    /// win), in one batch; the model's cursor does not move.
    ///
    /// - Returns: the matching objects as the server holds them, in the server's order.
    /// - Throws: ``SyncError`` `.notSupported` when the server has no search, or the model is
    ///   unknown.
    ///
    /// A model the store does not have is asked for as a property bag, when nothing is stored.
    public func search(_ name: String, where condition: Condition, storing: Bool = false) async throws -> [Object] {
        let definition: ModelDefinition
        let model: Model?
        let modelConfiguration: ModelSyncConfiguration
        if store.existingModel(name) == nil && !storing {
            (definition, model, modelConfiguration) = (ModelDefinition(name: name), nil, ModelSyncConfiguration())
        } else {
            (definition, model, modelConfiguration) = try syncedModel(name)
        }
        let session = try await preparedSession()
        let state = try model.map { model in try storage { try store.read { try $0.syncState(model) } } }
        var found: [Object] = []
        var cursor: JSONValue?
        var pages = PageLoopGuard(model: name)
        while true {
            try checkStopped()
            let request = pullRequest(definition, cursor: cursor, session: session, modelConfiguration: modelConfiguration, metadata: state?.metadata)
            var page = try await withRetry { try await self.backend.search(request, matching: condition) }
            try pages.check(page, after: cursor)
            page.upserts = try page.upserts.filter { try condition.matches(Self.object($0), model: name) }
            found += page.upserts.map(Self.object)
            if storing, let model, let state, !page.upserts.isEmpty {
                // Read as another client, what is stored here is in none of this device's later
                // pulls (a black-box probe: RhoConnect's deletes never reached it): the model
                // owes a full pull, recorded in the same batch.
                try await store(
                    page, of: model, definition: definition, modelConfiguration: modelConfiguration, session: session, state: state,
                    owingFullPull: backend.capabilities.searchesAsAnotherClient)
            }
            if page.done { break }
            cursor = page.nextCursor
        }
        return found
    }

    /// Asks the server's own search for what `query`'s parameters find (their meaning is the
    /// server's: RhoConnect's `search[name]=value`, given to the source adapter) and stores it,
    /// in one batch, as a pulled page would be (local unacknowledged changes win); the model's
    /// cursor does not move. RhoConnect's `search`. For Satchel's own conditions, on any server
    /// that searches, see ``search(_:where:storing:)``.
    ///
    /// - Returns: the ids found.
    /// - Throws: ``SyncError`` `.notSupported` when the server has no search of its own.
    @discardableResult
    public func search(_ name: String, query: JSONObject) async throws -> [String] {
        let (definition, model, modelConfiguration) = try syncedModel(name)
        let session = try await preparedSession()
        let request = pullRequest(definition, cursor: nil, session: session, modelConfiguration: modelConfiguration)
        let page = try await withRetry { try await self.backend.search(request, query: query) }
        let state = try storage { try store.read { try $0.syncState(model) } }
        try await store(page, of: model, definition: definition, modelConfiguration: modelConfiguration, session: session, state: state)
        return page.upserts.map(\.id)
    }

    /// Stores a search's page in one batch, as a pulled page's objects are (blobs downloaded
    /// first); the cursor stays. An object with a local change the server has not acknowledged
    /// (pending, in flight, refused) is left as it is, its base version too: a search is no
    /// sync, and taking the server's version here would let the next push pass over a change
    /// the server made meanwhile (Kinto's `If-Match` would match) instead of meeting it.
    private func store(
        _ page: PullPage, of model: Model, definition: ModelDefinition, modelConfiguration: ModelSyncConfiguration, session: SyncSession,
        state: ModelSyncState, owingFullPull: Bool = false
    ) async throws {
        let blobs = try await downloadBlobs(page, definition: definition, modelConfiguration: modelConfiguration, session: session, state: state)
        let notification = try storage {
            do {
                return try storeFound(page, of: model, modelConfiguration: modelConfiguration, blobs: blobs, owingFullPull: owingFullPull)
            } catch {
                throw Self.refusedByTheStore(error, model: model.name, during: "search")
            }
        }
        if !notification.isEmpty { emit(.objects(notification)) }
    }

    /// ``store(_:of:definition:modelConfiguration:session:state:owingFullPull:)``'s batch.
    private func storeFound(
        _ page: PullPage, of model: Model, modelConfiguration: ModelSyncConfiguration, blobs: [String: [String: String]], owingFullPull: Bool
    ) throws -> ChangeSet {
        try store.bulkUpdate { tx -> ChangeSet in
            var notification = ChangeSet(model: model.name, origin: .server)
            let quiet = try !tx.hasLocalChanges(model)
            let upserts = try page.upserts.filter { object in
                if quiet { return true }
                let records = try tx.objectSyncState(model, object.id)
                return records.pending == nil && records.inFlight == nil && records.refusal == nil
            }
            try Self.applyUpserts(
                upserts, to: model, modelConfiguration: modelConfiguration, blobs: blobs, tx: tx, notification: &notification)
            if owingFullPull { try tx.owesFullPull(model, true) }
            return notification
        }
    }

    /// A server object as an object: its attributes without nulls.
    static func object(_ server: ServerObject) -> Object {
        Object(id: server.id, attributes: JSONObject(server.attributes.filter { !$0.value.isNull }.map { ($0.key, $0.value) }))
    }

    /// The definition, handle and configuration of a model that syncs.
    func syncedModel(_ name: String) throws -> (ModelDefinition, Model, ModelSyncConfiguration) {
        guard let definition = store.models.first(where: { $0.name == name }) else {
            throw SyncError(.notSupported, "no model named '\(name)' (the store has \(store.models.map(\.name).sorted().joined(separator: ", ")))")
        }
        guard definition.syncType != .none, definition.partition != .local else {
            throw SyncError(.notSupported, "model '\(name)' does not sync (local, or sync type none)")
        }
        return (definition, try storage { try store.model(name) }, try configurationForBackend(of: name))
    }

    // MARK: - Verify

    /// Compares model `name` in the store with the server's copy, changing neither: the drift
    /// check. Every object the server holds (``SyncBackend/serverObjects(_:)``) is set against
    /// the store's, attribute by attribute — the attributes that travel (device-only, ignored
    /// and unlisted ones aside; blob attributes by presence, since here they hold the bytes'
    /// reference and there a URL). Local changes the server has not confirmed (pending, in
    /// flight, refused) account for the differences they make: an object created here and not
    /// yet there, deleted here and still there, or an attribute changed here is not drift.
    /// With a fetch limit, objects only there are not drift (they were never fetched).
    public func verify(_ name: String) async throws -> DriftReport {
        let (definition, model, modelConfiguration) = try syncedModel(name)
        let session = try await preparedSession()
        let state = try storage { try store.read { try $0.syncState(model) } }
        // The server's objects.
        // Keyed by the ids' UTF-8 bytes: ids that are canonically equivalent are two objects.
        var there: [[UInt8]: JSONObject] = [:]
        var cursor: JSONValue?
        var pages = PageLoopGuard(model: name)
        while true {
            try checkStopped()
            let request = pullRequest(definition, cursor: cursor, session: session, modelConfiguration: modelConfiguration, metadata: state.metadata)
            let page = try await withRetry { try await self.backend.serverObjects(request) }
            try pages.check(page, after: cursor)
            for object in page.upserts {
                var attributes = object.isWhole ? JSONObject() : there[Array(object.id.utf8)] ?? JSONObject()
                for (attribute, value) in object.attributes { attributes[attribute] = value.isNull ? nil : value }
                there[Array(object.id.utf8)] = attributes
            }
            if page.done { break }
            cursor = page.nextCursor
        }
        // The store's, with the changes the server has not confirmed, from one snapshot.
        let (here, unconfirmed) = try storage {
            try store.read { snapshot -> ([[UInt8]: JSONObject], [[UInt8]: ObjectSyncState]) in
                var objects: [[UInt8]: JSONObject] = [:]
                for object in try snapshot.findAll(in: model) { objects[Array(object.id.utf8)] = object.attributes }
                let states = try snapshot.objectSyncStates(of: model).map { (Array($0.0.utf8), $0.1) }
                return (objects, Dictionary(states, uniquingKeysWith: { _, last in last }))
            }
        }
        var report = DriftReport(model: name)
        let blobs = Set(definition.blobAttributes)
        for key in Set(here.keys).union(there.keys).sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            report.objects += 1
            let id = String(decoding: key, as: UTF8.self)
            let local = here[key]
            let remote = there[key]
            let change = unconfirmed[key].flatMap(Self.unconfirmedChange)
            switch (local, remote) {
            case (let local?, nil):
                // A create not yet confirmed, or a change refused because the server deleted the
                // object (kept until the app resolves it), is a local change, not drift.
                if change?.kind == .create || unconfirmed[key]?.refusal?.serverDeleted == true {
                    report.unconfirmed += 1
                } else {
                    report.drifts.append(.init(id: id, kind: .onlyHere, here: local))
                }
            case (nil, let remote?):
                if change?.kind == .delete {
                    report.unconfirmed += 1
                } else if modelConfiguration.fetchLimit == nil {
                    report.drifts.append(.init(id: id, kind: .onlyThere, there: remote))
                }
            case (let local?, let remote?):
                // A create not yet confirmed is all local change; an update, the attributes it changed.
                let changed: Set<[UInt8]>? = change.map { $0.kind == .update ? Set($0.attributes.keys.map { Array($0.utf8) }) : [] }
                var differing: [String: DriftReport.Values] = [:]
                for name in Set(local.keys.map { Array($0.utf8) }).union(remote.keys.map { Array($0.utf8) }) {
                    let attribute = String(decoding: name, as: UTF8.self)
                    guard modelConfiguration.syncs(attribute) else { continue }
                    let a = local[attribute]
                    let b = remote[attribute]
                    let same = blobs.contains(attribute) ? (a == nil) == (b == nil) : a == b || a.map(backend.serverForm) == b.map(backend.serverForm)
                    if same { continue }
                    if let changed, change?.kind != .update || changed.contains(name) { continue }
                    differing[attribute] = DriftReport.Values(here: a, there: b)
                }
                if change != nil { report.unconfirmed += 1 }
                if !differing.isEmpty { report.drifts.append(.init(id: id, kind: .differs, attributes: differing)) }
            case (nil, nil):
                break
            }
        }
        return report
    }

    /// The local change of an object the server has not confirmed: pending, in flight or
    /// refused (the latest one, which says what the object's state here is).
    static func unconfirmedChange(_ records: ObjectSyncState) -> (kind: PendingChange.Kind, attributes: JSONObject)? {
        var attributes = JSONObject()
        var kind: PendingChange.Kind?
        for (changeKind, changed) in [
            records.refusal.map { ($0.kind, $0.attributes) }, records.inFlight.map { ($0.kind, $0.attributes) },
            records.pending.map { ($0.kind, $0.attributes) },
        ].compactMap({ $0 }) {
            for (name, value) in changed { attributes[name] = value }
            // A create stays a create until the server has the object; a delete is the last word.
            if kind != .create || changeKind == .delete { kind = changeKind }
        }
        return kind.map { ($0, attributes) }
    }
}

/// How the store and the server differ for one model: ``SyncEngine/verify(_:)``.
public struct DriftReport: Sendable, Hashable {
    /// A value here and there (nil: absent).
    public struct Values: Sendable, Hashable {
        public var here: JSONValue?
        public var there: JSONValue?

        public init(here: JSONValue?, there: JSONValue?) {
            self.here = here
            self.there = there
        }
    }

    /// How one object differs.
    public enum Kind: String, Sendable, Hashable {
        /// The store has it, the server does not (and no local create explains it).
        case onlyHere
        /// The server has it, the store does not (and no local delete explains it).
        case onlyThere
        /// Both have it, with different values of attributes no local change explains.
        case differs
    }

    /// One object that differs.
    public struct Drift: Sendable, Hashable {
        public var id: String
        public var kind: Kind
        /// The object here (``Kind/onlyHere``).
        public var here: JSONObject?
        /// The object there (``Kind/onlyThere``).
        public var there: JSONObject?
        /// The attributes whose values differ (``Kind/differs``).
        public var attributes: [String: Values]

        init(id: String, kind: Kind, here: JSONObject? = nil, there: JSONObject? = nil, attributes: [String: Values] = [:]) {
            self.id = id
            self.kind = kind
            self.here = here
            self.there = there
            self.attributes = attributes
        }

        /// One line of JSON as `satchel verify` prints it, keys sorted.
        public var json: JSONObject {
            var object: JSONObject = ["object": .string(id), "drift": .string(kind.rawValue)]
            if let here { object["here"] = .object(here) }
            if let there { object["there"] = .object(there) }
            if !attributes.isEmpty {
                object["attributes"] = .object(
                    JSONObject(
                        attributes.map { name, values in
                            var pair = JSONObject()
                            if let here = values.here { pair["here"] = here }
                            if let there = values.there { pair["there"] = there }
                            return (name, JSONValue.object(pair))
                        }))
            }
            return object
        }
    }

    public var model: String
    /// The objects that differ, by id.
    public var drifts: [Drift] = []
    /// Objects compared: every id of the store or the server.
    public var objects = 0
    /// Objects whose differences local changes the server has not confirmed account for.
    public var unconfirmed = 0

    public init(model: String) { self.model = model }

    /// Whether the store and the server agree (local changes aside).
    public var agrees: Bool { drifts.isEmpty }

    /// The summary line `satchel verify` ends with.
    public var summary: JSONObject {
        func count(_ kind: Kind) -> JSONValue { .int(Int64(drifts.count { $0.kind == kind })) }
        return [
            "model": .string(model), "agree": .bool(agrees), "objects": .int(Int64(objects)), "onlyHere": count(.onlyHere),
            "onlyThere": count(.onlyThere), "differing": count(.differs), "unconfirmed": .int(Int64(unconfirmed)),
        ]
    }
}
