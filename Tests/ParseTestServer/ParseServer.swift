public import Foundation
public import LoopbackSupport
public import FlyingFox
internal import FlyingSocks

/// A Parse Server on 127.0.0.1, for tests: the REST API mounted at `/parse` — application id and
/// REST key checks, logins and session tokens, objects with `__op` updates and schema checks,
/// queries (`where`, `order`, `limit`, `skip`, `keys`, `include`, `count`), batches, files,
/// cloud functions and ACLs — with Parse Server's status codes and error bodies, as
/// `rest-backends.md` §A describes them. The data behind it starts as the fixture's; tests
/// change it as the dashboard (the master key) would, and script `beforeSave` rejections.
///
/// ```swift
/// let server = try await ParseServer.start(try ParseFixture.named("shop"))
/// defer { Task { await server.stop() } }
/// // server.url is http://127.0.0.1:PORT/parse; send X-Parse-Application-Id: server.appID
/// ```
public actor ParseServer: LoopbackServing {
    /// The mount, `http://127.0.0.1:PORT/parse` (no trailing slash).
    public nonisolated let url: URL
    public nonisolated let appID: String
    /// The REST API key requests must carry (nil: none is checked).
    public nonisolated let restKey: String?
    private let http: HTTPServer
    private var task: Task<Void, any Error>?
    private var state: ParseState

    /// A request the server received, for tests to inspect.
    public typealias Request = LoopbackRequest

    /// Every request received, in order (sabotaged ones included).
    public var requests: [Request] { state.requests }

    /// Starts a server with `fixture` on a free port.
    ///
    /// The port is the kernel's pick (see ``LoopbackHTTP/start(_:)``).
    public static func start(_ fixture: ParseFixture = ParseFixture()) async throws -> ParseServer {
        try await LoopbackHTTP.serve("Parse") { http, port, task in ParseServer(fixture: fixture, port: port, http: http, task: task) }
    }

    private init(fixture: ParseFixture, port: UInt16, http: HTTPServer, task: Task<Void, any Error>) {
        let root = "http://127.0.0.1:\(port)"
        let state = ParseState(fixture: fixture, root: root)
        url = URL(string: root + state.mount)!
        self.state = state
        appID = fixture.appID
        restKey = fixture.restKey
        self.http = http
        self.task = task
    }

    /// Stops the server.
    public func stop() async {
        await http.stop(timeout: 1)
        task?.cancel()
    }

    // MARK: - The data, as the dashboard (the master key) sees and changes it

    /// The objects of a class by `objectId`, each as `GET /classes/C/ID` answers it.
    public func objects(_ className: String) -> [String: Data] {
        let view = state.view(.init())
        var objects: [String: Data] = [:]
        for object in state.store.objects(className) {
            if let id = object["objectId"]?.string { objects[id] = view.present(object).data }
        }
        return objects
    }

    /// Creates an object from its JSON (`id`, or the JSON's `objectId`, is kept; else one is
    /// assigned), stamping `createdAt` and `updatedAt`; returns its id. No rule, ACL or schema
    /// check applies.
    @discardableResult
    public func put(_ className: String, _ json: Data, id: String?) -> String {
        let body = JSON.parse(json)?.object ?? [:]
        let created = try? state.store.write(className, .create(id: id), body: body, checked: false)
        return created?["objectId"]?.string ?? ""
    }

    /// Changes an object as a `PUT` does (absent fields untouched, `{"__op":"Delete"}` removes
    /// one, other operators apply), bumping `updatedAt`. A missing object is left missing.
    public func update(_ className: String, _ id: String, _ json: Data) {
        _ = try? state.store.write(className, .update(id), body: JSON.parse(json)?.object ?? [:], checked: false)
    }

    /// Deletes a field from the class's schema and its objects (their `updatedAt` stay), as the
    /// schema API's field `Delete` does; the field's next value sets its type again.
    public func dropField(_ className: String, _ field: String) { state.store.dropField(className, field) }

    /// Deletes an object: it vanishes (Parse keeps no tombstone).
    public func delete(_ className: String, _ id: String) { state.store.delete(className, id) }

    /// Adds a `beforeSave` / `beforeDelete` rejection.
    public func addRule(_ rule: ParseFixture.Rule) { state.rules.append(rule) }
    public func clearRules() { state.rules.removeAll() }

    /// Sets Parse Server's `maxLimit`: a larger `limit` is silently clamped (nil: no cap).
    public func setMaxLimit(_ limit: Int?) { state.maxLimit = limit }

    /// Sets the most requests one batch may carry (nil: no cap, Parse Server's default).
    public func setBatchLimit(_ limit: Int?) { state.batchLimit = limit }

    /// While set (an ISO time, `2024-05-01T10:00:00.000Z`), every write stamps this time.
    public func freezeClock(_ iso: String?) { state.store.frozenClock = iso }

    /// Ends every session: a request with any token now gets 400 code 209.
    public func expireSessions() { state.sessions.removeAll() }

    /// Answers the next `method` request whose path starts with `pathPrefix` with `status` and
    /// `body` instead (for malformed-answer tests). The request is still logged.
    public func sabotageNext(_ method: String, _ pathPrefix: String, status: Int = 200, body: Data) {
        state.sabotage.append((method, pathPrefix, status, body))
    }

    /// Carries out the next `method` request whose path starts with `pathPrefix`, then loses
    /// its answer: the client gets a `502` (a proxy's "Bad Gateway" page) instead.
    public func loseNextAnswer(_ method: String, _ pathPrefix: String) { state.lostAnswers.append((method, pathPrefix)) }

    /// Turns Parse Server's `idempotencyOptions` on (or off, with nil).
    /// The request ids seen so far are forgotten, as after the options' `ttl`.
    public func setIdempotency(_ options: ParseFixture.Idempotency?) {
        state.idempotency = options
        state.requestIDs.removeAll()
    }

    /// How many requests were answered `159` (a repeated `X-Parse-Request-Id`).
    public var duplicateRequests: Int { state.duplicateRequests }

    /// Sets Parse Server's `allowCustomObjectId`.
    public func setAllowCustomObjectID(_ allowed: Bool) { state.allowCustomObjectID = allowed }

    /// Makes `className`'s class-level permissions refuse `addField` (or allow it again).
    public func lockSchema(_ className: String, _ locked: Bool = true) {
        if locked { state.store.lockedSchemas.insert(className) } else { state.store.lockedSchemas.remove(className) }
    }

    /// The fields `className`'s schema holds, as Parse learned them.
    public func schemaFields(_ className: String) -> Set<String> { Set((state.store.schema[className] ?? [:]).keys) }

    /// The names of the stored files.
    public var fileNames: [String] { state.files.keys.sorted() }

    // MARK: - HTTP

    public func handle(_ request: HTTPRequest) async -> HTTPResponse {
        let body = (try? await request.bodyData) ?? Data()
        var headers: [String: String] = [:]
        for (name, value) in request.headers {
            let key = name.rawValue.lowercased()
            headers[key] = headers[key].map { "\($0), \(value)" } ?? value
        }
        let logged = Request(
            method: request.method.rawValue, path: request.path, query: Self.query(request.target.query()), headers: headers,
            body: body)
        state.requests.append(logged)
        var answer: Answer
        if let index = state.sabotage.firstIndex(where: { $0.method == logged.method && logged.path.hasPrefix($0.prefix) }) {
            let sabotage = state.sabotage.remove(at: index)
            answer = Answer(status: sabotage.status, body: sabotage.body)
        } else {
            answer = state.route(logged)
            if let index = state.lostAnswers.firstIndex(where: { $0.method == logged.method && logged.path.hasPrefix($0.prefix) }) {
                state.lostAnswers.remove(at: index)
                var lost = Answer(status: 502, contentType: "text/html", body: Data("<html><body><h1>502 Bad Gateway</h1></body></html>".utf8))
                lost.headers = [:]
                answer = lost
            }
        }
        var response = FlyingFox.HTTPHeaders()
        response.addValue(answer.contentType, for: HTTPHeader("Content-Type"))
        for (name, value) in answer.headers { response.addValue(value, for: HTTPHeader(name)) }
        let phrase = answer.status < 300 ? "OK" : answer.status == 404 ? "Not Found" : "Error"
        return HTTPResponse(statusCode: HTTPStatusCode(answer.status, phrase: phrase), headers: response, body: answer.body)
    }

    /// A query string's parameters as Express reads them: `+` is a space, then percent-decoding.
    private static func query(_ raw: String) -> [String: String] {
        var parameters: [String: String] = [:]
        for pair in raw.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map {
                let text = $0.replacingOccurrences(of: "+", with: " ")
                return text.removingPercentEncoding ?? text
            }
            parameters[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        return parameters
    }
}
