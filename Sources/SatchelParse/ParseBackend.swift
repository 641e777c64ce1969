public import Foundation
public import Satchel
public import SatchelSync

/// A Parse Server (https://parseplatform.org), spoken to over its REST API.
///
/// Point it at the server's mount (`http://host:1337/parse`) with the app's application id (and
/// REST key, when the server has one); each model syncs with the Parse class of the same name,
/// and `objectId` is the object's id.
///
/// ```swift
/// let backend = ParseBackend(url: URL(string: "http://127.0.0.1:1337/parse")!, applicationID: "shop", restKey: "k")
/// let engine = SyncEngine(store: store, backend: backend)
/// try await engine.logIn(Credentials(user: "ann", password: "s3cret"))
/// try await engine.sync()
/// ```
///
/// What it maps:
/// - **Login**: `POST /login`; the session token is the stored session. A `209` answer (an
///   invalid or expired token) drops it: the sync fails with ``SyncError/Code/unauthorized``, and
///   nothing is lost; logging in again resumes where it stopped.
/// - **Pull**: `GET /classes/C` with `order=updatedAt,objectId`, paged by a keyset on
///   `(updatedAt, objectId)` — objects sharing one `updatedAt` (a bulk write stamps them all with
///   one millisecond) are neither lost nor repeated across pages, and a server that returns
///   fewer rows than `limit` (its `maxLimit`) is followed until an empty page. The model's
///   ``ModelSyncConfiguration/serverFilter`` is and-ed into the `where`,
///   ``ModelSyncConfiguration/onlyAttributes`` become `keys` and
///   ``ModelSyncConfiguration/ignoredAttributes`` `excludeKeys`; a first pull with a
///   ``ModelSyncConfiguration/fetchLimit`` takes the first objects in
///   ``ModelSyncConfiguration/fetchOrder`` (then by `objectId`), later pulls the changes since.
/// - **Values**: see ``ParseMapping``.
/// - **Push**: `POST /batch`, at most ``Configuration/batchSize`` requests each. Creates get the
///   server's `objectId`, which replaces the local id everywhere; the engine pushes parents
///   before the objects that point to them. Updates send the changed attributes, a removed one as
///   `{"__op":"Delete"}`. A `101` on a delete means done. Other per-request errors (`111`, `137`,
///   `141`, `142`…) are refused changes with Parse's code and message; `1`, `100` and `124` are sent
///   again next time.
/// - **Deletes**: Parse keeps no tombstones. After every pull the adapter lists the class's ids
///   (`keys=objectId`, keyset-paged) and the engine deletes the objects the server no longer has,
///   keeping local creates not yet pushed.
/// - **Errors**: a `429`, or code `1` or `124` for the whole call, is retried with backoff; a
///   `403` (a wrong application id or REST key) is a one-line error.
/// - **Cloud functions** (CRParse's fetch path): ``call(function:parameters:session:)``; store
///   the answer as an object graph with `Store.importGraph`.
public final class ParseBackend: SyncBackend {
    /// Where the server is and how to talk to it.
    public struct Configuration: Sendable {
        /// The server's mount, e.g. `http://host:1337/parse`.
        public var url: URL
        /// `X-Parse-Application-Id`.
        public var applicationID: String
        /// `X-Parse-REST-API-Key`, when the server checks one.
        public var restKey: String?
        /// Requests per `POST /batch` (Parse's hosted limit was 50).
        public var batchSize: Int
        /// Seconds to wait for an answer.
        public var timeout: TimeInterval
        /// How a create whose answer was lost is kept from making a second object when it is
        /// sent again (``CreateProtection``; request ids by default).
        public var createProtection: CreateProtection
        /// With ``CreateProtection/requestIDs``, how many creates are under way at once (each is
        /// its own request).
        public var createConcurrency: Int
        /// Pointer attributes to pull whole, per model (Parse's `include`): each pointed-to
        /// object is stored in the model of its class, and the attribute keeps its id.
        public var includes: [String: [String]]
        /// Whether plain `http://` may go to a host other than this machine (off by default:
        /// credentials, sessions and data would cross the network unencrypted; loopback is
        /// always allowed).
        public var allowInsecureHTTP = false
        /// How much of a server's answer is read before the sync fails (see ``AnswerLimits``).
        public var limits = AnswerLimits()

        public init(
            url: URL, applicationID: String, restKey: String? = nil, batchSize: Int = 50, timeout: TimeInterval = 60,
            createProtection: CreateProtection = .requestIDs, createConcurrency: Int = 8, includes: [String: [String]] = [:]
        ) {
            self.includes = includes
            self.url = url
            self.applicationID = applicationID
            self.restKey = restKey
            self.batchSize = max(1, batchSize)
            self.timeout = timeout
            self.createProtection = createProtection
            self.createConcurrency = max(1, createConcurrency)
        }
    }

    public let configuration: Configuration
    let http: SyncHTTPClient

    public init(configuration: Configuration) {
        self.configuration = configuration
        http = SyncHTTPClient(timeout: configuration.timeout, limits: configuration.limits, allowInsecureHTTP: configuration.allowInsecureHTTP)
    }

    /// An adapter for the server mounted at `url`.
    public convenience init(url: URL, applicationID: String, restKey: String? = nil) {
        self.init(configuration: Configuration(url: url, applicationID: applicationID, restKey: restKey))
    }

    public var name: String { "parse" }

    /// Deletions are found by listing ids; the server searches (`where`); a batch holds at most
    /// ``Configuration/batchSize`` requests; a page is a query, which moves nothing on the
    /// server (pulls ahead).
    public var capabilities: SyncCapabilities {
        SyncCapabilities(
            deletions: .byListingIDs, search: true, maxPushBatch: configuration.batchSize, pullsAhead: true, serverAttributes: Self.stamps)
    }

    /// The attributes Parse stamps on every object, pulled and kept whatever an `onlyList`
    /// says, never pushed; `updatedAt` also pages the pull.
    static let stamps = ["createdAt", "updatedAt"]

    /// The session's token (`X-Parse-Session-Token`).
    static let tokenKey = "sessionToken"

    // MARK: - Log in

    public func logIn(_ credentials: Credentials) async throws -> SyncSession {
        let body: JSONObject = ["username": .string(credentials.user), "password": .string(credentials.password)]
        let answer = try await send("POST", try endpoint("login"), body: body, session: nil, what: "login")
        if answer.status == 404 || Self.code(answer) == 101 {
            throw SyncError(.unauthorized, "login: Parse did not accept the user name and password of \(credentials.user)", httpStatus: answer.status)
        }
        try check(answer, "login")
        let user = try answer.json("login")
        guard let token = user["sessionToken"]?.stringValue, !token.isEmpty else {
            throw SyncError(.protocolViolation, "login: the answer has no session token")
        }
        var data: JSONObject = [Self.tokenKey: .string(token)]
        if let id = user["objectId"]?.stringValue { data["userID"] = .string(id) }
        return SyncSession(user: credentials.user, data: data)
    }

    /// `POST /logout`: the server deletes the session. A token it no longer knows is fine.
    public func logOut(_ session: SyncSession) async throws {
        guard session.data[Self.tokenKey] != nil else { return }
        let answer = try await send("POST", try endpoint("logout"), body: JSONObject(), session: session, what: "logout")
        if Self.code(answer) == 209 { return }
        try check(answer, "logout")
    }

    /// A session whose token was dropped (a `209`) cannot sync until the user logs in again.
    public func prepare(_ session: SyncSession) async throws -> SyncSession {
        guard session.data[Self.tokenKey]?.stringValue != nil else {
            throw SyncError(.notLoggedIn, "Parse needs a session: log in again (satchel sync: pass --user and --password)")
        }
        return session
    }

    // MARK: - Pull

    /// Where a pull stands: the `(updatedAt, objectId)` of the last object applied.
    struct Cursor: Equatable {
        var updatedAt: String
        var objectID: String

        init(updatedAt: String, objectID: String) {
            self.updatedAt = updatedAt
            self.objectID = objectID
        }

        init?(_ value: JSONValue?) {
            guard let updatedAt = value?["updatedAt"]?.stringValue, let id = value?["objectId"]?.stringValue else { return nil }
            self.init(updatedAt: updatedAt, objectID: id)
        }

        var json: JSONValue { ["updatedAt": .string(updatedAt), "objectId": .string(objectID)] }

        /// The objects after this one in `(updatedAt, objectId)` order.
        var after: JSONValue {
            let date: JSONValue = ["__type": "Date", "iso": .string(updatedAt)]
            return ["$or": [["updatedAt": ["$gt": date]], ["updatedAt": date, "objectId": ["$gt": .string(objectID)]]]]
        }
    }

    public func pull(_ request: PullRequest) async throws -> PullPage {
        let what = "pull of \(request.model.name)"
        let cursor = Cursor(request.cursor)
        if request.cursor != nil && cursor == nil {
            throw SyncError(.protocolViolation, "\(what): the stored cursor is not a Parse cursor (\(request.cursor!)); a full sync starts over")
        }
        let model = request.configuration
        // A first pull with a fetch limit takes the first objects in the fetch order, at once.
        let limited = cursor == nil && model.fetchLimit != nil
        var query: [(String, String)] = []
        var conditions: [JSONValue] = []
        if let filter = model.serverFilter { conditions.append(.object(filter)) }
        if let cursor { conditions.append(cursor.after) }
        if let condition = Self.and(conditions) { query.append(("where", Self.text(condition))) }
        if limited {
            let keys = model.fetchOrder.map { ($0.descending ? "-" : "") + $0.field.description } + ["objectId"]
            query.append(("order", keys.joined(separator: ",")))
            query.append(("limit", String(max(1, model.fetchLimit!))))
        } else {
            query.append(("order", "updatedAt,objectId"))
            query.append(("limit", String(max(1, request.pageSize))))
        }
        query += Self.keys(model)
        if let includes = configuration.includes[request.model.name], !includes.isEmpty { query.append(("include", includes.joined(separator: ","))) }
        // A pull from the start asks for the class's count (its `where` is the filter alone): the
        // total the notifications show. A later page's `where` holds the cursor, so its count
        // would be the rest, not the total: none is asked.
        if cursor == nil { query.append(("count", "1")) }
        let answer = try await send(
            "GET", try endpoint("classes/\(SyncHTTPClient.escape(request.model.name))", query), session: request.session, what: what)
        try check(answer, what)
        return try pullPage(answer, after: request.cursor, limited: limited, metadata: request.metadata, what: what)
    }

    /// A query's results in the engine's terms: objects as upserts (objects nested in them as
    /// related ones), the wire types seen, and the cursor past them. The rows must follow
    /// `cursor` in `(updatedAt, objectId)` order unless the pull is a `limited` first one, which
    /// is done at once. Package-visible so that the fuzz targets read answers through the code a
    /// pull runs.
    ///
    /// - Throws: ``SyncError`` `.protocolViolation` for an answer without a `results` list, an
    ///   object without a string `objectId` and `updatedAt`, or rows out of order.
    package func pullPage(
        _ answer: SyncHTTPClient.Response, after cursor: JSONValue?, limited: Bool, metadata: JSONValue?, what: String
    ) throws(SyncError) -> PullPage {
        let cursor = Cursor(cursor)
        let results = try Self.results(answer, what)
        var page = PullPage()
        if let count = try answer.json(what)["count"] {
            guard let total = count.intValue, total >= 0 else { throw SyncError(.protocolViolation, "\(what): the count is not a count (\(count))") }
            page.totalCount = Int(total)
        }
        var types = ParseMapping.WireTypes(metadata: metadata)
        let known = types
        var last = cursor
        for value in results {
            guard let decoded = ParseMapping.decode(value) else {
                throw SyncError(.protocolViolation, "\(what): an object without a string `objectId` and `updatedAt`")
            }
            // The cursor orders dates as text: one that is not Parse's would stop every later pull.
            guard Self.isDate(decoded.updatedAt) else {
                throw SyncError(
                    .protocolViolation,
                    "\(what): object \(decoded.object.id)'s `updatedAt` is not a Parse date (YYYY-MM-DDTHH:MM:SS.sssZ)")
            }
            page.upserts.append(decoded.object)
            types.types.merge(decoded.types) { _, new in new }
            // A value sent without a wire type where one was remembered: the server's schema
            // changed the field (Parse holds one type per field), so it goes back plain.
            for (attribute, _) in decoded.object.attributes where decoded.types[attribute] == nil && types.types[attribute] != nil {
                // A Pointer no longer: not an association either (a black-box probe: edits went
                // as Pointers, refused with 111).
                if types.types[attribute]?.target != nil, !page.schema.associationsGone.contains(attribute) {
                    page.schema.associationsGone.append(attribute)
                }
                types.types[attribute] = nil
            }
            for (attribute, type) in decoded.types {
                if let target = type.target { page.schema.associations[attribute] = target }
                if type == .file, !page.schema.blobAttributes.contains(attribute) { page.schema.blobAttributes.append(attribute) }
            }
            for (model, objects) in decoded.related { page.related[model, default: []] += objects }
            let position = Cursor(updatedAt: decoded.updatedAt, objectID: decoded.object.id)
            if limited {
                if last == nil || Self.precedes(last!, position) { last = position }
            } else {
                // Rows come in keyset order; one out of it would make the next page skip rows.
                if let last, !Self.precedes(last, position) {
                    throw SyncError(
                        .protocolViolation, "\(what): the server did not sort by updatedAt, objectId (\(position.objectID) after \(last.objectID))")
                }
                last = position
            }
        }
        if types != known { page.metadata = types.metadata }
        page.nextCursor = last?.json
        // Only an empty page ends a pull: a server with a `maxLimit` sends fewer rows than asked.
        page.done = limited || results.isEmpty
        return page
    }

    /// Whether `text` is a date as Parse Server sends one (`2026-01-31T09:05:00.000Z`: UTC,
    /// milliseconds), the only form whose text order is its time order.
    static func isDate(_ text: String) -> Bool {
        let pattern = Array("0000-00-00T00:00:00.000Z".utf8)
        let bytes = Array(text.utf8)
        guard bytes.count == pattern.count else { return false }
        for (byte, expected) in zip(bytes, pattern) {
            if expected == UInt8(ascii: "0") ? !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) : byte != expected { return false }
        }
        return true
    }

    /// Whether `a` comes before `b` in `(updatedAt, objectId)` order. Parse's dates are ISO
    /// strings of one width (UTC, milliseconds), so they order as text.
    static func precedes(_ a: Cursor, _ b: Cursor) -> Bool {
        a.updatedAt != b.updatedAt ? a.updatedAt < b.updatedAt : a.objectID < b.objectID
    }

    /// `keys` for an attribute list, `excludeKeys` for ignored attributes.
    static func keys(_ configuration: ModelSyncConfiguration) -> [(String, String)] {
        var query: [(String, String)] = []
        if let only = configuration.onlyAttributes {
            query.append(("keys", (only + stamps.filter { !only.contains($0) }).joined(separator: ",")))
        }
        if !configuration.ignoredAttributes.isEmpty { query.append(("excludeKeys", configuration.ignoredAttributes.joined(separator: ","))) }
        return query
    }

    /// Every id the server holds for the model (matching its server filter), by `objectId`
    /// keyset pages.
    public func remoteIDs(_ request: PullRequest) async throws -> [String] {
        let filter = request.configuration.serverFilter.map(JSONValue.object)
        let what = "listing the ids of \(request.model.name)"
        return try await list(
            request.model.name, where: filter, keys: "objectId", limit: max(1000, request.pageSize), session: request.session, what: what
        )
        .map { $0.id }
    }

    /// Every object of `model` matching `condition` — its `objectId` and the fields `keys` names
    /// — in `objectId` order, paged by `objectId > last` (the server may clamp `limit`: only an
    /// empty page ends the listing).
    func list(_ model: String, where condition: JSONValue?, keys: String, limit: Int, session: SyncSession, what: String) async throws
        -> [(id: String, fields: JSONValue)]
    {
        var listed: [(id: String, fields: JSONValue)] = []
        while true {
            var conditions = condition.map { [$0] } ?? []
            if let last = listed.last?.id { conditions.append(["objectId": ["$gt": .string(last)]]) }
            var query: [(String, String)] = []
            if let all = Self.and(conditions) { query.append(("where", Self.text(all))) }
            query += [("keys", keys), ("order", "objectId"), ("limit", String(limit))]
            let answer = try await send("GET", try endpoint("classes/\(SyncHTTPClient.escape(model))", query), session: session, what: what)
            try check(answer, what)
            let results = try Self.results(answer, what)
            if results.isEmpty { return listed }
            for value in results {
                guard let id = value["objectId"]?.stringValue else { throw SyncError(.protocolViolation, "\(what): a result without an `objectId`") }
                if let last = listed.last?.id, id <= last { throw SyncError(.protocolViolation, "\(what): the server did not sort by objectId") }
                listed.append((id, value))
            }
        }
    }

    // MARK: - Files and cloud functions

    /// Uploads a file (`POST /files/NAME`); returns the name and URL the server gave it.
    func upload(_ data: Data, name: String, session: SyncSession) async throws -> (name: String, url: String) {
        let what = "uploading the file \(name)"
        let answer = try await send(
            "POST", try endpoint("files/\(SyncHTTPClient.escape(name))"), raw: data, contentType: "application/octet-stream", session: session,
            what: what)
        try check(answer, what)
        let body = try answer.json(what)
        guard let stored = body["name"]?.stringValue, let url = body["url"]?.stringValue else {
            throw SyncError(.protocolViolation, "\(what): the answer has no `name` and `url`")
        }
        return (stored, url)
    }

    /// A file's bytes, from its URL. Files are served without the app's headers too, and those
    /// go only to the server's own origin: a file on another host (a CDN, S3) never sees the
    /// session token or the REST key.
    public func downloadBlob(_ url: String, session: SyncSession) async throws -> Data {
        guard let target = URL(string: url), target.scheme == "http" || target.scheme == "https", target.host != nil else {
            throw SyncError(.protocolViolation, "file download: '\(url)' is not a URL")
        }
        let limit = configuration.limits.maximumDownloadBytes
        if SyncHTTPClient.sameOrigin(target, configuration.url) {
            let answer = try await send("GET", target, session: session, what: "file download", maximumBytes: limit)
            try check(answer, "file download")
            return answer.body
        }
        // Another host's answer is not Parse's (a 403 from a file store is no refused key).
        let answer = try await http.send("GET", target, maximumBytes: limit)
        guard (200..<300).contains(answer.status) else {
            throw SyncError(.server, "file download from \(target.host ?? "its host") failed with HTTP \(answer.status)", httpStatus: answer.status)
                .at(target.path)
        }
        return answer.body
    }

    /// Runs the cloud function `function` (`POST /functions/NAME`) and returns its `result`:
    /// CRParse's fetch path. Store an object graph it answers with `Store.importGraph`.
    public func call(function: String, parameters: JSONObject = JSONObject(), session: SyncSession? = nil) async throws -> JSONValue {
        let what = "cloud function \(function)"
        let answer = try await send(
            "POST", try endpoint("functions/\(SyncHTTPClient.escape(function))"), body: parameters, session: session, what: what)
        try check(answer, what)
        guard let result = try answer.json(what)["result"] else { throw SyncError(.protocolViolation, "\(what): the answer has no `result`") }
        return result
    }

    // MARK: - HTTP

    func endpoint(_ path: String, _ query: [(String, String)] = []) throws(SyncError) -> URL {
        try SyncHTTPClient.url(configuration.url, path, query)
    }

    /// Sends a request with the app's headers and the session's token.
    /// A write carries its `requestID` as `X-Parse-Request-Id` (see ``CreateProtection``).
    func send(
        _ method: String, _ url: URL, body: JSONObject? = nil, raw: Data? = nil, contentType: String? = nil, session: SyncSession?, what: String,
        maximumBytes: Int? = nil, requestID: String? = nil
    ) async throws(SyncError) -> SyncHTTPClient.Response {
        var headers = ["X-Parse-Application-Id": configuration.applicationID]
        if let requestID { headers["X-Parse-Request-Id"] = requestID }
        if let key = configuration.restKey { headers["X-Parse-REST-API-Key"] = key }
        if let token = session?.data[Self.tokenKey]?.stringValue { headers["X-Parse-Session-Token"] = token }
        if let contentType { headers["Content-Type"] = contentType }
        return try await http.send(method, url, headers: headers, body: raw ?? body.map { Data($0.jsonBytes) }, maximumBytes: maximumBytes)
    }

    /// Throws the error an answer other than 2xx stands for.
    func check(_ answer: SyncHTTPClient.Response, _ what: String) throws(SyncError) {
        do throws(SyncError) { try checkStatus(answer, what) } catch { throw error.at(answer.url.path) }
    }

    func checkStatus(_ answer: SyncHTTPClient.Response, _ what: String) throws(SyncError) {
        guard !(200..<300).contains(answer.status) else { return }
        let body = try? answer.json("")
        let code = body?["code"]?.intValue
        let message = body?["error"]?.stringValue ?? body?["message"]?.stringValue ?? answer.text
        let detail = message.isEmpty ? "" : ": \(message)"
        switch (answer.status, code) {
        case (_, 209?):
            throw SyncError(
                .unauthorized, "\(what): Parse refused the session (code 209\(detail)): log in again (satchel sync: pass --user and --password)",
                httpStatus: answer.status)
        case (403, nil):
            throw SyncError(.server, "\(what): Parse refused the application id or REST key\(detail)", httpStatus: 403)
        case (429, _), (_, 1?), (_, 124?):
            // Too many requests, an internal error or a timeout: worth trying again.
            throw SyncError(
                .server, "\(what) failed with HTTP \(answer.status)\(code.map { " (code \($0))" } ?? "")\(detail)",
                httpStatus: answer.status == 429 || answer.status >= 500 ? answer.status : 503, retryAfter: answer.retryAfter)
        default:
            throw SyncError(
                .server, "\(what) failed with HTTP \(answer.status)\(code.map { " (code \($0))" } ?? "")\(detail)", httpStatus: answer.status,
                retryAfter: answer.retryAfter)
        }
    }

    /// The Parse error code of an answer's body.
    static func code(_ answer: SyncHTTPClient.Response) -> Int64? { (try? answer.json(""))?["code"]?.intValue }

    /// The `results` list of a query's answer.
    static func results(_ answer: SyncHTTPClient.Response, _ what: String) throws(SyncError) -> [JSONValue] {
        guard let results = try answer.json(what)["results"]?.arrayValue else {
            throw SyncError(.protocolViolation, "\(what): the answer has no `results` list")
        }
        return results
    }

    /// The conditions and-ed (nil for none).
    static func and(_ conditions: [JSONValue]) -> JSONValue? {
        switch conditions.count {
        case 0: nil
        case 1: conditions[0]
        default: ["$and": .array(conditions)]
        }
    }

    static func text(_ value: JSONValue) -> String { String(decoding: value.jsonBytes, as: UTF8.self) }
}
