import FlyingFox
import FlyingSocks
import Foundation
import LoopbackSupport

/// An in-process HTTP server on a free loopback port that answers like Kinto would not: each
/// request other than the root (`/v1/`, a login) and a `HEAD` (a pull asking for the total) gets
/// the next canned answer, in order. A `HEAD` gets the next canned `HEAD` answer, or an empty 200
/// without a total when there is none. For the answers a real Kinto cannot be made to give on cue
/// (truncated or malformed bodies, `Backoff`, `Retry-After`).
actor KintoStub {
    struct Answer: Sendable {
        var status: Int
        var headers: [String: String] = [:]
        var body: String
    }

    private let http: HTTPServer
    private var task: Task<Void, any Error>?
    private var answers: [Answer] = []
    private var headAnswers: [Answer] = []
    /// The method and path (with query) of every request after the login but `HEAD`s, in order.
    private(set) var requests: [String] = []
    /// The path (with query) of every `HEAD` request, in order.
    private(set) var heads: [String] = []
    /// Whether each of ``requests`` carried an `Authorization` header.
    private(set) var authorized: [Bool] = []
    /// The `Authorization` header of each request `requests` lists (nil: none).
    private(set) var authorizations: [String?] = []

    static func start() async throws -> KintoStub {
        let (http, port, task) = try await LoopbackHTTP.start("Kinto stub", timeout: 10)
        let stub = KintoStub(http: http, task: task)
        await stub.route()
        await stub.setURL(URL(string: "http://127.0.0.1:\(port)/v1")!)
        return stub
    }

    private var actualURL: URL?
    private func setURL(_ url: URL) { actualURL = url }
    /// The stub's API root, `http://127.0.0.1:PORT/v1`.
    var root: URL { actualURL! }

    private init(http: HTTPServer, task: Task<Void, any Error>) {
        self.http = http
        self.task = task
    }

    private func route() async {
        await http.appendRoute("*") { [weak self] request in
            guard let self else { return HTTPResponse(statusCode: .internalServerError) }
            return await self.handle(request)
        }
    }

    func stop() async {
        await http.stop(timeout: 1)
        task?.cancel()
    }

    /// Queues answers for the next requests.
    func enqueue(_ more: [Answer]) { answers += more }

    /// What the root (`/v1/`) answers: a user, and the server's settings when set.
    private var rootBody = #"{"user":{"id":"basicauth:stub"}}"#
    func setRootBody(_ body: String) { rootBody = body }

    /// Queues answers for the next `HEAD` requests.
    func enqueueHead(_ more: [Answer]) { headAnswers += more }

    private func handle(_ request: HTTPRequest) async -> HTTPResponse {
        let answer: Answer
        let query = request.query.map { "\($0.name)=\($0.value)" }.joined(separator: "&")
        if request.path == "/v1/" || request.path == "/v1" {
            answer = Answer(status: 200, body: rootBody)
        } else if request.method == .HEAD {
            heads.append(request.path + (query.isEmpty ? "" : "?\(query)"))
            answer = headAnswers.isEmpty ? Answer(status: 200, body: "") : headAnswers.removeFirst()
        } else {
            requests.append("\(request.method.rawValue) \(request.path)" + (query.isEmpty ? "" : "?\(query)"))
            authorized.append(request.headers[HTTPHeader("Authorization")] != nil)
            authorizations.append(request.headers[HTTPHeader("Authorization")])
            answer = answers.isEmpty ? Answer(status: 500, body: #"{"code":500,"errno":999,"error":"no canned answer"}"#) : answers.removeFirst()
        }
        var headers = FlyingFox.HTTPHeaders()
        headers.addValue("application/json", for: HTTPHeader("Content-Type"))
        for (name, value) in answer.headers { headers.addValue(value, for: HTTPHeader(name)) }
        return HTTPResponse(statusCode: HTTPStatusCode(answer.status, phrase: "Stub"), headers: headers, body: Data(answer.body.utf8))
    }
}
