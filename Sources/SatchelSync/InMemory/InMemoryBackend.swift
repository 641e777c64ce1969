public import Foundation
public import Satchel

/// A sync server held in memory: the reference ``SyncBackend`` for adapter authors, and a
/// server for an app's own tests and previews.
///
/// It keeps a change feed like Kinto's: every write moves a clock, an object's version is the
/// clock of its last change, and a pull returns the objects (and tombstones) changed after its
/// cursor, oldest first, a page at a time. With ``Configuration/linksViaPull`` it answers pushes the
/// way RhoConnect does: creates get their server ids, and refused records their errors, in the
/// next pull, re-sent until the client acknowledges the page by coming back with its cursor.
///
/// ```swift
/// let server = InMemoryBackend()
/// await server.put("Product", ["name": "Anvil"], id: "p1")
/// let engine = SyncEngine(store: store, backend: server)
/// try await engine.logIn(Credentials(user: "ann", password: "x"))
/// try await engine.sync()
/// ```
///
/// The server itself can refuse records by a rule (``reject(_:)``), expire its sessions and
/// forget its clients. Faults of the connection — failed calls, lost answers, repeated pages —
/// are injected around it, as around any adapter, by `FaultyBackend` of the
/// `SatchelSyncTesting` library.
public actor InMemoryBackend: SyncBackend {
    /// How the server behaves.
    public struct Configuration: Sendable {
        /// Creates get a new server id (`s1`, `s2`…); otherwise the client's id is kept (Kinto), and a
        /// create of an id another client's object holds is refused with its copy (Kinto's 412).
        public var serverAssignsIDs = true
        /// Push results come in the next pull (RhoConnect): creates are answered
        /// ``PushOutcome/awaitingLink`` and linked there; refused records arrive as page errors.
        /// As RhoConnect, the server then keeps no record of the ids it linked: a create sent
        /// twice is made twice (``SyncCapabilities/pushResultsViaPull``).
        public var linksViaPull = false
        /// An update or delete made from an older version than the server's is refused with the
        /// server's copy (Kinto's 412).
        public var checkVersions = true
        /// Pages carry whole objects; otherwise, after the first pull, only the attributes changed
        /// since the cursor, with removed attributes listed (RhoConnect's `insert` and `delete`).
        public var wholeObjects = true
        /// How deletions reach clients: tombstones in pages, or only by listing ids (Parse).
        public var deletions: SyncCapabilities.Deletions = .inPages
        /// At most this many changes per push.
        public var maxPushBatch: Int?
        /// User → password; nil accepts any credentials.
        public var users: [String: String]?

        public init() {}
    }

    /// A rule by which the server refuses pushed changes.
    public struct Rejection: Sendable, Hashable {
        /// The model it applies to (nil: all).
        public var model: String?
        /// The kinds of change it refuses.
        public var kinds: Set<PendingChange.Kind>
        /// The object ids it refuses (nil: any).
        public var ids: Set<String>?
        /// Attribute values a change must carry to be refused (empty: any change).
        public var matching: JSONObject
        public var message: String
        public var code: String?

        public init(
            model: String? = nil, kinds: Set<PendingChange.Kind> = [.create, .update, .delete], ids: Set<String>? = nil,
            matching: JSONObject = JSONObject(), message: String = "refused by the server", code: String? = "422"
        ) {
            self.model = model
            self.kinds = kinds
            self.ids = ids
            self.matching = matching
            self.message = message
            self.code = code
        }

        func refuses(_ change: OutgoingChange, of model: String) -> Bool {
            if let only = self.model, only != model { return false }
            if !kinds.contains(change.kind) { return false }
            if let ids, !ids.contains(change.objectID) { return false }
            return matching.allSatisfy { change.attributes[$0.key] == $0.value }
        }
    }

    public nonisolated let name = "memory"
    public nonisolated let capabilities: SyncCapabilities
    public nonisolated let configuration: Configuration

    var state: ServerState {
        didSet { revision &+= 1 }
    }
    /// A number that changes whenever what ``savedState()`` returns does (a login, a new
    /// client, a push, an outcome delivered…): a server kept on disk writes itself again when it
    /// moved.
    public private(set) var revision = 0
    private var rejections: [Rejection] = []

    public init(configuration: Configuration = Configuration()) {
        self.init(configuration: configuration, state: ServerState())
    }

    private init(configuration: Configuration, state: ServerState) {
        self.configuration = configuration
        capabilities = SyncCapabilities(
            deletions: configuration.deletions, bulkSnapshot: true, search: true, maxPushBatch: configuration.maxPushBatch,
            pushResultsViaPull: configuration.linksViaPull)
        self.state = state
    }

    /// A server with the data ``savedState()`` returned.
    ///
    /// - Throws: ``SyncError`` `.protocolViolation` when `saved` is not such data.
    public init(configuration: Configuration = Configuration(), savedState saved: JSONObject) throws {
        self.init(configuration: configuration, state: try ServerState(json: saved))
    }

    /// Everything the server holds, as JSON (for ``init(configuration:savedState:)``).
    public func savedState() -> JSONObject { state.json }

    /// The saved state in `bytes` (the JSON text of ``savedState()``). An object in it nests as
    /// deep as a store takes (``Satchel/JSONValue/maxDepth``) within the levels the state puts
    /// around its attributes (six: the state, `outcomes`, the client, the model's list, the
    /// outcome and its error hold a refusal's server copy), so the text is read with those
    /// levels allowed too (a black-box probe: the deepest object made a file no sync could read).
    package static func savedState(parsing bytes: [UInt8]) throws -> JSONObject {
        try JSONObject(parsing: bytes, maximumDepth: JSONValue.maxDepth + 6)
    }

    // MARK: - Rules and events

    /// Refuses the pushed changes that `rule` matches, from now on.
    public func reject(_ rule: Rejection) { rejections.append(rule) }

    /// Stops refusing changes.
    public func clearRejections() { rejections.removeAll() }

    /// Forgets every session: calls get 401 until the client logs in again.
    public func expireSessions() { state.sessions.removeAll() }

    /// Forgets every client: calls get "unknown client" until the client resets.
    public func forgetClients() {
        state.clients.removeAll()
        state.outcomes.removeAll()
    }

    // MARK: - The server's side

    /// Writes an object on the server, as another client would (whole; nulls are dropped, no
    /// attributes deletes). Returns its id (generated when nil).
    @discardableResult
    public func put(_ model: String, _ attributes: JSONObject, id: String? = nil) -> String {
        let id = id ?? state.newID("s")
        state.write(model, id, attributes)
        return id
    }

    /// Changes attributes of an object on the server (null removes one).
    public func update(_ model: String, _ id: String, _ changes: JSONObject) { state.merge(model, id, changes) }

    /// Deletes an object on the server.
    public func delete(_ model: String, _ id: String) { state.write(model, id, nil) }

    /// The server's objects of `model`, by id.
    public func objects(_ model: String) -> [String: JSONObject] { state.collections[model]?.objects.mapValues(\.attributes) ?? [:] }

    /// The server's object `id` of `model`.
    public func object(_ model: String, _ id: String) -> JSONObject? { state.collections[model]?.objects[id]?.attributes }

    /// The ids of the clients the server knows (registered, not reset or forgotten), sorted.
    public var clientIDs: [String] { state.clients.sorted() }

    /// The bytes of a blob the server holds.
    public func blob(at url: String) -> Data? { state.blobs[url] }

    /// Stores bytes on the server; returns their URL (for blob attributes).
    public func putBlob(_ data: Data) -> String {
        let url = "mem://blobs/\(state.newID("b"))"
        state.blobs[url] = data
        return url
    }

    // MARK: - Session

    public func logIn(_ credentials: Credentials) async throws -> SyncSession {
        if let users = configuration.users, users[credentials.user] != credentials.password {
            throw SyncError(.unauthorized, "wrong user name or password", httpStatus: 401)
        }
        let token = state.newID("t")
        state.sessions[token] = credentials.user
        return SyncSession(user: credentials.user, data: ["token": .string(token)])
    }

    public func logOut(_ session: SyncSession) async throws {
        if let token = session.data["token"]?.stringValue { state.sessions[token] = nil }
    }

    public func prepare(_ session: SyncSession) async throws -> SyncSession {
        try authenticate(session)
        var session = session
        if let client = session.clientID {
            guard state.clients.contains(client) else { throw SyncError(.unknownClient, "unknown client '\(client)'", httpStatus: 404) }
        } else {
            let client = state.newID("c")
            state.clients.insert(client)
            session.clientID = client
        }
        return session
    }

    public func resetClient(_ session: SyncSession) async throws -> SyncSession {
        try authenticate(session)
        var session = session
        if let client = session.clientID {
            state.clients.remove(client)
            state.outcomes[client] = nil
        }
        session.clientID = nil
        return session
    }

    private func authenticate(_ session: SyncSession) throws {
        guard let token = session.data["token"]?.stringValue, state.sessions[token] == session.user else {
            throw SyncError(.unauthorized, "the session expired", httpStatus: 401)
        }
    }

    /// The session's client id, checked.
    private func client(_ session: SyncSession) throws -> String {
        try authenticate(session)
        guard let client = session.clientID else {
            throw SyncError(.protocolViolation, "the session has no client id (prepare was not called)", httpStatus: 400)
        }
        guard state.clients.contains(client) else { throw SyncError(.unknownClient, "unknown client '\(client)'", httpStatus: 404) }
        return client
    }

    // MARK: - Pull

    /// Where a pull stands: after a clock reading, or `offset` objects into an ordered listing
    /// taken at clock `at`; `ack` is the page whose outcomes the client holds.
    private struct Cursor {
        var since: Int64?
        var offset: Int?
        var at: Int64?
        var ack: Int64?
        /// Within a pull that started from no cursor: objects go whole until it is done (as a
        /// RhoConnect server sends a new client everything it has of each object).
        var fresh = false

        init(since: Int64? = nil, offset: Int? = nil, at: Int64? = nil, ack: Int64? = nil, fresh: Bool = false) {
            self.since = since
            self.offset = offset
            self.at = at
            self.ack = ack
            self.fresh = fresh
        }

        init(_ value: JSONValue?) throws {
            guard let value else { return }
            guard case .object(let object) = value else { throw SyncError(.server, "bad cursor \(value)", httpStatus: 400) }
            since = object["since"]?.intValue
            offset = object["offset"]?.intValue.map(Int.init)
            at = object["at"]?.intValue
            ack = object["ack"]?.intValue
            fresh = object["fresh"]?.boolValue ?? false
            if since == nil && (offset == nil || at == nil) { throw SyncError(.server, "bad cursor \(value)", httpStatus: 400) }
        }

        var json: JSONValue {
            var object = JSONObject()
            if let since { object["since"] = .int(since) }
            if let offset { object["offset"] = .int(Int64(offset)) }
            if let at { object["at"] = .int(at) }
            if let ack { object["ack"] = .int(ack) }
            if fresh { object["fresh"] = true }
            return .object(object)
        }
    }

    public func pull(_ request: PullRequest) async throws -> PullPage {
        let client = try client(request.session)
        let cursor = try Cursor(request.cursor)
        var page: PullPage
        var next: Cursor
        if let since = cursor.since {
            (page, next) = changes(request, since: since, fresh: cursor.fresh)
        } else if cursor.offset != nil || request.configuration.fetchLimit != nil || !request.configuration.fetchOrder.isEmpty {
            (page, next) = listing(request, cursor: cursor)
        } else {
            (page, next) = changes(request, since: nil)
        }
        next.ack = deliverOutcomes(to: client, model: request.model.name, acknowledging: cursor.ack, into: &page)
        page.nextCursor = next.json
        return page
    }

    /// The objects and tombstones changed after `since` (everything when nil), oldest first.
    private func changes(_ request: PullRequest, since: Int64?, fresh: Bool = false) -> (PullPage, Cursor) {
        let collection = state.collections[request.model.name] ?? ServerState.Collection()
        let filter = request.configuration.serverFilter
        let size = max(1, request.pageSize)
        var page = PullPage(
            totalCount: filter == nil ? collection.objects.count : collection.objects.values.count { Self.matches($0.attributes, filter) })
        var index = collection.feedIndex(after: since ?? .min)
        var reached = since ?? 0
        var taken = 0
        while index < collection.feed.count {
            guard !collection.feed[index].isStale else {
                index += 1
                continue
            }
            if taken == size { break }
            let item = collection.feed[index]
            index += 1
            reached = item.clock
            guard let entry = item.entry, Self.matches(entry.attributes, filter) else {
                // Deleted, or no longer within the client's filter: news only to a client that
                // may hold the object, and only where deletions travel in pages.
                if since != nil && configuration.deletions == .inPages {
                    page.deletes.append(item.id)
                    taken += 1
                }
                continue
            }
            taken += 1
            if configuration.wholeObjects || since == nil || fresh {
                page.upserts.append(serverObject(item.id, entry, request: request))
            } else {
                var partial = serverObject(item.id, entry, request: request, changedAfter: since)
                partial.isWhole = false
                page.upserts.append(partial)
                let removed = entry.removedAt.filter { $0.value > since! }.keys.sorted()
                if !removed.isEmpty { page.removals[item.id] = removed }
            }
        }
        page.done = index == collection.feed.count
        return (page, Cursor(since: page.done ? state.clock : reached, fresh: !page.done && (since == nil || fresh)))
    }

    /// The objects in the model's fetch order, up to its fetch limit, a page from `cursor.offset`.
    private func listing(_ request: PullRequest, cursor: Cursor) -> (PullPage, Cursor) {
        let at = cursor.at ?? state.clock
        var objects = ordered(request)
        if let limit = request.configuration.fetchLimit { objects = Array(objects.prefix(max(0, limit))) }
        let offset = min(cursor.offset ?? 0, objects.count)
        let end = min(offset + max(1, request.pageSize), objects.count)
        var page = PullPage(upserts: objects[offset..<end].map { serverObject($0.id, $0.entry, request: request) }, totalCount: objects.count)
        page.done = end == objects.count
        return (page, page.done ? Cursor(since: at) : Cursor(offset: end, at: at))
    }

    /// The live objects of the model within its server filter, in its fetch order (ordered as
    /// `find` orders), then by id.
    private func ordered(_ request: PullRequest) -> [(id: String, entry: ServerState.Entry)] {
        let collection = state.collections[request.model.name]?.objects ?? [:]
        let objects = collection.filter { Self.matches($0.value.attributes, request.configuration.serverFilter) }
            .map { Object(id: $0.key, attributes: $0.value.attributes) }
        return request.configuration.fetchOrder.sorted(objects).map { (id: $0.id, entry: collection[$0.id]!) }
    }

    private func serverObject(_ id: String, _ entry: ServerState.Entry, request: PullRequest, changedAfter: Int64? = nil) -> ServerObject {
        var attributes = entry.attributes
        if let changedAfter { attributes = attributes.filter { name, _ in entry.setTime(name) > changedAfter } }
        if let only = request.configuration.onlyAttributes { attributes = attributes.filter { name, _ in only.contains(name) } }
        for name in request.configuration.ignoredAttributes { attributes[name] = nil }
        var blobURLs: [String: String] = [:]
        for name in request.model.blobAttributes {
            if let url = attributes[name]?.stringValue, url.hasPrefix("mem://") { blobURLs[name] = url }
        }
        return ServerObject(id: id, attributes: attributes, version: .int(entry.version), blobURLs: blobURLs)
    }

    static func matches(_ attributes: JSONObject, _ filter: JSONObject?) -> Bool {
        guard let filter else { return true }
        return filter.allSatisfy { attributes[$0.key] == $0.value }
    }

    /// Drops the outcomes of page `acknowledged`, puts the others in `page`; returns the number of
    /// the page that carries them (nil when none).
    private func deliverOutcomes(to client: String, model: String, acknowledging acknowledged: Int64?, into page: inout PullPage) -> Int64? {
        guard var outcomes = state.outcomes[client]?[model] else { return nil }
        if let acknowledged { outcomes.removeAll { $0.page != nil && $0.page! <= acknowledged } }
        guard !outcomes.isEmpty else {
            state.outcomes[client]?[model] = nil
            return nil
        }
        let number = state.tick()
        for index in outcomes.indices {
            outcomes[index].page = number
            if let link = outcomes[index].link { page.links[link.local] = link.server }
            if let error = outcomes[index].error { page.refusals.append(error) }
        }
        state.outcomes[client]?[model] = outcomes
        return number
    }

    // MARK: - Push

    public func push(_ request: PushRequest) async throws -> [PushResult] {
        let client = try client(request.session)
        let model = request.model.name
        var results: [PushResult] = []
        for change in request.changes {
            var outcome = apply(change, of: request.model, client: client)
            if configuration.linksViaPull {
                // RhoConnect: the answer is "received"; what became of the change comes in a pull
                // (a conflict as an error: the pull has no version for it).
                if case .conflict(let message, let code, let serverCopy, _) = outcome {
                    outcome = .refused(message: message, code: code, serverCopy: serverCopy)
                }
                switch outcome {
                case .accepted(let serverID, _) where change.kind == .create:
                    state.outcomes[client, default: [:]][model, default: []].append(
                        ServerState.Outcome(link: (change.objectID, serverID ?? change.objectID)))
                    outcome = .awaitingLink
                case .refused(let message, let code, let serverCopy):
                    state.outcomes[client, default: [:]][model, default: []].append(
                        ServerState.Outcome(
                            error: RefusedChange(
                                model: model, objectID: change.objectID, kind: change.kind, message: message, code: code,
                                attributes: change.attributes, serverCopy: serverCopy)))
                    outcome = change.kind == .create ? .awaitingLink : .accepted()
                default:
                    break
                }
            }
            results.append(PushResult(objectID: change.objectID, outcome: outcome))
        }
        return results
    }

    private func apply(_ change: OutgoingChange, of definition: ModelDefinition, client: String) -> PushOutcome {
        let model = definition.name
        let current = state.collections[model]?.objects[change.objectID]
        if let rule = rejections.first(where: { $0.refuses(change, of: model) }) {
            // With the server's copy, as RhoConnect's `update-rollback` sends it.
            return .refused(message: rule.message, code: rule.code, serverCopy: change.kind == .create ? nil : current?.attributes)
        }
        var attributes = change.attributes
        for (name, data) in change.blobs.sorted(by: { $0.key < $1.key }) where definition.blobAttributes.contains(name) {
            attributes[name] = .string(putBlob(data))
        }
        switch change.kind {
        case .create:
            // A create sent again makes the object it made, unless the server is RhoConnect-like:
            // RhoConnect keeps no record of the temporary ids it linked.
            let key = ServerState.createKey(client: client, model: model, id: change.objectID)
            let made = configuration.linksViaPull ? nil : state.creates[key]
            if let made, !change.sentValues.isEmpty, state.collections[model]?.objects[made] == nil {
                // Sent again after its answer was lost: it made the object, which another client
                // deleted since. Made again, it would undo that delete.
                return .deletedSinceCreated
            }
            if made == nil, !configuration.serverAssignsIDs, let current {
                // The id is another's object (Kinto's `If-None-Match: *` answers 412): refused,
                // with the server's copy, not written over.
                return .refused(message: "an object with this id already exists on the server", code: "412", serverCopy: current.attributes)
            }
            let id = made ?? (configuration.serverAssignsIDs ? state.newID("s") : change.objectID)
            state.creates[key] = id
            guard let version = state.write(model, id, attributes) else {
                return .refused(message: "an object needs at least one attribute", code: "422")
            }
            return .accepted(serverID: id, version: .int(version))
        case .update:
            guard let current else { return .notFound() }
            if let conflict = conflict(change, current) { return conflict }
            return .accepted(version: state.merge(model, change.objectID, attributes).map { .int($0) })
        case .delete:
            // Of an object whose create's answer was lost: the object that create made (a
            // black-box probe: the delete of the local id missed it, and it stayed).
            let key = ServerState.createKey(client: client, model: model, id: change.objectID)
            let id = current == nil && !configuration.linksViaPull ? state.creates[key] ?? change.objectID : change.objectID
            guard let target = state.collections[model]?.objects[id] else { return .notFound() }
            if let conflict = conflict(change, target) { return conflict }
            state.write(model, id, nil)
            // Deleted by the client that made it: a create of the id it sends later is a new one.
            state.creates[key] = nil
            return .accepted()
        }
    }

    private func conflict(_ change: OutgoingChange, _ current: ServerState.Entry) -> PushOutcome? {
        guard configuration.checkVersions, let base = change.baseVersion, base != .int(current.version) else { return nil }
        // An update or a delete: the engine settles it from the server's copy and version.
        return .conflict(
            message: "the object was modified meanwhile", code: "412", serverCopy: current.attributes, serverVersion: .int(current.version))
    }

    // MARK: - Snapshots, search, listing, blobs

    public func bulkSnapshot(_ request: PullRequest) async throws -> PullPage {
        _ = try client(request.session)
        var plain = request
        plain.configuration.fetchLimit = nil
        var (page, next) = listing(plain, cursor: try Cursor(request.cursor))
        page.nextCursor = next.json
        return page
    }

    /// Objects whose attributes equal every member of `query`, in one page.
    public func search(_ request: PullRequest, query: JSONObject) async throws -> PullPage {
        _ = try client(request.session)
        let found = ordered(request).filter { Self.matches($0.entry.attributes, query) }
        return PullPage(upserts: found.map { serverObject($0.id, $0.entry, request: request) }, totalCount: found.count)
    }

    /// The objects matching `condition` (evaluated whole, as the store evaluates it), a page at a
    /// time: the cursor is the offset into them.
    public func search(_ request: PullRequest, matching condition: Condition) async throws -> PullPage {
        _ = try client(request.session)
        let found = ordered(request).filter { condition.matches(Object(id: $0.id, attributes: $0.entry.attributes)) }
        let offset = min(max(0, Int(request.cursor?["offset"]?.intValue ?? 0)), found.count)
        let end = min(offset + max(1, request.pageSize), found.count)
        var page = PullPage(upserts: found[offset..<end].map { serverObject($0.id, $0.entry, request: request) }, totalCount: found.count)
        page.done = end == found.count
        if !page.done { page.nextCursor = ["offset": .int(Int64(end))] }
        return page
    }

    public func remoteIDs(_ request: PullRequest) async throws -> [String] {
        _ = try client(request.session)
        let ids = ordered(request).map(\.id)
        return ids
    }

    public func downloadBlob(_ url: String, session: SyncSession) async throws -> Data {
        try authenticate(session)
        guard let data = state.blobs[url] else { throw SyncError(.server, "no blob at \(url)", httpStatus: 404) }
        return data
    }
}
