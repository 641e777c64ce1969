public import Foundation
package import Satchel
public import SatchelSync
import Synchronization

/// A Salesforce org, spoken to over its REST API (after MM_RSF, the Model Metrics REST
/// Salesforce Framework).
///
/// Point it at the org's instance root (`https://mydomain.my.salesforce.com`); each model syncs
/// with the sObject of the same name, and `Id` is the object's id. Log in with a user name and
/// password (OAuth's password grant), or hand the engine a session for an access token the app
/// already holds (``session(accessToken:refreshToken:)``, `satchel sync --token`).
///
/// ```swift
/// let backend = SalesforceBackend(url: URL(string: "https://acme.my.salesforce.com")!)
/// let engine = SyncEngine(store: store, backend: backend)
/// try await engine.logIn(session: try await backend.session(accessToken: token))
/// try await engine.configure("Account", try ModelSyncConfiguration(syncObject: ["filter": "Industry = 'Energy'"]))
/// try await engine.sync()
/// ```
///
/// What it maps:
/// - **Versions**: the highest version `GET /services/data/` lists.
/// - **Metadata**: `describe` of each object before its pull (with `If-Modified-Since`: a `304`
///   keeps the stored one), stored as the model's server metadata. Reference fields become
///   associations, `base64` fields blob attributes, picklists the model's choices (dependent
///   ones decoded from `validFor`), so a local write of a value the server would refuse is
///   refused before it is queued. Fields neither createable nor updateable are never pushed.
/// - **Pull**: SOQL `SELECT <fields> FROM O WHERE LastModifiedDate >= T [AND (filter)] ORDER BY
///   LastModifiedDate, Id`, following `nextRecordsUrl`. `T` is the greatest `LastModifiedDate`
///   received (the server's time, never the device's); records at `T` that were applied already
///   (same id, same content; the cursor remembers up to 1,000 of them) are skipped, so many
///   records sharing one second are never lost, and applied again only past the first 1,000
///   (which writes nothing: the store holds them as they came). A first pull with a fetch limit is `ORDER BY <fetch order> LIMIT N`.
/// - **Deletes**: `getDeleted` from the server time of the first pull, then from each answer's
///   `latestDateCovered` (a sync less than a minute after the last skips it). When the window is
///   gone, the page asks the engine to reconcile ids (`SELECT Id FROM O`).
/// - **Push**: `/composite/sobjects` (POST creates, PATCH updates, DELETE by ids), at most 200
///   records a call, `allOrNone: false`; creates carry createable fields only, updates updateable
///   ones, a removed attribute as `null`; a `base64` field's local blob as its bytes, base64 in
///   the JSON (at most ``Configuration/maximumBase64PerRequest`` a call). Per-refused changes are
///   refused changes with the `statusCode`; `ENTITY_IS_DELETED` on a delete counts as done.
/// - **Totals**: a pull's `totalCount` is the query's `totalSize` while the query selects every
///   record of the object (no `LastModifiedDate` bound, no fetch limit); none otherwise.
/// - **Auth**: `Authorization: Bearer`; a `401` (`INVALID_SESSION_ID`) refreshes the token once
///   when the session has a refresh token, otherwise fails the sync with ``SyncError/Code/unauthorized``.
public final class SalesforceBackend: SyncBackend {
    /// Where the org is and how to talk to it.
    public struct Configuration: Sendable {
        /// The instance root, e.g. `https://acme.my.salesforce.com`.
        public var url: URL
        /// Where OAuth tokens come from (`/services/oauth2/token` under it); by default the
        /// instance root.
        public var loginURL: URL?
        /// The connected app's consumer key and secret, sent with token requests.
        public var clientID: String?
        public var clientSecret: String?
        /// Seconds to wait for an answer.
        public var timeout: TimeInterval
        /// An external-id field against lost create answers, used only on objects whose describe
        /// lists it createable — an org opts in by adding it (nil: never). A create carries the
        /// object's own value of it, or its local id when it has none; before creates are sent,
        /// records holding those values are looked for, and one found is updated instead of a
        /// second being made. The field is an ordinary attribute: on the org and, pulled, in the
        /// store alike. Without it, a create whose answer was lost makes a second record.
        public var clientIDField: String?
        /// Whether plain `http://` may go to a host other than this machine (off by default:
        /// credentials, sessions and data would cross the network unencrypted; loopback is
        /// always allowed).
        public var allowInsecureHTTP = false
        /// How much of a server's answer is read before the sync fails (see ``AnswerLimits``).
        public var limits = AnswerLimits()
        /// The most base64 text (blob bytes of `base64` fields) one push request carries in its
        /// JSON body: Salesforce takes at most 37.5 MB of base64 in a body that is not
        /// multipart. Records are sent in as many calls as it takes; a record whose blobs alone
        /// pass it is refused here (`BLOB_TOO_LARGE`), never sent.
        public var maximumBase64PerRequest = 37_500_000

        public init(
            url: URL, loginURL: URL? = nil, clientID: String? = nil, clientSecret: String? = nil, timeout: TimeInterval = 60,
            clientIDField: String? = "Satchel_Client_ID__c"
        ) {
            self.url = url
            self.loginURL = loginURL
            self.clientID = clientID
            self.clientSecret = clientSecret
            self.timeout = timeout
            self.clientIDField = clientIDField
        }
    }

    private struct State {
        /// The API version path, `/services/data/v59.0`, once known.
        var versionPath: String?
        /// Access tokens refreshed in this process: stale token → new one.
        var refreshed: [String: String] = [:]
        /// Refresh token → the one the org gave in its place (an org that rotates them).
        var rotated: [String: String] = [:]
        /// Describes read in this process, by object.
        var describes: [String: SalesforceDescribe] = [:]
        /// The stored describe last decoded for a pull's next page, by object, with its JSON:
        /// the pages of one query bring the same stored JSON, decoded once (a real org's
        /// describe lists every field, with its picklist values).
        var decoded: [String: (json: JSONValue, describe: SalesforceDescribe)] = [:]
    }

    public let configuration: Configuration
    let http: SyncHTTPClient
    private let state = Locked(State())

    public init(configuration: Configuration) {
        self.configuration = configuration
        http = SyncHTTPClient(timeout: configuration.timeout, limits: configuration.limits, allowInsecureHTTP: configuration.allowInsecureHTTP)
    }

    /// An adapter for the org at `url`.
    public convenience init(url: URL) { self.init(configuration: Configuration(url: url)) }

    public var name: String { "salesforce" }

    /// Deletions come from `getDeleted` (in pages); composite calls hold at most 200 records; a
    /// page is a query or its `nextRecordsUrl`, which moves nothing on the org (pulls ahead).
    public var capabilities: SyncCapabilities {
        SyncCapabilities(
            deletions: .inPages, search: true, maxPushBatch: 200, pullsAhead: true, soqlFilters: true, serverAttributes: ["LastModifiedDate"])
    }

    static let tokenKey = "accessToken"
    static let refreshKey = "refreshToken"

    // MARK: - Sessions

    /// OAuth's password grant (`grant_type=password`).
    public func logIn(_ credentials: Credentials) async throws -> SyncSession {
        var form = [("grant_type", "password"), ("username", credentials.user), ("password", credentials.password)]
        if let id = configuration.clientID { form.append(("client_id", id)) }
        if let secret = configuration.clientSecret { form.append(("client_secret", secret)) }
        let answer = try await tokenRequest(form, what: "login")
        if answer.status == 400 || answer.status == 401 {
            throw SyncError(
                .unauthorized, "login: Salesforce did not accept the user name and password of \(credentials.user)", httpStatus: answer.status)
        }
        try check(answer, "login")
        let body = try answer.json("login")
        guard let token = body["access_token"]?.stringValue, !token.isEmpty else {
            throw SyncError(.protocolViolation, "login: the answer has no access_token")
        }
        var data: JSONObject = [Self.tokenKey: .string(token)]
        if let refresh = body["refresh_token"]?.stringValue { data[Self.refreshKey] = .string(refresh) }
        return SyncSession(user: credentials.user, data: data)
    }

    /// A session for an access token the app already holds (and its refresh token, if any),
    /// named after the user the token belongs to (`/services/oauth2/userinfo`'s
    /// `preferred_username`, the user name a password login names too). Store it with
    /// ``SyncEngine/logIn(session:)``.
    ///
    /// - Throws: ``SyncError`` `.unauthorized` when the org refuses the token; the error of any
    ///   other failed answer (a 503 is retryable), and `.protocolViolation` for an answer that
    ///   names no user name: a session named after no one, a placeholder, or the user's id (a
    ///   `user_id` alone), would be taken for another user's, whose login wipes the unpushed
    ///   changes.
    public func session(accessToken: String, refreshToken: String? = nil) async throws -> SyncSession {
        var data: JSONObject = [Self.tokenKey: .string(accessToken)]
        if let refreshToken { data[Self.refreshKey] = .string(refreshToken) }
        let probe = SyncSession(user: Self.tokenUser, data: data)
        let what = "reading the token's user"
        let answer = try await send("GET", try SyncHTTPClient.url(configuration.url, "services/oauth2/userinfo"), session: probe, what: what)
        if answer.status == 401 || answer.status == 403 {
            throw SyncError(
                .unauthorized, "\(what): Salesforce refused the access token: log in again (satchel sync: pass --token, or --user and --password)",
                httpStatus: answer.status)
        }
        // Whatever fails, or says no one, is this login's failure (black-box probes: a 503, a
        // 404 or an answer without a name made the user a placeholder, and the engine, taking it
        // for another user, wiped the unpushed changes).
        try check(answer, what)
        let info = try answer.json(what)
        // The user's name, as a password login names the session: an id alone (`user_id`) names
        // the same user otherwise, and would be taken for another (a black-box probe).
        guard let user = info["preferred_username"]?.stringValue, !user.isEmpty else {
            throw SyncError(.protocolViolation, "\(what): the answer names no user (no preferred_username): nothing was changed")
        }
        return SyncSession(user: user, data: data)
    }

    /// The user of the session that asks whose a token is, before the org says.
    static let tokenUser = "salesforce-token"

    /// Revokes the session's token (`POST /services/oauth2/revoke`, `token=` its refresh token
    /// when it has one, which ends its access tokens with it, else its access token); the engine
    /// forgets the session whatever the answer. A token the org does not know any more (400
    /// `invalid_token`) is revoked already. (A black-box probe: a logout said "logged out" and
    /// told the org nothing, the token still accepted.)
    ///
    /// - Throws: the error of an answer other than 2xx or 400, or of no answer, so that the
    ///   engine says the server was not told.
    public func logOut(_ session: SyncSession) async throws {
        guard let token = session.data[Self.refreshKey]?.stringValue ?? session.data[Self.tokenKey]?.stringValue else { return }
        let url = try SyncHTTPClient.url(configuration.loginURL ?? configuration.url, "services/oauth2/revoke")
        let body = "token=" + SyncHTTPClient.escape(token)
        let answer = try await http.send("POST", url, headers: ["Content-Type": "application/x-www-form-urlencoded"], body: Data(body.utf8))
        if answer.status == 400 { return }
        try check(answer, "logging out")
    }

    /// A token refreshed during the last cycle goes into the stored session.
    public func prepare(_ session: SyncSession) async throws -> SyncSession {
        guard session.data[Self.tokenKey]?.stringValue != nil else {
            throw SyncError(.notLoggedIn, "Salesforce needs an access token: log in again (satchel sync: pass --token, or --user and --password)")
        }
        return renewedSession(session)
    }

    /// `session` with the access token refreshed for its own, if one was, and the refresh token
    /// the org gave in place of its own, if it rotates them.
    public func renewedSession(_ session: SyncSession) -> SyncSession {
        var session = session
        state.withLock { state in
            if let token = session.data[Self.tokenKey]?.stringValue, let fresh = state.refreshed[token] {
                session.data[Self.tokenKey] = .string(fresh)
            }
            if let refresh = session.data[Self.refreshKey]?.stringValue, let next = state.rotated[refresh] {
                session.data[Self.refreshKey] = .string(next)
            }
        }
        return session
    }

    // MARK: - Metadata

    /// The describe of `object`: read again when the server says it changed since the stored
    /// one (`If-Modified-Since`), kept in memory for this process.
    func describe(_ object: String, stored metadata: JSONValue?, session: SyncSession) async throws -> (SalesforceDescribe, metadata: JSONValue?) {
        let what = "describing \(object)"
        let storedDescribe = metadata?["describe"].flatMap(SalesforceDescribe.init)
        var headers: [String: String] = [:]
        if storedDescribe != nil, let since = metadata?["lastModified"]?.stringValue { headers["If-Modified-Since"] = since }
        let answer = try await send(
            "GET", try api("sobjects/\(SyncHTTPClient.escape(object))/describe", session: session), headers: headers, session: session, what: what)
        if answer.status == 304, let storedDescribe {
            state.withLock { $0.describes[object] = storedDescribe }
            return (storedDescribe, nil)
        }
        try check(answer, what)
        let (describe, body) = try Self.readDescribe(answer, what: what)
        state.withLock { $0.describes[object] = describe }
        var stored: JSONObject = ["describe": body]
        if let modified = answer.header("last-modified") { stored["lastModified"] = .string(modified) }
        return (describe, .object(stored))
    }

    /// A describe answer, read, and its JSON (stored as the model's server metadata).
    /// Package-visible so that the fuzz targets read answers through the code a pull runs.
    ///
    /// - Throws: ``SyncError`` `.protocolViolation` for an answer that is not a describe.
    package static func readDescribe(_ answer: SyncHTTPClient.Response, what: String) throws(SyncError) -> (SalesforceDescribe, body: JSONValue) {
        let body = try answer.json(what)
        guard let describe = SalesforceDescribe(body) else { throw SyncError(.protocolViolation, "\(what): the answer is not a describe") }
        return (describe, body)
    }

    /// The describe while a query pages on: the stored one (decoded once while its JSON stays
    /// the same), or a fresh one.
    func describeForPull(_ request: PullRequest) async throws -> SalesforceDescribe {
        let object = request.model.name
        if let json = request.metadata?["describe"] {
            if let known = state.withLock({ $0.decoded[object] }), known.json == json { return known.describe }
            if let stored = SalesforceDescribe(json) {
                state.withLock { $0.decoded[object] = (json, stored) }
                return stored
            }
        }
        return try await describe(object, stored: nil, session: request.session).0
    }

    /// The object's reference fields, from its describe (kept for the push that follows).
    public func associations(_ request: PullRequest) async throws -> [String: String] {
        try await knownDescribe(request.model.name, metadata: request.metadata, session: request.session).associations
    }

    /// The describe for a push: the stored one, one read in this process, or a fresh one.
    func describeForPush(_ request: PushRequest) async throws -> SalesforceDescribe {
        try await knownDescribe(request.model.name, metadata: request.metadata, session: request.session)
    }

    /// `object`'s describe as this process read it, else as stored (`metadata`), else a fresh one.
    private func knownDescribe(_ object: String, metadata: JSONValue?, session: SyncSession) async throws -> SalesforceDescribe {
        if let known = state.withLock({ $0.describes[object] }) { return known }
        if let stored = metadata?["describe"].flatMap(SalesforceDescribe.init) { return stored }
        return try await describe(object, stored: nil, session: session).0
    }

    // MARK: - HTTP

    /// `/services/data/vXX.X/` + `path`: the highest version the org lists, asked once.
    func api(_ path: String, _ query: [(String, String)] = [], session: SyncSession) async throws -> URL {
        try SyncHTTPClient.url(configuration.url, String(try await versionPath(session).dropFirst()) + "/" + path, query)
    }

    func versionPath(_ session: SyncSession) async throws -> String {
        if let known = state.withLock({ $0.versionPath }) { return known }
        let what = "listing API versions"
        let answer = try await send("GET", try SyncHTTPClient.url(configuration.url, "services/data/"), session: session, what: what)
        try check(answer, what)
        let versions = try answer.json(what).arrayValue ?? []
        let best = versions.compactMap { entry -> (Double, String)? in
            guard let version = entry["version"]?.stringValue, let number = Double(version), let url = entry["url"]?.stringValue,
                url.hasPrefix("/services/data/")
            else { return nil }
            return (number, url)
        }.max { $0.0 < $1.0 }
        guard let best else { throw SyncError(.protocolViolation, "\(what): the answer lists no version") }
        state.withLock { $0.versionPath = best.1 }
        return best.1
    }

    /// Sends a request with the session's bearer token; a `401` refreshes the token once when
    /// the session has a refresh token.
    func send(
        _ method: String, _ url: URL, headers: [String: String] = [:], body: Data? = nil, session: SyncSession, what: String,
        maximumBytes: Int? = nil
    ) async throws -> SyncHTTPClient.Response {
        let stored = session.data[Self.tokenKey]?.stringValue ?? ""
        let token = state.withLock { $0.refreshed[stored] } ?? stored
        var headers = headers
        headers["Authorization"] = "Bearer " + token
        let answer = try await http.send(method, url, headers: headers, body: body, maximumBytes: maximumBytes)
        guard answer.status == 401, let given = session.data[Self.refreshKey]?.stringValue else { return answer }
        let refresh = state.withLock { $0.rotated[given] } ?? given
        let (fresh, next) = try await refreshToken(refresh, what: what)
        state.withLock {
            $0.refreshed[stored] = fresh
            // An org that rotates refresh tokens takes only the new one from now on (a
            // black-box probe: the old one was sent at the next expiry, and refused).
            if let next, next != given { $0.rotated[given] = next }
        }
        headers["Authorization"] = "Bearer " + fresh
        return try await http.send(method, url, headers: headers, body: body, maximumBytes: maximumBytes)
    }

    /// A new access token for a refresh token (`grant_type=refresh_token`).
    func refreshToken(_ refresh: String, what: String) async throws -> (access: String, refresh: String?) {
        var form = [("grant_type", "refresh_token"), ("refresh_token", refresh)]
        if let id = configuration.clientID { form.append(("client_id", id)) }
        if let secret = configuration.clientSecret { form.append(("client_secret", secret)) }
        let answer = try await tokenRequest(form, what: "\(what): refreshing the access token")
        guard answer.status == 200, let body = try? answer.json(what), let token = body["access_token"]?.stringValue else {
            throw SyncError(.unauthorized, "\(what): Salesforce refused to refresh the access token: log in again", httpStatus: answer.status)
        }
        return (token, body["refresh_token"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 })
    }

    func tokenRequest(_ form: [(String, String)], what: String) async throws(SyncError) -> SyncHTTPClient.Response {
        let body = form.map { "\(SyncHTTPClient.escape($0.0))=\(SyncHTTPClient.escape($0.1))" }.joined(separator: "&")
        let url = try SyncHTTPClient.url(configuration.loginURL ?? configuration.url, "services/oauth2/token")
        return try await http.send("POST", url, headers: ["Content-Type": "application/x-www-form-urlencoded"], body: Data(body.utf8))
    }

    /// Throws the error an answer other than 2xx (or 304) stands for.
    func check(_ answer: SyncHTTPClient.Response, _ what: String) throws(SyncError) {
        do throws(SyncError) { try checkStatus(answer, what) } catch { throw error.at(answer.url.path) }
    }

    func checkStatus(_ answer: SyncHTTPClient.Response, _ what: String) throws(SyncError) {
        guard !(200..<300).contains(answer.status) && answer.status != 304 else { return }
        let (code, message) = Self.error(answer)
        let detail = message.isEmpty ? "" : ": \(message)"
        let codeText = code.map { " (\($0))" } ?? ""
        switch (answer.status, code) {
        case (401, _):
            throw SyncError(
                .unauthorized,
                "\(what): Salesforce refused the access token\(codeText)\(detail): log in again (satchel sync: pass --token, or --user and --password)",
                httpStatus: 401)
        case (_, "REQUEST_LIMIT_EXCEEDED"?), (_, "SERVER_UNAVAILABLE"?), (_, "UNABLE_TO_LOCK_ROW"?):
            // Retryable whatever the status (a limit comes as 403): a status below 500 is
            // reported as 503, a 5xx as itself (a black-box probe: a 500 said "HTTP 503").
            throw SyncError(
                .server, "\(what) failed with HTTP \(answer.status)\(codeText)\(detail)", httpStatus: answer.status >= 500 ? answer.status : 503,
                retryAfter: answer.retryAfter)
        default:
            throw SyncError(
                .server, "\(what) failed with HTTP \(answer.status)\(codeText)\(detail)", httpStatus: answer.status, retryAfter: answer.retryAfter)
        }
    }

    /// The `errorCode` and `message` of an error answer (`[{"errorCode","message"}]`, or OAuth's
    /// `{"error","error_description"}`).
    static func error(_ answer: SyncHTTPClient.Response) -> (code: String?, message: String) {
        guard let body = try? answer.json("") else { return (nil, answer.text) }
        let first = body.arrayValue?.first ?? body
        let code = first["errorCode"]?.stringValue ?? first["error"]?.stringValue
        let message = first["message"]?.stringValue ?? first["error_description"]?.stringValue ?? answer.text
        return (code, message)
    }

}
