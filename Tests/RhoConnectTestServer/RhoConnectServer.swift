public import Foundation
public import FlyingFox
internal import FlyingSocks
public import LoopbackSupport

/// A RhoConnect server on 127.0.0.1, for tests: protocol 4's routes (and the legacy
/// `/application` ones), cookie sessions, client objects, paging with token ack / resend /
/// drop, CUD with links and errors delivered once, search, bulk data and blobs — the rules of
/// RhoConnect 7.x as `rhoconnect-protocol.md` describes them. The backend behind it is the
/// fixture's data, which tests change as another client (or the backend) would.
///
/// ```swift
/// let server = try await RhoConnectServer.start(try Fixture.named("products"))
/// defer { Task { await server.stop() } }
/// let backend = RhoConnectBackend(url: server.url)
/// ```
public actor RhoConnectServer: LoopbackServing {
    /// The server's root, `http://127.0.0.1:PORT/`.
    public nonisolated let url: URL
    private let http: HTTPServer
    private var task: Task<Void, any Error>?
    private var state: ServerData

    /// A request the server received, for tests to inspect.
    public struct Request: Sendable {
        public var method: String
        public var path: String
        public var query: [String: String]
        public var cookie: String?
        public var clientID: String?
        public var contentType: String?
        public var body: Data
    }

    /// Every request received, in order.
    public var requests: [Request] { state.requests }

    /// Starts a server with `fixture` on a free port.
    ///
    /// The port is the kernel's pick, and the server runs off the cooperative pool (see
    /// ``LoopbackHTTP/start(_:timeout:)``).
    public static func start(_ fixture: Fixture = Fixture()) async throws -> RhoConnectServer {
        try await LoopbackHTTP.serve("RhoConnect") { http, port, task in RhoConnectServer(fixture: fixture, port: port, http: http, task: task) }
    }

    private init(fixture: Fixture, port: UInt16, http: HTTPServer, task: Task<Void, any Error>) {
        url = URL(string: "http://127.0.0.1:\(port)/")!
        state = ServerData(fixture: fixture, root: "http://127.0.0.1:\(port)")
        self.http = http
        self.task = task
    }

    /// Stops the server.
    public func stop() async {
        await http.stop(timeout: 1)
        task?.cancel()
    }

    // MARK: - The backend's data, as tests change it

    /// The objects of `source` for `user` (the shared ones for an `app` source).
    public func objects(_ source: String, user: String) -> [String: [String: String]] { state.data(source, user: user) }

    /// Creates or replaces an object.
    public func put(_ source: String, user: String, id: String, _ attributes: [String: String]) {
        state.apply(Fixture.Change(source: source, user: user, insert: [id: attributes]))
    }

    /// Changes attributes of an object (nil removes one).
    public func update(_ source: String, user: String, id: String, _ changes: [String: String?]) {
        var change = Fixture.Change(source: source, user: user)
        change.update = [id: changes.compactMapValues { $0 }]
        change.remove = [id: changes.filter { $0.value == nil }.map(\.key)]
        state.apply(change)
    }

    public func delete(_ source: String, user: String, id: String) {
        state.apply(Fixture.Change(source: source, user: user, delete: [id]))
    }

    /// Runs the fixture's script `name`.
    public func runScript(_ name: String) throws {
        guard let steps = state.fixture.scripts[name] else { throw FixtureError("the fixture has no script \(name)") }
        for step in steps { state.apply(step) }
    }

    /// Adds an error rule of the backend.
    public func addRule(_ rule: Fixture.Rule) { state.fixture.rules.append(rule) }
    public func clearRules() { state.fixture.rules.removeAll() }

    /// Forgets every client (their next request gets `Unknown client`).
    public func forgetClients() { state.clients.removeAll() }
    /// Forgets every session (the next request gets 401).
    public func expireSessions() { state.sessions.removeAll() }
    /// Sets the schema version of a source: clients that have not seen it get `schema-changed`.
    public func setSchemaVersion(_ source: String, _ version: String) { state.fixture.sources[source, default: .init()].schemaVersion = version }
    /// The number of `wait` answers before a bulk file is ready.
    public func setBulkWaits(_ waits: Int) { state.bulkWaits = waits }
    /// Answers the next `method` request whose path starts with `pathPrefix` with `status` and
    /// `body` instead (for malformed-answer tests).
    public func sabotageNext(_ method: String, _ pathPrefix: String, status: Int = 200, body: Data) {
        state.sabotage.append(("\(method) \(pathPrefix)", status, body))
    }
    /// The client ids the server knows, with their user.
    public var clients: [String: String] { state.clients.mapValues(\.user) }

    /// How many objects each source's document of client `id` holds (what it was sent).
    public func documents(ofClient id: String) -> [String: Int] { state.clients[id]?.sources.mapValues(\.known.count) ?? [:] }

    // MARK: - HTTP

    public func handle(_ request: HTTPRequest) async -> HTTPResponse {
        let body = (try? await request.bodyData) ?? Data()
        var query: [String: String] = [:]
        for item in request.query { query[item.name] = item.value }
        let cookie = request.headers[HTTPHeader("Cookie")]
        let logged = Request(
            method: request.method.rawValue, path: request.path, query: query, cookie: cookie,
            clientID: request.headers[HTTPHeader("X-RhoConnect-CLIENT-ID")] ?? query["client_id"],
            contentType: request.headers[HTTPHeader("Content-Type")], body: body)
        state.requests.append(logged)
        if let index = state.sabotage.firstIndex(where: { "\(request.method.rawValue) \(request.path)".hasPrefix($0.0) }) {
            let (_, status, body) = state.sabotage.remove(at: index)
            return HTTPResponse(statusCode: HTTPStatusCode(status, phrase: "Sabotaged"), body: body)
        }
        let answer = state.route(logged)
        var headers = FlyingFox.HTTPHeaders()
        headers.addValue(answer.contentType, for: HTTPHeader("Content-Type"))
        headers.addValue("no-cache", for: HTTPHeader("Cache-Control"))
        headers.addValue("no-cache", for: HTTPHeader("Pragma"))
        for (name, value) in answer.headers { headers.addValue(value, for: HTTPHeader(name)) }
        return HTTPResponse(
            statusCode: HTTPStatusCode(answer.status, phrase: answer.status == 200 ? "OK" : "Error"), headers: headers, body: answer.body)
    }
}

/// An answer of the server.
struct Answer {
    var status = 200
    var contentType = "application/json"
    var headers: [String: String] = [:]
    var body = Data()

    static func text(_ status: Int, _ text: String) -> Answer { Answer(status: status, contentType: "text/plain", body: Data(text.utf8)) }
    static func json(_ value: Any) -> Answer {
        Answer(body: (try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed])) ?? Data())
    }
    static let notAuthenticated = text(401, "Not authenticated")
    static let unknownClient = text(500, "Unknown client")
}

/// What the server keeps for one client and source (RhoConnect's client objects).
struct ClientSource {
    /// What the client has (the CD).
    var known: [String: [String: String]] = [:]
    var pageToken: String?
    var page: Data?
    var links: [String: String] = [:]
    var errors: [String: [String: Any]] = [:]
    var rollbacks: [String: [String: String]] = [:]
    var metadataSeen: String?
    var schemaSeen: String?
    var searchToken: String?
    var searchPage: Any?
}

struct Client {
    var user: String
    var sources: [String: ClientSource] = [:]
}
