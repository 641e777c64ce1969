public import Foundation
import Satchel
public import SatchelSync
import Synchronization

/// A Kinto server (https://kinto.readthedocs.io), spoken to over its HTTP API v1.
///
/// Point it at the API root (`http://host:8888/v1`) and a bucket; each model syncs with the
/// collection of the same name in that bucket, created (with the bucket) when missing.
///
/// ```swift
/// let backend = KintoBackend(url: URL(string: "http://127.0.0.1:8888/v1")!, bucket: "app")
/// let engine = SyncEngine(store: store, backend: backend)
/// try await engine.logIn(Credentials(user: "ann", password: "s3cret"))
/// try await engine.sync()
/// ```
///
/// What it maps:
/// - **Pull**: `GET …/records?_sort=last_modified&_since=<cursor>&_limit=<page size>`, paging
///   through `Next-Page`; tombstones (`deleted: true`) are deletes. The cursor is the collection
///   timestamp reached (the highest `last_modified` applied), stored with each page; a delta
///   asks `If-None-Match` with it, and a `304` ends the pull at once.
///   Each page carries the total the server holds (``PullPage/totalCount``): `Total-Objects` of
///   one `HEAD` on the records as the pull begins (Kinto tells it on `HEAD` only).
/// - **Push**: `POST /batch`, at most 25 changes a request. Creates are `PUT` with
///   `If-None-Match: *`, updates `PATCH` and deletes `DELETE` with `If-Match` of the record's
///   last known `last_modified`; `last_modified` is never sent in a body. An update that removes
///   attributes is sent alone, as a `PATCH` with `Content-Type: application/json-patch+json`
///   (RFC 6902: an attribute set replaces the field whole) and the same `If-Match` (a batch's `PATCH` would store the removed attribute as `null`, and
///   a `PUT` of the whole object would erase fields this device does not read).
/// - **Conflicts**: a `412` is a refused change carrying the server's current record
///   (``RefusedChange/serverCopy``): ``Resolution/retry`` pushes the change again over it,
///   ``Resolution/rollback`` takes it. A `403` or `400` on a record is a refused change too.
/// - **Errors**: `401` is ``SyncError/Code/unauthorized``; `Retry-After` and `Backoff` become
///   ``SyncError/retryAfter`` (after a `Backoff`, calls fail as retryable until it has passed).
/// - **Blobs**: a model's blob attribute (at most one) is its record's attachment, through the
///   kinto-attachment plugin: uploaded to `…/records/ID/attachment` after the record's write,
///   removed with `DELETE` there, downloaded from its `location` (see
///   `KintoBackend+Attachments.swift`).
/// - Ids and attribute names are mapped by ``KintoMapping``.
///
/// Kinto authenticates every request (HTTP basic auth), so the adapter needs the password for
/// as long as it syncs. By default it keeps it in memory only: after ``SyncEngine/logIn(_:)``
/// in this process, or from ``Configuration/credentials`` (say, read from the keychain at
/// launch). With ``Configuration/remembersPassword`` the session the login stores holds it too,
/// so that a later process syncs on the stored session alone, as with the other backends.
public final class KintoBackend: SyncBackend {
    /// Where the server is and how to talk to it.
    public struct Configuration: Sendable {
        /// The API root, e.g. `http://host:8888/v1`.
        public var url: URL
        /// The bucket holding one collection per model.
        public var bucket: String
        /// Seconds to wait for an answer.
        public var timeout: TimeInterval
        /// Credentials to use when this process has not logged in (never stored by Satchel).
        public var credentials: Credentials?
        /// Whether the session a login returns holds the password, so that a later process
        /// syncs on the stored session alone (off by default: an app reads the password from
        /// its keychain into ``credentials`` instead). The session is stored in the store, so the
        /// password is then on disk, encrypted only when the store is; a logout, a `401` and
        /// `reset --full` drop it. The `satchel` CLI turns it on: its stored session is enough,
        /// whatever the backend.
        public var remembersPassword = false
        /// Whether plain `http://` may go to a host other than this machine (off by default:
        /// credentials, sessions and data would cross the network unencrypted; loopback is
        /// always allowed).
        public var allowInsecureHTTP = false
        /// How much of a server's answer is read before the sync fails (see ``AnswerLimits``).
        public var limits = AnswerLimits()

        public init(url: URL, bucket: String, timeout: TimeInterval = 60, credentials: Credentials? = nil) {
            self.url = url
            self.bucket = bucket
            self.timeout = timeout
            self.credentials = credentials
        }
    }

    private struct State {
        var credentials: Credentials?
        /// No request before this instant (the server's `Backoff`).
        var backoffUntil: ContinuousClock.Instant?
        /// The server's `settings.batch_max_requests`, once read (at most ``batchLimit``).
        var batchMaxRequests: Int?
        /// Models whose collection this process made, until their next pull sees it.
        var collectionsMade: Set<String> = []
    }

    public let configuration: Configuration
    let http: SyncHTTPClient
    private let state: Locked<State>

    public init(configuration: Configuration) {
        self.configuration = configuration
        http = SyncHTTPClient(timeout: configuration.timeout, limits: configuration.limits, allowInsecureHTTP: configuration.allowInsecureHTTP)
        state = Locked(State(credentials: configuration.credentials))
    }

    /// An adapter for the server whose API root is `url`, syncing with `bucket`.
    public convenience init(url: URL, bucket: String, credentials: Credentials? = nil) {
        self.init(configuration: Configuration(url: url, bucket: bucket, credentials: credentials))
    }

    public var name: String { "kinto" }

    /// Deletions come as tombstones; a batch holds at most 25 requests; a page is asked for by
    /// `_since` or the next-page link, which moves nothing on the server (pulls ahead).
    public var capabilities: SyncCapabilities { SyncCapabilities(deletions: .inPages, search: true, maxPushBatch: Self.batchLimit, pullsAhead: true) }

    /// Kinto's default `batch_max_requests`: the most requests a batch holds, fewer when the
    /// server's root says its setting is lower.
    static let batchLimit = 25

    /// Notes the `settings.batch_max_requests` of the server's root (Kinto's default when it
    /// says none).
    private func noteBatchMaxRequests(_ root: JSONValue) {
        let limit = root["settings"]?.objectValue?["batch_max_requests"]?.intValue ?? Int64(Self.batchLimit)
        state.withLock { $0.batchMaxRequests = Int(max(1, min(limit, Int64(Self.batchLimit)))) }
    }

    /// The most requests one batch may hold: the server's setting (its root read once a process,
    /// at the login or the first push), at most ``batchLimit`` (a black-box probe: a server set
    /// lower refused every batch of 25).
    func batchSize(_ what: String) async throws -> Int {
        if let known = state.withLock({ $0.batchMaxRequests }) { return known }
        let answer = try await send("GET", root(""), what: what)
        try check(answer, what)
        noteBatchMaxRequests(try answer.json(what))
        return state.withLock { $0.batchMaxRequests } ?? Self.batchLimit
    }
    /// How many times a request that lost a write race (409, errno 122) is sent.
    static let raceAttempts = 5

    // MARK: - Log in

    public func logIn(_ credentials: Credentials) async throws -> SyncSession {
        let answer = try await send("GET", root(""), credentials: credentials, what: "login")
        // Kinto redirects its server's root (`/`) to its API's (`/v1/`): GETs would follow it and
        // work, writes would not (a redirect is not followed for a request that sends data). A
        // redirect also drops the credentials: a 401 after one says the URL is wrong, not them.
        func trimmed(_ url: URL) -> Substring {
            let path = Substring(url.path)
            return path.hasSuffix("/") ? path.dropLast() : path
        }
        let redirected = trimmed(answer.answeredURL) != trimmed(answer.url)
        if !redirected { try check(answer, "login") }
        if redirected {
            var root = URLComponents(url: answer.answeredURL, resolvingAgainstBaseURL: false)
            root?.query = nil
            throw SyncError(
                .protocolViolation,
                "login: \(configuration.url.absoluteString) is not Kinto's API root; it redirects to \(root?.string ?? answer.answeredURL.absoluteString): use that URL"
            )
        }
        let body = try answer.json("login")
        noteBatchMaxRequests(body)
        guard let principal = body["user"]?.objectValue?["id"]?.stringValue else {
            // The API root says what the server is (`project_name`, `capabilities`), the user
            // or not; another URL answers something else (a bucket's list, for `/v1/buckets`).
            guard body["project_name"] != nil || body["capabilities"] != nil else {
                throw SyncError(
                    .protocolViolation,
                    "login: \(configuration.url.absoluteString) is not Kinto's API root (its answer is not the server's description): give the root, as http://host:8888/v1"
                )
            }
            throw SyncError(.unauthorized, "login: Kinto did not accept the user name and password of \(credentials.user)", httpStatus: 401)
        }
        state.withLock { $0.credentials = credentials }
        var data: JSONObject = ["principal": .string(principal)]
        if configuration.remembersPassword { data[Self.passwordKey] = .string(credentials.password) }
        return SyncSession(user: credentials.user, data: data)
    }

    /// Where a remembered password is in the session's data.
    static let passwordKey = "password"

    /// Takes the password a stored session remembers (``Configuration/remembersPassword``) when
    /// this process has none, and keeps the store to one bucket: Kinto registers no clients, so
    /// the session's client id names the bucket the store's cursors and versions come from
    /// (`bucket:NAME`, set at the first sync). Another bucket is refused before anything is sent:
    /// its records would mix with the first one's, and cursors of one would skip the other's
    /// records. A client reset (which drops the synced data) frees the store for another bucket.
    public func prepare(_ session: SyncSession) async throws -> SyncSession {
        if configuration.remembersPassword, let password = session.data[Self.passwordKey]?.stringValue {
            state.withLock { if $0.credentials == nil { $0.credentials = Credentials(user: session.user, password: password) } }
        }
        let client = Self.bucketClientPrefix + configuration.bucket
        var session = session
        if let stored = session.clientID, stored.hasPrefix(Self.bucketClientPrefix), stored != client {
            let bucket = stored.dropFirst(Self.bucketClientPrefix.count)
            throw SyncError(
                .notSupported,
                "this store syncs Kinto bucket \(bucket): bucket \(configuration.bucket) would mix the two buckets' records (a client reset, satchel reset --client, drops what came from \(bucket); or use another store)"
            )
        }
        if session.clientID == nil { session.clientID = client }
        return session
    }

    /// How the session's client id names the store's bucket.
    static let bucketClientPrefix = "bucket:"

    /// Kinto has no logout call (basic auth): the password is forgotten.
    public func logOut(_ session: SyncSession) async throws {
        state.withLock { $0.credentials = nil }
    }

    // MARK: - Pull

    /// Where a pull stands: the highest `last_modified` applied, and while paging the `Next-Page`
    /// URL and the total the server told when the pull began.
    struct Cursor {
        var since: Int64?
        var next: String?
        var total: Int?

        init(since: Int64?, next: String?, total: Int? = nil) {
            self.since = since
            self.next = next
            self.total = total
        }

        init(_ value: JSONValue?) {
            since = value?.objectValue?["since"]?.intValue
            next = value?.objectValue?["next"]?.stringValue
            total = value?.objectValue?["total"]?.intValue.flatMap { Int(exactly: $0) }
        }

        var json: JSONValue? {
            guard since != nil || next != nil else { return nil }
            var object = JSONObject()
            if let since { object["since"] = .int(since) }
            if let next { object["next"] = .string(next) }
            if let total { object["total"] = .int(Int64(total)) }
            return .object(object)
        }
    }

    public func pull(_ request: PullRequest) async throws -> PullPage {
        let blob = try Self.blobAttribute(of: request.model) ?? KintoMapping.attachmentField
        let cursor = Cursor(request.cursor)
        let what = "pull of \(request.model.name)"
        var answer: SyncHTTPClient.Response
        if let next = cursor.next, isOnThisServer(next), let url = URL(string: next) {
            answer = try await send("GET", url, what: what)
            if answer.status == 400 {
                // The page token expired (Kinto keeps them 10 minutes): go on from the cursor.
                answer = try await send("GET", try recordsURL(request, since: cursor.since), what: what)
            }
        } else {
            var headers: [String: String] = [:]
            if let since = cursor.since { headers["If-None-Match"] = "\"\(since)\"" }
            answer = try await send("GET", try recordsURL(request, since: cursor.since), headers: headers, what: what)
        }
        switch answer.status {
        case 304:
            return PullPage(nextCursor: Cursor(since: cursor.since, next: nil).json, done: true)
        case 404 where Self.missingContainer(answer), 403 where cursor.since == nil && cursor.next == nil:
            // A missing collection (Kinto answers 403 for a bucket that does not exist, as for one
            // this user may not read): create what is missing, then ask again.
            try await ensureCollection(request.model.name)
            answer = try await send("GET", try recordsURL(request, since: nil), what: what)
            try check(answer, what)
        default:
            try check(answer, what)
        }
        // Kinto tells the total on HEAD only: asked once as a pull begins, kept in the cursor for
        // its later pages.
        var total = cursor.total
        if cursor.next == nil { total = try await self.total(request, what: what) }
        // A collection pulled from before that had to be made again (here, or by a push) was
        // deleted with its records, which leaves no tombstones: the engine lists what the server
        // holds now and deletes the rest (a black-box probe: they stayed for good).
        let made = state.withLock { $0.collectionsMade.remove(request.model.name) != nil }
        let collectionGone = made && (cursor.since != nil || cursor.next != nil)
        var page = try pullPage(answer, since: collectionGone ? nil : cursor.since, total: total, blobAttribute: blob, what: what)
        if collectionGone { page.reconcileIDs = true }
        return page
    }

    /// How many records of the request's model the server holds (those its server filter
    /// matches): `Total-Objects` of a `HEAD` on the records (nil when the answer has none).
    ///
    /// - Throws: ``SyncError`` `.protocolViolation` for a total that is not a count.
    func total(_ request: PullRequest, what: String) async throws -> Int? {
        let answer = try await send("HEAD", try root(collectionPath(request.model.name) + "/records", serverFilter(request)), what: what)
        try check(answer, what)
        return try Self.total(answer, what)
    }

    /// The `Total-Objects` of an answer (`Total-Records` before Kinto 15), nil when it has none.
    static func total(_ answer: SyncHTTPClient.Response, _ what: String) throws(SyncError) -> Int? {
        guard let text = answer.header("total-objects") ?? answer.header("total-records") else { return nil }
        guard let total = Int(text.trimmingCharacters(in: .whitespaces)), total >= 0 else {
            throw SyncError(.protocolViolation, "\(what): the Total-Objects header is not a count (\(text.prefix(40)))")
        }
        return total
    }

    /// A record list in the engine's terms: live records as upserts, tombstones as deletes, and
    /// the cursor past them (the highest `last_modified` reached from `since`, and `Next-Page`
    /// while there is one). A record's attachment is `blobAttribute`, its URL to download; the
    /// page declares it a blob attribute. Package-visible so that the fuzz targets read answers
    /// through the code a pull runs.
    ///
    /// - Throws: ``SyncError`` `.protocolViolation` for an answer that is not a record list, or
    ///   whose next page is on another server.
    package func pullPage(
        _ answer: SyncHTTPClient.Response, since: Int64?, total: Int? = nil, blobAttribute: String = KintoMapping.attachmentField, what: String
    ) throws(SyncError) -> PullPage {
        guard let records = try answer.json(what)["data"]?.arrayValue else {
            throw SyncError(.protocolViolation, "\(what): the answer has no `data` list")
        }
        var page = PullPage()
        var since = since
        // The collection's timestamp when it answered: no record it listed is later. One that is
        // would become the cursor, and Kinto refuses a `_since` in its future on every later pull
        // (a black-box probe: every sync failed with HTTP 400 from then on).
        let timestamp = answer.header("etag").flatMap { Int64($0.trimmingCharacters(in: CharacterSet(charactersIn: "\" "))) }
        for value in records {
            guard let (record, attachment) = KintoMapping.record(value, attachmentAs: blobAttribute) else {
                throw SyncError(.protocolViolation, "\(what): a record without a string `id` and an integer `last_modified`")
            }
            if let timestamp, record.version > timestamp {
                throw SyncError(
                    .protocolViolation,
                    "\(what): a record's last_modified (\(record.version)) is later than the collection's timestamp (ETag \(timestamp)); nothing of the page was applied"
                )
            }
            switch record {
            case .object(let id, let attributes, let version):
                let urls = attachment.map { [blobAttribute: $0] } ?? [:]
                if attachment != nil { page.schema.blobAttributes = [blobAttribute] }
                page.upserts.append(ServerObject(id: id, attributes: attributes, isWhole: true, version: .int(version), blobURLs: urls))
            case .deleted(let id, _):
                page.deletes.append(id)
            }
            since = max(since ?? record.version, record.version)
        }
        let next = answer.header("next-page")
        if let next { _ = try nextPage(next, of: answer, what) }
        if since == nil, next == nil, let timestamp {
            // Nothing listed yet (an empty collection): its timestamp, the list's `ETag`, is where
            // the next pull asks from, with `If-None-Match` (a 304 while nothing changed), not 0.
            since = timestamp
        }
        page.nextCursor = Cursor(since: since, next: next, total: next == nil ? nil : total).json
        page.done = next == nil
        page.totalCount = total
        return page
    }

    /// Whether `url` is under the configured API root (a `Next-Page` is followed only then).
    func isOnThisServer(_ url: String) -> Bool { url.hasPrefix(configuration.url.absoluteString) }

    /// The records of the request's model changed after `since`, oldest first.
    func recordsURL(_ request: PullRequest, since: Int64?) throws(SyncError) -> URL {
        // `_since` even on a first pull (0): without it Kinto lists no tombstones, and a record
        // deleted while the first pull pages on would never be seen deleted.
        let query: [(String, String)] = [("_since", String(since ?? 0)), ("_sort", "last_modified"), ("_limit", String(max(1, request.pageSize)))]
        return try root(collectionPath(request.model.name) + "/records", query + serverFilter(request))
    }

    /// Every live record's id of the model (its server filter applied), a page at a time through
    /// `Next-Page`: what a pull of a collection deleted and made again reconciles with.
    public func remoteIDs(_ request: PullRequest) async throws -> [String] {
        let what = "listing the ids of \(request.model.name)"
        var url = try root(
            collectionPath(request.model.name) + "/records",
            [("_fields", "id"), ("_sort", "id"), ("_limit", String(max(1000, request.pageSize)))] + serverFilter(request))
        var ids: [String] = []
        for _ in 0..<1_000_000 {
            let answer = try await send("GET", url, what: what)
            try check(answer, what)
            guard let records = try answer.json(what)["data"]?.arrayValue else {
                throw SyncError(.protocolViolation, "\(what): the answer has no `data` list")
            }
            for record in records {
                guard let id = record["id"]?.stringValue else { throw SyncError(.protocolViolation, "\(what): a record without a string `id`") }
                ids.append(KintoMapping.objectID(id))
            }
            guard let next = answer.header("next-page") else { return ids }
            url = try nextPage(next, of: answer, what)
        }
        throw SyncError(.protocolViolation, "\(what): the server's pages never end")
    }

    /// A `Next-Page` link to follow: a page of the list `answer` is a page of (its path), on
    /// this server (a black-box probe: a link to another collection's records was followed, and
    /// they were stored as the model's).
    func nextPage(_ next: String, of answer: SyncHTTPClient.Response, _ what: String) throws(SyncError) -> URL {
        let url = try linkOnThisServer(next, what)
        guard url.path == answer.url.path else {
            throw SyncError(.protocolViolation, "\(what): the next page (\(url.path)) is not a page of \(answer.url.path); nothing of it was applied")
        }
        return url
    }

    /// A `Next-Page` link's URL, refused when it is not on this server.
    func linkOnThisServer(_ next: String, _ what: String) throws(SyncError) -> URL {
        guard isOnThisServer(next), let url = URL(string: next) else {
            throw SyncError(.protocolViolation, "\(what): the next page is on another server (\(next))")
        }
        return url
    }

    /// A server filter as Kinto's querystring filters (`name=value`, `min_n=2`, ...).
    func serverFilter(_ request: PullRequest) -> [(String, String)] {
        (request.configuration.serverFilter ?? JSONObject()).map { name, value in
            (name, value.stringValue ?? String(decoding: value.jsonBytes, as: UTF8.self))
        }
    }

    // MARK: - Push

    public func push(_ request: PushRequest) async throws -> [PushResult] {
        // The blob attribute travels as the record's attachment, after the record's write.
        let blob = try Self.blobAttribute(of: request.model)
        var attachments: [[UInt8]: (attachment: AttachmentChange, record: OutgoingChange)] = [:]
        var changes: [OutgoingChange] = []
        var results: [PushResult] = []
        for change in request.changes {
            if Self.setsNotABlob(change, blobAttribute: blob), let blob {
                // Kinto keeps a file there, or nothing: the value is refused, not dropped.
                let message =
                    "the blob attribute \(blob) holds \(String(decoding: change.attributes[blob]?.jsonBytes ?? [], as: UTF8.self).prefix(80)), not a blob: Kinto keeps the record's attachment there"
                // With the server's copy, which a rollback takes (an update's: a create has none).
                let copy =
                    change.kind == .update
                    ? try await readableCopy(
                        change.objectID, model: request.model.name, context: OutcomeContext(blobAttribute: blob, carryingAttachments: []))
                    : nil
                results.append(
                    PushResult(objectID: change.objectID, outcome: .refused(message: message, code: Self.notABlobCode, serverCopy: copy)))
                continue
            }
            let (record, attachment) = Self.split(change, blobAttribute: blob)
            if let attachment { attachments[Array(change.objectID.utf8)] = (attachment, record) }
            changes.append(record)
        }
        // A create sent again after its answer was lost may have made its record, and another
        // device may have deleted it since: `If-None-Match: *` passes over a tombstone, so the
        // create would undo that delete.
        let resent = changes.filter { $0.kind == .create && !$0.sentValues.isEmpty }.map(\.objectID)
        let gone = try await deletedSincePulled(resent, model: request.model.name, cursor: Cursor(request.cursor))
        if !gone.isEmpty {
            changes.removeAll { gone.contains(Array($0.objectID.utf8)) }
            for id in resent where gone.contains(Array(id.utf8)) {
                attachments[Array(id.utf8)] = nil
                results.append(PushResult(objectID: id, outcome: .deletedSinceCreated))
            }
        }
        let context = OutcomeContext(
            blobAttribute: blob ?? KintoMapping.attachmentField, carryingAttachments: Set(attachments.keys))
        for index in changes.indices.reversed() {
            guard let refusal = try await guardingUnversionedDelete(&changes[index], model: request.model.name, context: context) else { continue }
            results.append(PushResult(objectID: changes[index].objectID, outcome: refusal))
            changes.remove(at: index)
        }
        // An update that removes attributes goes on its own, as a JSON Patch: a batch's PATCH
        // would keep a null, and a PUT of the whole object would erase what this device does not
        // read (an attribute list, the attachment, fields no attribute travels as).
        let alone = changes.filter(Self.removesAttributes)
        let batched = changes.filter { !Self.removesAttributes($0) }
        let size = batched.isEmpty ? Self.batchLimit : try await batchSize("push to \(request.model.name)")
        var start = 0
        while start < batched.count {
            let chunk = Array(batched[start..<min(start + size, batched.count)])
            results += try await pushBatch(chunk, model: request.model.name, mayCreateCollection: true, context: context)
            start += chunk.count
        }
        for change in alone { results.append(try await patchAlone(change, model: request.model.name, context: context)) }
        for index in results.indices {
            guard let (attachment, change) = attachments[Array(results[index].objectID.utf8)], case .accepted = results[index].outcome else {
                continue
            }
            results[index].outcome = try await sendAttachment(attachment, of: change, model: request.model.name)
        }
        return results
    }

    /// Of objects `ids`, those whose record the server deleted after what `cursor` has pulled:
    /// the tombstones newer than it (`_since` lists them, `deleted=true` only them), asked a
    /// slice of ids at a time.
    func deletedSincePulled(_ ids: [String], model: String, cursor: Cursor) async throws -> Set<[UInt8]> {
        var gone: Set<[UInt8]> = []
        let slice = 50
        var start = 0
        while start < ids.count {
            let chunk = ids[start..<min(start + slice, ids.count)]
            start += chunk.count
            let byRecord = Dictionary(chunk.map { (KintoMapping.recordID($0), $0) }, uniquingKeysWith: { first, _ in first })
            let query = [
                ("_since", String(cursor.since ?? 0)), ("deleted", "true"), ("in_id", byRecord.keys.sorted().joined(separator: ",")),
                ("_limit", String(slice)),
            ]
            let what = "push to \(model)"
            let url = try root(collectionPath(model) + "/records", query)
            var answer = try await send("GET", url, what: what)
            // A collection not made yet holds no tombstone.
            if answer.status == 404, Self.missingContainer(answer) { return gone }
            if answer.status == 403 {
                // Kinto answers 403 for a bucket that does not exist (a first push whose answer
                // was lost made none), as for one this user may not read: make what is missing
                // (which says which it is), then ask again.
                try await ensureCollection(model)
                answer = try await send("GET", url, what: what)
            }
            try check(answer, what)
            guard let records = try answer.json(what)["data"]?.arrayValue else {
                throw SyncError(.protocolViolation, "\(what): the list of deleted records holds no data")
            }
            for record in records where record["deleted"]?.boolValue == true {
                if let id = record["id"]?.stringValue.flatMap({ byRecord[$0] }) { gone.insert(Array(id.utf8)) }
            }
        }
        return gone
    }

    /// Whether `change` is an update that removes attributes.
    static func removesAttributes(_ change: OutgoingChange) -> Bool {
        change.kind == .update && change.attributes.contains { $0.value.isNull }
    }

    func pushBatch(_ changes: [OutgoingChange], model: String, mayCreateCollection: Bool, context: OutcomeContext) async throws -> [PushResult] {
        let what = "push to \(model)"
        let path = "/" + collectionPath(model) + "/records/"
        let requests: [JSONValue] = changes.map { change in
            var sub: JSONObject = ["path": .string(path + KintoMapping.recordID(change.objectID))]
            var headers = JSONObject()
            if change.kind == .create {
                headers["If-None-Match"] = "*"
            } else if let version = change.baseVersion?.intValue {
                headers["If-Match"] = .string("\"\(version)\"")
            }
            sub["headers"] = .object(headers)
            switch change.kind {
            case .create:
                sub["method"] = "PUT"
                sub["body"] = ["data": .object(KintoMapping.data(change.attributes.filter { !$1.isNull }))]
            case .update:
                sub["method"] = "PATCH"
                sub["body"] = ["data": .object(KintoMapping.data(change.attributes))]
            case .delete:
                sub["method"] = "DELETE"
            }
            return .object(sub)
        }
        let body: JSONObject = ["requests": .array(requests)]
        let answer = try await send("POST", root("batch"), body: Data(body.jsonBytes), what: what)
        try check(answer, what)
        var (results, retry) = try Self.batchOutcomes(
            answer, changes: changes, mayCreateCollection: mayCreateCollection, context: context, what: what)
        results = try await withReadableCopies(results, of: changes, model: model, context: context, what)
        let creates = Dictionary(changes.filter { $0.kind == .create }.map { ($0.objectID, $0) }, uniquingKeysWith: { first, _ in first })
        for index in results.indices {
            if case .conflict(let message, let code, let serverCopy, let version) = results[index].outcome,
                let create = creates[results[index].objectID]
            {
                results[index].outcome = try await completingCreate(
                    create, serverCopy: serverCopy, version: version, refusal: .refused(message: message, code: code, serverCopy: serverCopy),
                    model: model, context: context)
            }
        }
        if !retry.isEmpty {
            try await ensureCollection(model)
            results += try await pushBatch(retry, model: model, mayCreateCollection: false, context: context)
        }
        return results
    }

    /// What a `/batch` answer says of `changes`, one response each in order: their outcomes, and
    /// the changes to send again once their collection is created (when `mayCreateCollection`).
    /// Package-visible so that the fuzz targets read answers through the code a push runs.
    ///
    /// - Throws: ``SyncError`` `.protocolViolation` for an answer that does not hold one response
    ///   with a status per change; `.unauthorized` for a `401`.
    package static func batchOutcomes(
        _ answer: SyncHTTPClient.Response, changes: [OutgoingChange], mayCreateCollection: Bool, context: OutcomeContext = OutcomeContext(),
        what: String
    ) throws(SyncError) -> (results: [PushResult], retry: [OutgoingChange]) {
        guard let responses = try answer.json(what)["responses"]?.arrayValue, responses.count == changes.count else {
            throw SyncError(.protocolViolation, "\(what): the batch answer does not hold one response per request")
        }
        var results: [PushResult] = []
        var retry: [OutgoingChange] = []
        for (change, response) in zip(changes, responses) {
            guard let status = response["status"]?.intValue.map(Int.init) else {
                throw SyncError(.protocolViolation, "\(what): a batch response without a status")
            }
            let body = response["body"] ?? .null
            if status == 404 && body["errno"]?.intValue == 111 && mayCreateCollection {
                retry.append(change)
                continue
            }
            results.append(
                PushResult(objectID: change.objectID, outcome: try outcome(of: change, status: status, body: body, context: context, what)))
        }
        return (results, retry)
    }

    /// An update that removes attributes, sent on its own as a JSON Patch (RFC 6902): each
    /// attribute set is an `add` (which replaces the field whole: a merge patch, RFC 7396, would
    /// merge an object into the old one and drop its nested nulls), each one removed an `add`
    /// then a `remove` (a `remove` alone fails on a field the server does not have, one set and
    /// removed here before it was pushed). Only outside `/batch`: Kinto sends a batch's
    /// sub-requests on as plain JSON, whatever their `Content-Type`.
    func patchAlone(_ change: OutgoingChange, model: String, context: OutcomeContext) async throws -> PushResult {
        let what = "push to \(model)"
        var headers = ["Content-Type": "application/json-patch+json"]
        if let version = change.baseVersion?.intValue { headers["If-Match"] = "\"\(version)\"" }
        let url = try root(collectionPath(model) + "/records/" + KintoMapping.recordID(change.objectID))
        var operations: [JSONValue] = []
        for (field, value) in KintoMapping.data(change.attributes) {
            // A JSON Pointer escapes `~` as `~0` and `/` as `~1`.
            let path = JSONValue.string("/data/" + field.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1"))
            operations.append(["op": "add", "path": path, "value": value])
            if value.isNull { operations.append(["op": "remove", "path": path]) }
        }
        let answer = try await send("PATCH", url, headers: headers, body: Data(JSONValue.array(operations).jsonBytes), what: what)
        let json = (try? answer.json("")) ?? .null
        let result = PushResult(
            objectID: change.objectID, outcome: try Self.outcome(of: change, status: answer.status, body: json, context: context, what))
        return try await withReadableCopies([result], of: [change], model: model, context: context, what)[0]
    }

    /// `results` with each update or delete this user may not make (403), of a record it may
    /// read, carrying the record as its server copy, which a rollback takes (read after the
    /// writes). A 403 for the whole collection fails the push (``checkCollectionAccess(_:_:)``).
    func withReadableCopies(
        _ results: [PushResult], of changes: [OutgoingChange], model: String, context: OutcomeContext, _ what: String
    ) async throws -> [PushResult] {
        guard results.contains(where: { if case .refused(_, "403"?, _) = $0.outcome { true } else { false } }) else { return results }
        try await checkCollectionAccess(model, what)
        var results = results
        let updates = Set(changes.filter { $0.kind != .create }.map { Array($0.objectID.utf8) })
        for index in results.indices where updates.contains(Array(results[index].objectID.utf8)) {
            guard case .refused(let message, "403"?, .none) = results[index].outcome,
                let copy = try await readableCopy(results[index].objectID, model: model, context: context)
            else { continue }
            results[index].outcome = .refused(message: message, code: "403", serverCopy: copy)
        }
        return results
    }

    /// What a push needs to read the answers to its changes: the attribute a record's attachment
    /// is read as, and the changes whose attachment goes after their record's write.
    package struct OutcomeContext: Sendable {
        var blobAttribute = KintoMapping.attachmentField
        var carryingAttachments: Set<[UInt8]> = []

        package init() {}

        init(blobAttribute: String, carryingAttachments: Set<[UInt8]>) {
            self.blobAttribute = blobAttribute
            self.carryingAttachments = carryingAttachments
        }
    }

    /// What one batch response means for its change.
    static func outcome(
        of change: OutgoingChange, status: Int, body: JSONValue, context: OutcomeContext = OutcomeContext(), _ what: String
    ) throws(SyncError) -> PushOutcome {
        let message = Self.message(of: body) ?? "HTTP \(status)"
        switch status {
        case 200, 201:
            if change.kind == .delete { return .accepted() }
            return .accepted(version: body["data"]?["last_modified"]?.intValue.map(JSONValue.int))
        case 404:
            return .notFound(message: Self.message(of: body), code: "404")
        case 412:
            let existing = body["details"]?["existing"].flatMap { KintoMapping.record($0, attachmentAs: context.blobAttribute)?.record }
            if change.kind == .create, case .deleted(_, let version)? = existing {
                // A record whose fields are all null holds the id: no object, which the create
                // is written over, guarded by its version (``completingCreate``).
                return .conflict(
                    message: "a record whose fields are all null holds this id on the server", code: "412", serverCopy: JSONObject(),
                    serverVersion: .int(version))
            }
            guard case .object(_, let attributes, let version)? = existing else {
                // Nothing (live) there: a create may go on; an update or delete has no object.
                return change.kind == .create ? .retryLater(message: message) : .notFound(message: message, code: "412")
            }
            let held = change.attributes.allSatisfy { name, value in value.isNull ? attributes[name] == nil : attributes[name] == value }
            // What the lost push of a create sent that was removed here since, which the record
            // still holds: to be removed there (a black-box probe: the create counted as
            // accepted, and the removal was undone here by the next pull).
            let removedHere = change.removedSinceSent.contains { attributes[$0] == change.sentValues[$0] }
            if held && !removedHere && (change.kind == .create || context.carryingAttachments.contains(Array(change.objectID.utf8))) {
                // An earlier push of this change went through and its answer was lost (or its
                // attachment failed after it): the record is written, its attachment goes next.
                return .accepted(version: .int(version))
            }
            let text =
                change.kind == .create ? "a record with this id already exists on the server" : "the record was modified on the server meanwhile"
            // A create whose every attribute on the server is its own: the push of an earlier
            // form of it went through, its answer lost, and it was edited here since; the push
            // sends the rest over it (``completingCreate``).
            // (Edited to other values, or removed, since: every attribute the record holds is the
            // create's now, or what the lost push sent of it; and it holds all that push sent,
            // else another device changed it since, a conflict: a black-box probe found another
            // device's removal undone.)
            let earlierForm = change.kind == .create && Self.holdsOnlyOwnValues(attributes, of: change)
            if change.kind != .create || earlierForm {
                return .conflict(message: text, code: "412", serverCopy: attributes, serverVersion: .int(version))
            }
            return .refused(message: text, code: "412", serverCopy: attributes)
        case 401:
            throw SyncError(.unauthorized, "\(what): Kinto did not accept the user name and password: \(message)", httpStatus: 401)
        case 408, 409, 429, 500...:
            return .retryLater(message: "\(message) (HTTP \(status))")
        default:
            return .refused(message: "\(message) (HTTP \(status))", code: String(status))
        }
    }

    // MARK: - Buckets and collections

    func collectionPath(_ model: String) -> String {
        "buckets/\(SyncHTTPClient.escape(configuration.bucket))/collections/\(KintoMapping.recordID(model))"
    }

    /// Whether a 404 is about the bucket or the collection (errno 111) rather than a record.
    static func missingContainer(_ answer: SyncHTTPClient.Response) -> Bool {
        (try? answer.json(""))?["errno"]?.intValue == 111
    }

    /// The attributes of record `id` of `model` when this user may read it (nil otherwise, or
    /// when it is no object).
    func readableCopy(_ id: String, model: String, context: OutcomeContext) async throws -> JSONObject? {
        try await readableRecord(id, model: model, context: context)?.attributes
    }

    /// Record `id` of `model`, its attributes and version, when this user may read it (nil
    /// otherwise, or when it is no object).
    func readableRecord(_ id: String, model: String, context: OutcomeContext) async throws -> (attributes: JSONObject, version: Int64)? {
        let answer = try await send("GET", try root(collectionPath(model) + "/records/" + KintoMapping.recordID(id)), what: "read of \(model) \(id)")
        guard answer.status == 200, let data = (try? answer.json(""))?["data"],
            case .object(_, let attributes, let version)? = KintoMapping.record(data, attachmentAs: context.blobAttribute)?.record
        else { return nil }
        return (attributes, version)
    }

    /// A delete of an object whose create's answer was lost goes with no version to match: its
    /// record is read first. One that holds only this device's values (the object's last ones,
    /// or what the lost push sent) is deleted guarded by its version; one another device changed
    /// since is a refusal with its copy, as a `412` (a black-box probe: the `DELETE` went
    /// unguarded, and destroyed the other device's edit). Nil: nothing there, the delete goes.
    func guardingUnversionedDelete(_ change: inout OutgoingChange, model: String, context: OutcomeContext) async throws -> PushOutcome? {
        guard change.kind == .delete, change.baseVersion == nil,
            let (attributes, version) = try await readableRecord(change.objectID, model: model, context: context)
        else { return nil }
        guard Self.holdsOnlyOwnValues(attributes, of: change) else {
            return .refused(message: "the record was modified on the server meanwhile", code: "412", serverCopy: attributes)
        }
        change.baseVersion = .int(version)
        return nil
    }

    /// Whether a record (its `attributes`) holds nothing but what this device made it: each of
    /// its attributes is the change's now, or what a lost push of it sent; and it holds all that
    /// push sent (or the change's value now), else another device changed it since.
    static func holdsOnlyOwnValues(_ attributes: JSONObject, of change: OutgoingChange) -> Bool {
        attributes.allSatisfy { name, value in change.attributes[name] == value || change.sentValues[name] == value }
            && change.sentValues.allSatisfy { name, value in attributes[name] == value || attributes[name] == change.attributes[name] }
    }

    /// A create refused with 412 over a record that holds only its own values (an earlier form
    /// of it, whose answer was lost, edited here since), or only nulls (no object). What the
    /// record lacks is patched over it, guarded by its version; without that version, `refusal`.
    func completingCreate(
        _ create: OutgoingChange, serverCopy: JSONObject, version: JSONValue?, refusal: PushOutcome, model: String, context: OutcomeContext
    ) async throws -> PushOutcome {
        guard let version = version?.intValue else { return refusal }
        var rest = create
        rest.kind = .update
        rest.attributes = create.attributes.filter { name, value in serverCopy[name] != value && !value.isNull }
        // What the lost push sent and this device removed since goes as a removal.
        for name in create.removedSinceSent where serverCopy[name] == create.sentValues[name] { rest.attributes[name] = .null }
        rest.baseVersion = .int(version)
        let outcome: PushOutcome
        if Self.removesAttributes(rest) {
            outcome = try await patchAlone(rest, model: model, context: context).outcome
        } else {
            let url = try root(collectionPath(model) + "/records/" + KintoMapping.recordID(create.objectID))
            let body: JSONObject = ["data": .object(KintoMapping.data(rest.attributes))]
            let answer = try await send(
                "PATCH", url, headers: ["If-Match": "\"\(version)\""], body: Data(body.jsonBytes), what: "push to \(model)")
            outcome = try Self.outcome(of: rest, status: answer.status, body: (try? answer.json("")) ?? .null, context: context, "push to \(model)")
        }
        // Changed again meanwhile: a refusal, with the record as it is now.
        if case .conflict(let message, let code, let serverCopy, _) = outcome {
            return .refused(message: message, code: code, serverCopy: serverCopy)
        }
        return outcome
    }

    /// After a write refused with 403: whether this user may read the model's collection at all.
    /// One who may not is not refused a record but the bucket (under basic auth, a wrong password
    /// is another user): the push fails, and its changes stay pending instead of becoming refused
    /// changes.
    func checkCollectionAccess(_ model: String, _ what: String) async throws {
        let answer = try await send("GET", root(collectionPath(model)), what: what)
        guard answer.status == 403 else { return try check(answer, what) }
        throw SyncError(
            .server,
            "\(what): Kinto refused the writes, and this user may not use bucket \(configuration.bucket) (under basic auth, a wrong password is another user)",
            httpStatus: 403)
    }

    /// Creates the bucket and the model's collection, unless they exist.
    func ensureCollection(_ model: String) async throws {
        let empty = Data(#"{"data":{}}"#.utf8)
        let bucket = try await send(
            "PUT", root("buckets/\(SyncHTTPClient.escape(configuration.bucket))"), headers: ["If-None-Match": "*"], body: empty,
            what: "creating bucket \(configuration.bucket)")
        // 412: it exists. 403: it may exist, writable by others only; the collection tells.
        if ![201, 412, 403].contains(bucket.status) { try check(bucket, "creating bucket \(configuration.bucket)") }
        let what = "creating collection \(model) in bucket \(configuration.bucket)"
        let collection = try await send("PUT", root(collectionPath(model)), headers: ["If-None-Match": "*"], body: empty, what: what)
        if collection.status == 201 { state.withLock { _ = $0.collectionsMade.insert(model) } }
        if ![201, 412].contains(collection.status) { try check(collection, what) }
    }

    // MARK: - HTTP

    func root(_ path: String, _ query: [(String, String)] = []) throws(SyncError) -> URL {
        try SyncHTTPClient.url(configuration.url, path, query)
    }

    /// Sends a request with basic auth, honouring and recording the server's `Backoff`.
    func send(
        _ method: String, _ url: URL, headers: [String: String] = [:], body: Data? = nil, credentials: Credentials? = nil, maximumBytes: Int? = nil,
        what: String
    ) async throws(SyncError) -> SyncHTTPClient.Response {
        let (stored, backoff) = state.withLock { ($0.credentials, $0.backoffUntil) }
        if let backoff {
            let left = backoff - ContinuousClock.now
            if left > .zero {
                throw SyncError(.server, "\(what): Kinto asked clients to back off for \(left.components.seconds + 1) more seconds", retryAfter: left)
            }
        }
        guard let credentials = credentials ?? stored else {
            throw SyncError(
                .notLoggedIn,
                "\(what): Kinto asks for the password on every request, and this process has none: log in again (satchel sync: pass --user and --password)"
            )
        }
        var headers = headers
        headers["Authorization"] = SyncHTTPClient.basicAuthorization(credentials)
        var answer = try await http.send(method, url, headers: headers, body: body, maximumBytes: maximumBytes)
        // 409 errno 122, "Integrity constraint violated, please retry": two writes raced for the
        // same timestamp on Kinto's PostgreSQL backend, and this one was rolled back whole (a
        // batch included). Sending it again is what Kinto asks.
        var attempts = 1
        while answer.status == 409, attempts < Self.raceAttempts, (try? answer.json(""))?["errno"]?.intValue == 122 {
            answer = try await http.send(method, url, headers: headers, body: body, maximumBytes: maximumBytes)
            attempts += 1
        }
        if let seconds = answer.header("backoff").flatMap({ Int64($0.trimmingCharacters(in: .whitespaces)) }), seconds > 0 {
            state.withLock { $0.backoffUntil = ContinuousClock.now + .seconds(seconds) }
        }
        return answer
    }

    /// Throws the error an answer other than 2xx stands for.
    func check(_ answer: SyncHTTPClient.Response, _ what: String) throws(SyncError) {
        do throws(SyncError) { try checkStatus(answer, what) } catch { throw error.at(answer.url.path) }
    }

    func checkStatus(_ answer: SyncHTTPClient.Response, _ what: String) throws(SyncError) {
        guard !(200..<300).contains(answer.status) else { return }
        let message = (try? answer.json("")).flatMap(Self.message(of:)) ?? answer.text
        let detail = message.isEmpty ? "" : ": \(message)"
        switch answer.status {
        case 401:
            throw SyncError(.unauthorized, "\(what): Kinto did not accept the user name and password\(detail)", httpStatus: 401)
        case 403:
            throw SyncError(
                .server, "\(what): this user may not use bucket \(configuration.bucket)\(detail)", httpStatus: 403)
        default:
            throw SyncError(.server, "\(what) failed with HTTP \(answer.status)\(detail)", httpStatus: answer.status, retryAfter: answer.retryAfter)
        }
    }

    /// The text of a Kinto error body (`{"code","errno","error","message"}`).
    static func message(of body: JSONValue) -> String? { body["message"]?.stringValue ?? body["error"]?.stringValue }

}
