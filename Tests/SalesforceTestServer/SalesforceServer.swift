public import Foundation
public import LoopbackSupport
public import FlyingFox
internal import FlyingSocks

/// A Salesforce org on 127.0.0.1, for tests: the REST API as Salesforce documents and answers it
/// — OAuth (password and refresh-token grants), the version list, describes with
/// `If-Modified-Since`, SOQL `query` / `queryAll` with `nextRecordsUrl` paging, single-record
/// CRUD and upsert by external id, sObject Collections with per-record `statusCode` errors and
/// `allOrNone`, `getDeleted` / `getUpdated` with their window rules, and base64 bodies — with
/// Salesforce's status codes and error bodies. The data starts as the fixture's; tests change
/// it as an admin (Apex, the data loader) would, move the clock, and script validation rules.
///
/// ```swift
/// let server = try await SalesforceServer.start(try SalesforceFixture.named("org"))
/// defer { Task { await server.stop() } }
/// // server.url is the instance root http://127.0.0.1:PORT; the API is under
/// // /services/data/v\(server.version)/ with Authorization: Bearer <await server.token(for: "ann")>
/// ```
public actor SalesforceServer: LoopbackServing {
    /// The instance root, `http://127.0.0.1:PORT` (no trailing slash): what an OAuth answer's
    /// `instance_url` says.
    public nonisolated let url: URL
    /// The newest API version listed (`59.0`).
    public nonisolated let version: String
    private let http: HTTPServer
    private var task: Task<Void, any Error>?
    private var state: SalesforceState

    /// A request the server received, for tests to inspect.
    public typealias Request = LoopbackRequest

    /// Every request received, in order (sabotaged ones included).
    public var requests: [Request] { state.requests }

    /// Starts a server with `fixture` on a free port.
    ///
    /// The port is the kernel's pick (see ``LoopbackHTTP/start(_:)``).
    public static func start(_ fixture: SalesforceFixture = SalesforceFixture()) async throws -> SalesforceServer {
        try await LoopbackHTTP.serve("Salesforce") { http, port, task in SalesforceServer(fixture: fixture, port: port, http: http, task: task) }
    }

    private init(fixture: SalesforceFixture, port: UInt16, http: HTTPServer, task: Task<Void, any Error>) {
        let root = "http://127.0.0.1:\(port)"
        let state = SalesforceState(fixture: fixture, root: root)
        url = URL(string: root)!
        version = state.newestVersion
        self.state = state
        self.http = http
        self.task = task
    }

    /// Stops the server.
    public func stop() async {
        await http.stop(timeout: 1)
        task?.cancel()
    }

    // MARK: - Sessions

    /// A valid access token for `user`, as an app that already holds one has it: the same one
    /// while it lasts, a new one after ``expireTokens()``.
    public func token(for user: String) -> String { state.sessions.token(for: user) }

    /// Ends every access token: requests with one get `401`
    /// `[{"message":"Session expired or invalid","errorCode":"INVALID_SESSION_ID"}]`. Refresh
    /// tokens still work.
    public func expireTokens() { state.sessions.expireAccessTokens() }

    /// Makes each refresh answer with a new refresh token, ending the one it took.
    public func rotateRefreshTokens() { state.sessions.rotatesRefreshTokens = true }

    // MARK: - The data, as an admin (Apex, the data loader) sees and changes it

    /// The live records of `object` by `Id`, each as JSON with every field of the describe in
    /// order (nulls kept, no `attributes`; a base64 field as the URL of its bytes).
    public func records(_ object: String) -> [String: Data] {
        guard let schema = state.store.schema(object) else { return [:] }
        var records: [String: Data] = [:]
        for row in state.store.rows(schema.name) {
            records[row.id] = JSON.object(state.store.render(schema, row.id, row.fields, version: version, attributes: false)).data
        }
        return records
    }

    /// The bytes the org keeps in base64 field `field` (`Body`, `VersionData`) of the live record
    /// `id` of `object`; nil when it holds none.
    public func blob(_ object: String, _ id: String, _ field: String) -> Data? {
        guard let schema = state.store.schema(object), let id = SalesforceID.canonical(id), let field = schema.field(field),
            let record = state.store.record(schema.name, id), record.deletedAt == nil
        else { return nil }
        return state.store.blob(id, field.name)
    }

    /// Creates (or replaces) a record from its JSON with no validation and no rules: `id`, else
    /// the JSON's `Id`, else a new 18-character id with the object's key prefix; stamps
    /// `CreatedDate`, `LastModifiedDate` and `SystemModstamp`. A base64 field's value is its
    /// bytes in base64. Returns the id ("" for an object the org lacks).
    @discardableResult
    public func insert(_ object: String, _ json: Data, id: String? = nil) -> String {
        state.store.adminInsert(object, JSON.parse(json)?.object ?? [:], id: id, keepStamps: false)
    }

    /// Changes a record with no validation and no rules: absent fields untouched, null clears
    /// one; bumps `LastModifiedDate` and `SystemModstamp`. A missing record stays missing.
    public func update(_ object: String, _ id: String, _ json: Data) {
        state.store.adminUpdate(object, id, JSON.parse(json)?.object ?? [:])
    }

    /// Deletes a record: it leaves queries (`queryAll` still shows it, `IsDeleted` true) and goes
    /// to the delete log `getDeleted` reads, with the clock's time as its `deletedDate`.
    public func delete(_ object: String, _ id: String) {
        guard let schema = state.store.schema(object), let id = SalesforceID.canonical(id) else { return }
        state.store.markDeleted(schema.name, id)
    }

    // MARK: - Behaviour

    /// While set (`2024-05-01T10:00:00.000+0000`, or any ISO 8601 time with a zone), the clock
    /// stands at this time: every write stamps it, to the second. Nil: the real clock again
    /// (moved by what ``advanceClock(seconds:)`` added).
    public func freezeClock(_ iso: String?) { state.store.clock.frozen = iso.flatMap(SalesforceTime.parse) }

    /// Moves the server's clock (a frozen one too): the stamps of later writes, the HTTP `Date`
    /// header, and what `getDeleted`'s windows are measured against.
    public func advanceClock(seconds: Int) { state.store.clock.advance(seconds: seconds) }

    /// Sets how many records a query page holds before `nextRecordsUrl` (default 2000).
    public func setQueryPageSize(_ n: Int) { state.pageSize = max(1, n) }

    /// While true, every answer carries two `Date` fields: the real clock's, then the server's.
    public func setDateSentTwice(_ on: Bool) { state.dateSentTwice = on }

    /// While true, `getDeleted` answers `INVALID_REPLICATION_DATE` for any start: the delete log
    /// no longer covers it.
    public func setDeletedWindowExpired(_ expired: Bool) { state.deletedWindowExpired = expired }

    /// Forgets every open query's locator, as an org does after its time (15 minutes idle, or
    /// two days): a `nextRecordsUrl` handed out before answers `INVALID_QUERY_LOCATOR`.
    public func expireQueryLocators() { state.cursors = [:] }

    /// Marks `object`'s describe as changed: its `Last-Modified` moves on, so the next
    /// `If-Modified-Since` gets `200`, not `304`.
    public func touchDescribe(_ object: String) { state.touchDescribe(object) }

    /// Deletes a field of `object`, as an org's admin does: it leaves describe (which says it
    /// changed) and its values are no longer served.
    public func removeField(_ object: String, _ field: String) {
        state.store.removeField(object, field)
        state.touchDescribe(object)
    }

    /// Adds a validation rule / trigger that rejects some creates, updates or deletes.
    public func addRule(_ rule: SalesforceFixture.Rule) { state.rules.append(rule) }
    /// Removes every rule (the fixture's too).
    public func clearRules() { state.rules.removeAll() }

    /// Answers the next `method` request whose path starts with `pathPrefix` — after `skipping`
    /// such requests, answered as usual — with `status` and `body` instead (for malformed-answer
    /// tests). The request is still logged, and not acted on.
    public func sabotageNext(_ method: String, _ pathPrefix: String, skipping: Int = 0, status: Int = 200, body: Data) {
        state.sabotage.append((method, pathPrefix, max(0, skipping), status, body))
    }

    // MARK: - HTTP

    public func handle(_ request: HTTPRequest) async -> HTTPResponse {
        let body = (try? await request.bodyData) ?? Data()
        var headers: [String: String] = [:]
        for (name, value) in request.headers {
            let key = name.rawValue.lowercased()
            headers[key] = headers[key].map { "\($0), \(value)" } ?? value
        }
        let logged = Request(
            method: request.method.rawValue, path: request.path, query: Self.decodeQuery(request.target.query()), headers: headers,
            body: body)
        state.requests.append(logged)
        var answer: Answer
        let index = state.sabotage.firstIndex { $0.method == logged.method && logged.path.hasPrefix($0.prefix) }
        if let index, state.sabotage[index].skip == 0 {
            let sabotage = state.sabotage.remove(at: index)
            answer = Answer(status: sabotage.status, body: sabotage.body)
        } else {
            if let index { state.sabotage[index].skip -= 1 }
            answer = state.route(logged)
        }
        answer.headers["Date"] = SalesforceTime.httpDate(state.store.clock.now())
        var response = FlyingFox.HTTPHeaders()
        if !answer.contentType.isEmpty { response.addValue(answer.contentType, for: HTTPHeader("Content-Type")) }
        if state.dateSentTwice { response.addValue(SalesforceTime.httpDate(SalesforceTime.now()), for: HTTPHeader("Date")) }
        for (name, value) in answer.headers { response.addValue(value, for: HTTPHeader(name)) }
        return HTTPResponse(
            statusCode: HTTPStatusCode(answer.status, phrase: Self.phrase(answer.status)), headers: response,
            body: logged.method == "HEAD" ? Data() : answer.body)
    }

    private static func phrase(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 201: "Created"
        case 204: "No Content"
        case 300: "Multiple Choices"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 415: "Unsupported Media Type"
        default: status < 400 ? "OK" : "Error"
        }
    }

    /// A query string's (or form body's) parameters as a servlet reads them: `+` is a space,
    /// then percent-decoding.
    static func decodeQuery(_ raw: String) -> [String: String] {
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
