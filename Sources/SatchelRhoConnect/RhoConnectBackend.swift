public import Foundation
public import Satchel
public import SatchelSync

/// A RhoConnect server, spoken to as the RhoConnect client does.
///
/// Point it at the server's root (`http://host:9292/`); it uses protocol 4's routes
/// (`/rc/v1/...`, `/app/v1/...`), or the legacy `/application` routes with
/// ``Configuration/Routes/legacy``.
///
/// ```swift
/// let backend = RhoConnectBackend(url: URL(string: "http://127.0.0.1:9292/")!)
/// let engine = SyncEngine(store: store, backend: backend)
/// try await engine.logIn(Credentials(user: "ann", password: "secret"))
/// try await engine.sync()
/// ```
///
/// What it maps:
/// - the `rhoconnect_session` cookie of the login, replayed on every request, is the session's
///   data; the client id (`X-RhoConnect-CLIENT-ID`) is its ``SyncSession/clientID``, created at
///   the first sync and kept by the engine across logins;
/// - query pages become ``PullPage``s whose cursor is the page token: the engine stores it with
///   the page, so the next request acknowledges exactly the pages applied (after a restart
///   too), and a page whose answer was lost is sent again by the server;
/// - `insert` (partial objects), `delete` (attributes; all of an object's = the object),
///   `links`, `metadata`, `schema-changed`, `source-error`, and `create-error` /
///   `update-error` (with `update-rollback` as the server's copy) / `delete-error` as record
///   errors;
/// - pushes: creates wait for their link (``PushOutcome/awaitingLink``); updates and deletes
///   are received, and errors come in the next page;
/// - values are strings on the wire; a property-bag model keeps them as strings, a fixed-schema
///   model reads them as its declared types;
/// - a 401 logs out; a 500 `Unknown client` is ``SyncError/Code/unknownClient``.
public struct RhoConnectBackend: SyncBackend {
    /// Where the server is and how to talk to it.
    public struct Configuration: Sendable {
        /// Protocol 4's routes, or the legacy ones under `/application`.
        public enum Routes: Sendable, Hashable {
            case protocol4
            case legacy
        }

        /// The server's root, e.g. `http://host:9292/`.
        public var url: URL
        public var routes: Routes
        /// Seconds to wait for an answer.
        public var timeout: TimeInterval
        /// The wait between polls while the server builds a bulk-data file (`wait`).
        public var bulkPollInterval: Duration
        /// How many times to poll before giving up.
        public var bulkMaxPolls: Int
        /// `max_results` of a search.
        public var searchMaxResults: Int
        /// How the adapter waits between bulk polls (tests record instead of sleeping).
        public var sleep: @Sendable (Duration) async throws -> Void
        /// Whether plain `http://` may go to a host other than this machine (off by default:
        /// credentials, sessions and data would cross the network unencrypted; loopback is
        /// always allowed).
        public var allowInsecureHTTP = false
        /// How much of a server's answer is read before the sync fails (see ``AnswerLimits``).
        public var limits = AnswerLimits()

        public init(
            url: URL, routes: Routes = .protocol4, timeout: TimeInterval = 60, bulkPollInterval: Duration = .seconds(5),
            bulkMaxPolls: Int = 120, searchMaxResults: Int = 1000,
            sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
        ) {
            self.url = url
            self.routes = routes
            self.timeout = timeout
            self.bulkPollInterval = bulkPollInterval
            self.bulkMaxPolls = bulkMaxPolls
            self.searchMaxResults = searchMaxResults
            self.sleep = sleep
        }
    }

    public let configuration: Configuration
    let http: RhoConnectHTTP

    public init(configuration: Configuration) {
        self.configuration = configuration
        http = RhoConnectHTTP(
            client: SyncHTTPClient(timeout: configuration.timeout, limits: configuration.limits, allowInsecureHTTP: configuration.allowInsecureHTTP))
    }

    /// An adapter for the server at `url` (its root), with protocol 4's routes.
    public init(url: URL) { self.init(configuration: Configuration(url: url)) }

    public var name: String { "rhoconnect" }

    public var capabilities: SyncCapabilities {
        SyncCapabilities(
            deletions: .inPages, bulkSnapshot: true, search: configuration.routes == .protocol4, pushResultsViaPull: true,
            searchesAsAnotherClient: true)
    }

    /// Values travel as strings: a number, boolean, array or object pushed is kept as its JSON
    /// text, which is what the drift check compares.
    public func serverForm(_ value: JSONValue) -> JSONValue { RhoConnectValues.outgoing(value) }

    // MARK: - Session data

    static let cookieKey = "cookie"

    static func cookie(_ session: SyncSession) -> String? { session.data[cookieKey]?.stringValue }

    func clientID(_ session: SyncSession) throws(SyncError) -> String {
        guard let id = session.clientID else { throw SyncError(.unknownClient, "the session has no RhoConnect client id") }
        return id
    }

    func url(_ path: String, _ query: [(String, String)] = []) throws(SyncError) -> URL {
        try RhoConnectHTTP.url(configuration.url, path, query)
    }

    func send(
        _ method: String, _ url: URL, _ session: SyncSession?, body: Data? = nil, contentType: String? = nil, what: String,
        maximumBytes: Int? = nil
    ) async throws(SyncError) -> RhoConnectHTTP.Answer {
        let answer = try await http.send(
            method, url, cookie: session.flatMap(Self.cookie), clientID: session?.clientID, body: body, contentType: contentType,
            maximumBytes: maximumBytes)
        return try RhoConnectHTTP.check(answer, what)
    }

    static func body(_ object: JSONObject) -> Data { Data(object.jsonBytes) }

    // MARK: - Log in, client

    public func logIn(_ credentials: Credentials) async throws -> SyncSession {
        let url = try url(configuration.routes == .protocol4 ? "rc/v1/app/login" : "application/clientlogin")
        let body: JSONObject = ["login": .string(credentials.user), "password": .string(credentials.password), "remember_me": 1]
        let answer = try await send("POST", url, nil, body: Self.body(body), what: "login")
        let cookie = RhoConnectHTTP.cookie(from: answer)
        guard !cookie.isEmpty else { throw SyncError(.protocolViolation, "login: the server set no session cookie") }
        return SyncSession(user: credentials.user, data: [Self.cookieKey: .string(cookie)])
    }

    /// RhoConnect has no logout call: the session is forgotten here, and the server is not
    /// told (``SyncEngine/logOut()`` returns why).
    ///
    /// - Throws: ``SyncError`` `.notSupported`, always.
    public func logOut(_ session: SyncSession) async throws {
        throw SyncError(.notSupported, "RhoConnect has no logout call")
    }

    /// Creates the client on the server when the session has none yet.
    public func prepare(_ session: SyncSession) async throws -> SyncSession {
        guard session.clientID == nil else { return session }
        let answer: RhoConnectHTTP.Answer
        switch configuration.routes {
        case .protocol4: answer = try await send("POST", url("rc/v1/clients"), session, body: Data(), what: "client create")
        case .legacy: answer = try await send("GET", url("application/clientcreate"), session, what: "client create")
        }
        guard case .object(let object) = try answer.json("client create"), case .object(let client)? = object["client"],
            case .string(let id)? = client["client_id"], !id.isEmpty
        else {
            throw SyncError(.protocolViolation, "client create: the answer has no client.client_id")
        }
        var prepared = session
        prepared.clientID = id
        return prepared
    }

    /// Asks the server to flush this client's objects; the client id is kept. A client the
    /// server no longer knows is dropped, and the next sync creates a new one.
    public func resetClient(_ session: SyncSession) async throws -> SyncSession {
        guard let id = session.clientID else { return session }
        do {
            try await requestReset(id, session)
            return session
        } catch {
            guard error.code == .unknownClient else { throw error }
            var reset = session
            reset.clientID = nil
            return reset
        }
    }

    /// Resets the model's objects of this client on the server, so that the next query sends
    /// every object again (RhoConnect sends a client only what it lacks). The legacy routes
    /// reset the whole client.
    public func prepareFullPull(_ request: PullRequest) async throws {
        try await requestReset(try clientID(request.session), request.session, sources: [request.model.name])
    }

    func requestReset(_ id: String, _ session: SyncSession, sources: [String]? = nil) async throws(SyncError) {
        switch configuration.routes {
        case .protocol4:
            let body = sources.map { Self.body(["sources": .array($0.map { .object(["name": .string($0)]) })]) } ?? Data()
            _ = try await send("POST", url("rc/v1/clients/\(RhoConnectHTTP.escape(id))/reset"), session, body: body, what: "client reset")
        case .legacy:
            _ = try await send("GET", url("application/clientreset", [("client_id", id)]), session, what: "client reset")
        }
    }

    // MARK: - Query

    func sourceQuery(_ request: PullRequest) -> [(String, String)] {
        (request.configuration.serverFilter ?? JSONObject()).map { name, value in
            ("query[\(name)]", RhoConnectValues.outgoing(value).stringValue ?? "")
        }
    }

    public func pull(_ request: PullRequest) async throws -> PullPage {
        let id = try clientID(request.session)
        var query = [("p_size", String(max(1, request.pageSize))), ("version", String(RhoConnectPage.version))]
        // Every query carries a token. A query without one makes the server drop the page it
        // holds for this client, whose objects it has already counted as sent: with no token
        // stored yet (a model's first pages, after a reset), a first page whose answer was lost
        // would be lost for good. `0` is no page's token (a token reads as 0 when there is
        // none): a server holding a page resends it for a token that differs, and one holding
        // none computes the next.
        if case .string(let token)? = request.cursor { query.append(("token", token)) } else { query.append(("token", "0")) }
        query += sourceQuery(request)
        let source = request.model.name
        let url: URL
        switch configuration.routes {
        case .protocol4: url = try self.url("app/v1/\(RhoConnectHTTP.escape(source))", query)
        case .legacy: url = try self.url("application", [("client_id", id), ("source_name", source)] + query)
        }
        let answer = try await send("GET", url, request.session, what: "query of \(source)")
        var page = try Self.queryPage(answer, model: request.model)
        // The last page of a cycle has no token: keep the one it acknowledged as the cursor, so
        // the next cycle's first query sends it. The server ignores an old token when nothing is
        // pending, and resends a pending page for it — whereas a query without a token makes it
        // drop that page, whose objects it has already recorded as sent: a first page whose
        // answer was lost (the app killed as it arrived) would be lost for good.
        if page.done && page.nextCursor == nil { page.nextCursor = request.cursor }
        return page
    }

    // MARK: - Push

    public func push(_ request: PushRequest) async throws -> [PushResult] {
        let id = try clientID(request.session)
        let source = request.model.name
        var sections: [PendingChange.Kind: JSONObject] = [:]
        var blobs: [(part: String, file: String, data: Data)] = []
        var blobFields = Set<String>()
        for change in request.changes {
            var attributes = RhoConnectValues.outgoing(change.attributes)
            if change.kind == .create {
                // Nulls are nothing to create.
                attributes = attributes.filter { _, value in !value.isNull }
            }
            sections[change.kind, default: JSONObject()][change.objectID] = .object(attributes)
            for (attribute, data) in change.blobs.sorted(by: { $0.key < $1.key }) where change.kind != .delete {
                let file = (change.attributes[attribute]?.stringValue).map { ($0 as NSString).lastPathComponent } ?? attribute
                blobs.append(("\(attribute)-\(change.objectID)", file.isEmpty ? attribute : file, data))
                blobFields.insert(attribute)
            }
        }
        var cud: JSONObject = ["source_name": .string(source), "client_id": .string(id)]
        for kind in [PendingChange.Kind.create, .update, .delete] {
            if let section = sections[kind] { cud[kind.rawValue] = .object(section) }
        }
        let url = try self.url(configuration.routes == .protocol4 ? "app/v1/\(RhoConnectHTTP.escape(source))" : "application")
        if blobs.isEmpty {
            _ = try await send("POST", url, request.session, body: Self.body(cud), what: "push of \(source)")
        } else {
            cud["blob_fields"] = .array(blobFields.sorted().map(JSONValue.string))
            // One file part per blob, named `attribute-objectID`, then the changes as the part `cud`.
            let files = blobs.map { MultipartForm.Part(name: $0.part, filename: $0.file, contentType: "application/octet-stream", data: $0.data) }
            let form = MultipartForm(files + [MultipartForm.Part(name: "cud", contentType: "application/json", data: Self.body(cud))])
            _ = try await send("POST", url, request.session, body: form.body, contentType: form.contentType, what: "push of \(source)")
        }
        // The server answers later, in query pages: links for creates, errors for any change.
        // A create waits for its link; a delete for the pull after it, whose pages (one resent,
        // made before the delete) must not bring the object back (a black-box probe).
        return request.changes.map { PushResult(objectID: $0.objectID, outcome: $0.kind == .update ? .accepted() : .awaitingLink) }
    }

    // MARK: - Bulk data

    public func bulkSnapshot(_ request: PullRequest) async throws -> PullPage {
        let source = request.model.name
        guard request.model.partition != .local else { throw SyncError(.notSupported, "\(source) is a local model") }
        let partition = request.model.partition.rawValue
        var polls = 0
        while true {
            let answer: RhoConnectHTTP.Answer
            switch configuration.routes {
            case .protocol4:
                answer = try await send(
                    "POST", url("rc/v1/app/bulk_data"), request.session,
                    body: Self.body(["partition": .string(partition), "sources": [.string(source)]]), what: "bulk data")
            case .legacy:
                let query = [("partition", partition), ("client_id", try clientID(request.session)), ("sources[]", source)]
                answer = try await send("GET", url("application/bulk_data", query), request.session, what: "bulk data")
            }
            guard case .object(let result) = try answer.json("bulk data"), case .string(let status)? = result["result"] else {
                throw SyncError(.protocolViolation, "bulk data: the answer has no result")
            }
            switch status {
            case "wait":
                polls += 1
                guard polls < configuration.bulkMaxPolls else {
                    throw SyncError(.server, "bulk data: the server was still building the file after \(polls) polls")
                }
                try await configuration.sleep(configuration.bulkPollInterval)
            case "nop":
                // No bulk-sync source in the partition: no file, which says nothing of the
                // source's objects (an empty snapshot would wipe them).
                throw SyncError(.notSupported, "bulk data: the server has no bulk file for \(source) (nop: no bulk-sync source in its partition)")
            case "url":
                guard case .string(let path)? = result["url"], !path.isEmpty else {
                    throw SyncError(.server, "bulk data: the server could not build the file (an empty url)")
                }
                return try await bulkFile(path + ".rzip", request)
            default:
                throw SyncError(.protocolViolation, "bulk data: unknown result '\(status)'")
            }
        }
    }

    func bulkFile(_ path: String, _ request: PullRequest) async throws(SyncError) -> PullPage {
        guard let url = URL(string: path, relativeTo: configuration.url)?.absoluteURL else {
            throw SyncError(.protocolViolation, "bulk data: '\(path)' is not a URL")
        }
        let answer = try await send("GET", url, request.session, what: "bulk file download", maximumBytes: configuration.limits.maximumDownloadBytes)
        var page = PullPage(done: true)
        for (id, attributes) in try BulkDataFile.objects(of: request.model.name, inZip: answer.body) {
            var object = try RhoConnectPage.serverObject(id, attributes, model: request.model)
            object.isWhole = true
            page.upserts.append(object)
        }
        page.totalCount = page.upserts.count
        return page
    }

    // MARK: - Search

    /// A search by the condition's equalities of top-level attributes that must all hold, as
    /// the source's search parameters (what else it says, the source's search cannot; the
    /// engine holds the answer to the whole condition); the bulk-data file when it has none.
    ///
    /// It reads as a client of its own (``reading(_:_:)``): a search's token acks and a
    /// bulk file's hand-out tell the server the client now has those objects, so this device's
    /// client, which does not store them, would never be sent them.
    public func search(_ request: PullRequest, matching condition: Condition) async throws -> PullPage {
        let parameters = Self.searchParameters(condition)
        return try await reading(request) { request in
            // Without a parameter the source's search says nothing: the whole data is the superset.
            parameters.isEmpty ? try await bulkSnapshot(request) : try await search(request, query: parameters)
        }
    }

    /// Runs `body` with `request`'s session as a new client of the server, registered for one
    /// read that must not move this device's client: a search by condition, the drift check.
    /// The server keeps the client it registers (the protocol has no way to remove one), but
    /// not a copy of what it was handed: the client is reset after the read (whatever its
    /// outcome; a reset that fails leaves the copy, and the read's answer stands).
    func reading(_ request: PullRequest, _ body: (PullRequest) async throws -> PullPage) async throws -> PullPage {
        var reading = request
        reading.session.clientID = nil
        reading.session = try await prepare(reading.session)
        let id = reading.session.clientID
        func dropCopy() async {
            if let id { try? await requestReset(id, reading.session) }
        }
        do {
            let page = try await body(reading)
            await dropCopy()
            return page
        } catch {
            await dropCopy()
            throw error
        }
    }

    /// Searches the server's source with `search[name]=value` parameters, acknowledging each
    /// page's token until the server has nothing more.
    public func search(_ request: PullRequest, query: JSONObject) async throws -> PullPage {
        guard configuration.routes == .protocol4 else { throw SyncError(.notSupported, "search needs protocol 4's routes") }
        let source = request.model.name
        var parameters = [
            ("p_size", String(max(1, request.pageSize))), ("version", String(RhoConnectPage.version)), ("offset", "0"),
            ("max_results", String(configuration.searchMaxResults)),
        ]
        for (name, value) in query { parameters.append(("search[\(name)]", RhoConnectValues.outgoing(value).stringValue ?? "")) }
        let url = try url("rc/v1/app/search", parameters)
        var found = PullPage(done: true)
        var token: String?
        for _ in 0..<10_000 {
            var entry: JSONObject = ["name": .string(source)]
            if let token { entry["token"] = .string(token) }
            let answer = try await send("POST", url, request.session, body: Self.body(["sources": [.object(entry)]]), what: "search of \(source)")
            let pages = try Self.searchAnswer(answer, model: request.model)
            found.upserts += pages.upserts
            token = pages.token
            if pages.count == 0 || token == nil { break }
        }
        found.totalCount = found.upserts.count
        return found
    }

    /// The equalities of top-level attributes that every object matching `condition` satisfies.
    static func searchParameters(_ condition: Condition) -> JSONObject {
        switch condition.expression {
        case .compare(let field, .equal, let value) where field.components.count == 1 && field != .id:
            return [field.components[0]: value]
        case .and(let parts):
            var parameters = JSONObject()
            for part in parts { for (name, value) in searchParameters(part) { parameters[name] = value } }
            return parameters
        default:
            return JSONObject()
        }
    }

    /// A model's whole data, for ``SyncEngine/verify(_:)``: the bulk-data file, handed to a
    /// client of its own (``reading(_:_:)``), so this device's client keeps its position.
    public func serverObjects(_ request: PullRequest) async throws -> PullPage {
        try await reading(request) { request in try await bulkSnapshot(request) }
    }

    /// The page a query answered, in the engine's terms, values read for `model`.
    /// Package-visible so that the fuzz targets read answers through the code a pull runs.
    ///
    /// - Throws: ``SyncError`` `.versionMismatch` or `.protocolViolation` (see ``RhoConnectPage``).
    package static func queryPage(_ answer: SyncHTTPClient.Response, model: ModelDefinition) throws(SyncError) -> PullPage {
        try RhoConnectPage(answer.json("query of \(model.name)")).pullPage(for: model)
    }

    /// What one answer of a search of `model`'s source holds: the objects its pages found, the
    /// count they announce, and the last page's token (nil when the server has nothing more).
    /// Package-visible so that the fuzz targets read answers through the code a search runs.
    ///
    /// - Throws: ``SyncError`` `.server` for a `search-error`; `.protocolViolation` for an answer
    ///   that is not a list of pages of that source.
    package static func searchAnswer(
        _ answer: SyncHTTPClient.Response, model: ModelDefinition
    ) throws(SyncError) -> (upserts: [ServerObject], count: Int, token: String?) {
        let source = model.name
        guard case .array(let elements) = try answer.json("search of \(source)") else {
            throw SyncError(.protocolViolation, "search of \(source): the answer is not a JSON array")
        }
        var upserts: [ServerObject] = []
        var count = 0
        var token: String?
        for element in elements {
            guard case .array(let items) = element, !items.isEmpty else { continue }  // `[]`: nothing left for that source
            if let message = Self.searchError(items) { throw SyncError(.server, "search of \(source): \(message)") }
            let page = try RhoConnectPage(element, search: true)
            guard page.source == source else {
                throw SyncError(.protocolViolation, "search of \(source): the server answered for source '\(page.source ?? "")'")
            }
            upserts += try page.pullPage(for: model).upserts
            count += page.count
            token = page.token
        }
        return (upserts, count, token)
    }

    /// The message of a `search-error` element, if `items` is one.
    static func searchError(_ items: [JSONValue]) -> String? {
        for case .object(let item) in items {
            guard let error = item["search-error"] else { continue }
            return (try? RhoConnectPage.sourceError(error)) ?? "search-error"
        }
        return nil
    }

    // MARK: - Blobs

    public func downloadBlob(_ url: String, session: SyncSession) async throws -> Data {
        guard
            var components = URL(string: url, relativeTo: configuration.url).flatMap({
                URLComponents(url: $0.absoluteURL, resolvingAgainstBaseURL: true)
            })
        else {
            throw SyncError(.protocolViolation, "blob: '\(url)' is not a URL")
        }
        // The session's cookie and client id go only to the server's own origin.
        let own = components.url.map { SyncHTTPClient.sameOrigin($0, configuration.url) } ?? false
        if own, let id = session.clientID {
            components.queryItems = (components.queryItems ?? []) + [URLQueryItem(name: "client_id", value: id)]
        }
        guard let target = components.url else { throw SyncError(.protocolViolation, "blob: '\(url)' is not a URL") }
        return try await send("GET", target, own ? session : nil, what: "blob download", maximumBytes: configuration.limits.maximumDownloadBytes).body
    }
}
