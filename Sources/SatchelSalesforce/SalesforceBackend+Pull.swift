public import Foundation
package import Satchel
public import SatchelSync

extension SalesforceBackend {
    /// Where a pull stands, stored with each page.
    struct Cursor {
        /// The greatest `LastModifiedDate` applied, as the server wrote it.
        var since: String?
        /// The records applied at `since`: id → a hash of the record as received (at most
        /// ``rememberedAtSecond`` of them).
        var at: [String: String] = [:] {
            didSet { atJSON = nil }
        }
        /// `at` as it came in the cursor, while unchanged: a bulk load's pages meet the same
        /// full list page after page, and writing it out again (sorted) was a tenth of a page's
        /// reading.
        private var atJSON: JSONValue?
        /// The next page of the query under way (`nextRecordsUrl`).
        var next: String?
        /// Where the next `getDeleted` starts (the server's time).
        var deletedFrom: String?
        /// Whether the query under way asks for every record of the model (no `LastModifiedDate`
        /// bound, no `LIMIT`), so that its `totalSize` is what the org holds for it.
        var counts = false
        /// Whether the query was asked again because its next page's URL answered no page, and
        /// no next page was read since: a second such answer fails the pull, which would
        /// otherwise ask again for ever (a black-box probe).
        var askedAgain = false

        init(_ value: JSONValue?) {
            since = value?["since"]?.stringValue
            next = value?["next"]?.stringValue
            deletedFrom = value?["deleted"]?.stringValue
            counts = value?["counts"]?.boolValue ?? false
            askedAgain = value?["again"]?.boolValue ?? false
            let stored = value?["at"]?.objectValue ?? JSONObject()
            for (id, hash) in stored { at[id] = hash.stringValue }
            // Kept only when it says exactly what `at` holds (every hash a string).
            if !at.isEmpty && at.count == stored.count { atJSON = .object(stored) }
        }

        var json: JSONValue {
            var object = JSONObject()
            if let since { object["since"] = .string(since) }
            if !at.isEmpty { object["at"] = atJSON ?? .object(JSONObject(at.map { ($0.key, JSONValue.string($0.value)) })) }
            if let next { object["next"] = .string(next) }
            if let deletedFrom { object["deleted"] = .string(deletedFrom) }
            if counts { object["counts"] = .bool(true) }
            if askedAgain { object["again"] = .bool(true) }
            return .object(object)
        }
    }

    public func pull(_ request: PullRequest) async throws -> PullPage {
        let object = request.model.name
        let what = "pull of \(object)"
        var cursor = Cursor(request.cursor)
        var page = PullPage()
        // The describe, before each pull starts (a 304 when it did not change).
        var describe: SalesforceDescribe
        if cursor.next == nil {
            let (fresh, metadata) = try await self.describe(object, stored: request.metadata, session: request.session)
            describe = fresh
            page.metadata = metadata
        } else {
            describe = try await describeForPull(request)
        }
        page.schema.associations = describe.associations
        page.schema.blobAttributes = describe.blobFields
        page.schema.choices = describe.choices
        // Typed attributes: describe's fields, and the extra-query ones (a relationship field
        // such as `Owner.Name` arrives as an object).
        var types = describe.attributeTypes
        for extra in request.configuration.extraAttributes where types[extra] == nil {
            let head = String(extra.split(separator: ".").first ?? Substring(extra))
            types[head] = extra.contains(".") ? .object : .any
        }
        page.schema.attributeTypes = types

        var followed: SyncHTTPClient.Response? = nil
        if let next = cursor.next {
            guard next.hasPrefix("/services/data/") else {
                throw SyncError(.protocolViolation, "\(what): the next page is not on this server (\(next))")
            }
            let locator = try await send(
                "GET", try SyncHTTPClient.url(configuration.url, String(next.dropFirst())), session: request.session, what: what)
            // An org forgets a query's locator (after 15 idle minutes, or two days), and a URL
            // that answers no page of a query (a 404, another resource: a black-box probe, where
            // the stored URL failed every later sync) holds none: the pull asks its query again
            // from the cursor, whose second and records at it say what was applied already.
            if Self.answersNoPage(locator, of: object) {
                guard !cursor.askedAgain else {
                    throw SyncError(
                        .protocolViolation,
                        "\(what): the next page's URL answered no page of the query (HTTP \(locator.status)), again after the query was asked again: the sync stops there"
                    )
                }
                cursor.next = nil
                cursor.askedAgain = true
            } else {
                followed = locator
                cursor.askedAgain = false
            }
        }
        let answer: SyncHTTPClient.Response
        if let followed {
            answer = followed
        } else {
            // A query from no `since` and without a fetch limit selects every record: its
            // totalSize is the model's total. A delta's counts the delta (and records of the
            // cursor's second that are skipped), a limited one at most the limit.
            cursor.counts = cursor.since == nil && !(request.cursor == nil && request.configuration.fetchLimit != nil)
            let soql = Self.soql(describe, request.configuration, since: cursor.since, limited: request.cursor == nil)
            // The page size, within what Salesforce accepts (200 to 2,000).
            let options = ["Sforce-Query-Options": "batchSize=\(min(2000, max(200, request.pageSize)))"]
            answer = try await send(
                "GET", try await api("query", [("q", soql)], session: request.session), headers: options, session: request.session, what: what)
        }
        try check(answer, what)
        try readQueryAnswer(answer, into: &page, cursor: &cursor, blobFields: Set(describe.blobFields), what: what)
        if page.done {
            cursor.askedAgain = false
            let serverTime = answer.header("date").flatMap(Self.httpDate) ?? cursor.since.flatMap(Self.instant)
            try await deletions(object, into: &page, cursor: &cursor, serverTime: serverTime, session: request.session)
        }
        page.nextCursor = cursor.json
        return page
    }

    /// Whether the answer to a next page's URL is no page of a query of `object`, to ask again
    /// from the cursor: a 400 or 404 (`INVALID_QUERY_LOCATOR`, or a URL the org does not serve),
    /// a success without `records` and `done`, or a page of records of another object (their
    /// `attributes.type`: a black-box probe, where a Contact was stored as an Account and the
    /// cursor passed an Account). A refused token, a limit or a server error is left to fail as
    /// it would (the pull is tried again later).
    static func answersNoPage(_ answer: SyncHTTPClient.Response, of object: String) -> Bool {
        switch answer.status {
        case 400, 404: return true
        case 200..<300:
            guard let body = try? answer.json("a next page") else { return true }
            guard let records = body["records"]?.arrayValue, body["done"]?.boolValue != nil else { return true }
            return records.contains { record in record["attributes"]?["type"]?.stringValue.map { $0 != object } ?? false }
        default: return false
        }
    }

    /// Reads a query's answer into `page`: its records as upserts (those at the cursor's second
    /// that were applied already skipped), its total when the cursor says the query selects every
    /// record of the model (a non-negative `totalSize`; none otherwise), whether it is done, and
    /// the cursor past it (the newest second and the records at it, the next page's URL).
    /// Package-visible so that the fuzz targets read answers through the code a pull runs.
    ///
    /// - Throws: ``SyncError`` `.protocolViolation` for an answer without `records` and `done`, a
    ///   record without a string `Id` or without a `LastModifiedDate` that is a datetime, or a
    ///   next page on another server.
    package func readQueryAnswer(
        _ answer: SyncHTTPClient.Response, into page: inout PullPage, cursor: JSONValue?, blobFields: Set<String>, what: String
    ) throws(SyncError) {
        var cursor = Cursor(cursor)
        try readQueryAnswer(answer, into: &page, cursor: &cursor, blobFields: blobFields, what: what)
        page.nextCursor = cursor.json
    }

    /// ``readQueryAnswer(_:into:cursor:blobFields:what:)`` on a cursor already read, moved past
    /// the answer (`page.nextCursor` is left for the caller to write).
    func readQueryAnswer(
        _ answer: SyncHTTPClient.Response, into page: inout PullPage, cursor: inout Cursor, blobFields: Set<String>, what: String
    ) throws(SyncError) {
        let body = try answer.json(what)
        guard let records = body["records"]?.arrayValue, let done = body["done"]?.boolValue else {
            throw SyncError(.protocolViolation, "\(what): the answer has no `records` list and `done` flag")
        }
        page.totalCount = nil
        if cursor.counts, let total = body["totalSize"]?.intValue.flatMap({ Int(exactly: $0) }), total >= 0 { page.totalCount = total }
        // Records at the newest second: their hashes, for the next pull to skip them.
        var newest: (since: String, at: [String: String])? = cursor.since.map { ($0, cursor.at) }
        // The last `LastModifiedDate` found to be a datetime: records in their order share it.
        var lastDatetime: String?
        for value in records {
            guard let fields = value.objectValue, let id = fields["Id"]?.stringValue, !id.isEmpty else {
                throw SyncError(.protocolViolation, "\(what): a record without a string `Id`")
            }
            // Every query selects it, and every record has one: without it, an answer is no
            // answer to the query (and the record would replace the object with what it holds).
            guard let modified = fields["LastModifiedDate"]?.stringValue, modified == lastDatetime || Self.instant(modified) != nil else {
                throw SyncError(.protocolViolation, "\(what): record \(id)'s `LastModifiedDate` is missing or not a datetime")
            }
            lastDatetime = modified
            // Applied already.
            if modified == cursor.since, let applied = cursor.at[id], applied == Self.hash(Self.received(fields)) { continue }
            if newest.map({ Self.later(modified, than: $0.since) }) ?? true {
                newest = (modified, [:])
            }
            // Hashed below, once the newest second is known. Only so many are remembered: the
            // cursor is stored with every page, and a bulk load puts thousands of records in one
            // second (kept whole, the cursor grew with each page: a pull of 20,000 records spent
            // half its time on it). One not remembered is applied again by the next pull, which
            // writes nothing for an object the store holds as it came.
            if modified == newest?.since, newest?.at.count ?? 0 < Self.rememberedAtSecond { newest?.at[id] = "" }
            var attributes = fields.filter { name, field in name != "Id" && name != "attributes" && !field.isNull }
            var blobs: [String: String] = [:]
            for (name, field) in attributes {
                // A related record (`Owner.Name`) comes with its own `attributes`.
                if case .object(var related) = field {
                    related.removeValue(forKey: "attributes")
                    attributes[name] = .object(related)
                }
                if blobFields.contains(name), let path = field.stringValue, path.hasPrefix("/services/data/") {
                    blobs[name] = configuration.url.absoluteString.trimmingSuffix("/") + path
                }
            }
            page.upserts.append(ServerObject(id: id, attributes: attributes, isWhole: true, version: .string(modified), blobURLs: blobs))
        }
        if var newest {
            for value in records {
                guard let id = value["Id"]?.stringValue, newest.at[id] == "", let fields = value.objectValue else { continue }
                newest.at[id] = Self.hash(Self.received(fields))
            }
            cursor.since = newest.since
            if newest.at != cursor.at { cursor.at = newest.at }
        }
        cursor.next = nil
        if done { cursor.counts = false }
        if !done {
            guard let next = body["nextRecordsUrl"]?.stringValue, next.hasPrefix("/services/data/") else {
                throw SyncError(.protocolViolation, "\(what): the answer is not done and has no `nextRecordsUrl` on this server")
            }
            cursor.next = next
        }
        page.done = done
    }

    /// The SOQL of a pull: describe's fields (or the attribute list), less ignored ones, plus the
    /// extra ones, less device-only ones, each once; `LastModifiedDate >= since` and the
    /// filter; by `LastModifiedDate, Id`, or, for a first pull with a fetch limit, the first N
    /// in the fetch order.
    static func soql(
        _ describe: SalesforceDescribe, _ configuration: ModelSyncConfiguration, since: String?, limited first: Bool
    ) -> String {
        var names: [String] = ["Id", "LastModifiedDate"]
        let base = configuration.onlyAttributes ?? describe.fields.map(\.name)
        for name in base.filter({ !configuration.ignoredAttributes.contains($0) }) + configuration.extraAttributes
        where !configuration.deviceOnlyAttributes.contains(name) {
            if !names.contains(where: { $0.caseInsensitiveCompare(name) == .orderedSame }) { names.append(name) }
        }
        var conditions: [String] = []
        if let since, let instant = instant(since) { conditions.append("LastModifiedDate >= \(soqlDate(instant))") }
        if let filter = configuration.serverFilter?["soql"]?.stringValue, !filter.isEmpty { conditions.append("(\(filter))") }
        var text = "SELECT \(names.joined(separator: ", ")) FROM \(describe.name)"
        if !conditions.isEmpty { text += " WHERE " + conditions.joined(separator: " AND ") }
        if first, let limit = configuration.fetchLimit {
            // As MM_RSF does: the first N in the fetch order (by Id when none is given).
            let order = configuration.fetchOrder.isEmpty ? ["Id"] : configuration.fetchOrder.map { "\($0.field) \($0.descending ? "DESC" : "ASC")" }
            text += " ORDER BY \(order.joined(separator: ", ")) LIMIT \(limit)"
        } else {
            text += " ORDER BY LastModifiedDate, Id"
        }
        return text
    }

    /// The records deleted since the last pull (`getDeleted`), added to the page; when the
    /// server no longer covers that window, the page asks the engine to reconcile ids instead.
    func deletions(_ object: String, into page: inout PullPage, cursor: inout Cursor, serverTime: Date?, session: SyncSession) async throws {
        guard let serverTime else { return }
        guard let start = cursor.deletedFrom.flatMap(Self.instant) else {
            // The first pull: deletions are counted from the server's time now.
            cursor.deletedFrom = Self.isoDate(serverTime)
            return
        }
        // Seconds are ignored, and the end must be more than a minute after the start: the two
        // minutes, seconds dropped, more than one apart.
        func minute(_ date: Date) -> Double { (date.timeIntervalSince1970 / 60).rounded(.down) }
        guard minute(serverTime) - minute(start) > 1 else { return }
        let what = "deleted records of \(object)"
        let query = [("start", Self.isoDate(start)), ("end", Self.isoDate(serverTime))]
        let answer = try await send(
            "GET", try await api("sobjects/\(SyncHTTPClient.escape(object))/deleted/", query, session: session), session: session, what: what)
        if answer.status == 400, Self.error(answer).code == "INVALID_REPLICATION_DATE" {
            page.reconcileIDs = true
            cursor.deletedFrom = Self.isoDate(serverTime)
            return
        }
        try check(answer, what)
        let body = try answer.json(what)
        guard let deleted = body["deletedRecords"]?.arrayValue, let covered = body["latestDateCovered"]?.stringValue.flatMap(Self.instant) else {
            throw SyncError(.protocolViolation, "\(what): the answer has no `deletedRecords` list and `latestDateCovered`")
        }
        if let earliest = body["earliestDateAvailable"]?.stringValue.flatMap(Self.instant), earliest > start {
            page.reconcileIDs = true
            cursor.deletedFrom = Self.isoDate(serverTime)
            return
        }
        for record in deleted {
            guard let id = record["id"]?.stringValue else { throw SyncError(.protocolViolation, "\(what): a deleted record without an `id`") }
            page.deletes.append(id)
        }
        cursor.deletedFrom = Self.isoDate(covered)
    }

    /// Every id the server holds for the model (matching its filter): `SELECT Id FROM O`.
    public func remoteIDs(_ request: PullRequest) async throws -> [String] {
        let what = "listing the ids of \(request.model.name)"
        var soql = "SELECT Id FROM \(request.model.name)"
        if let filter = request.configuration.serverFilter?["soql"]?.stringValue, !filter.isEmpty { soql += " WHERE (\(filter))" }
        var ids: [String] = []
        try await eachRecord(ofQuery: soql, session: request.session, what: what) { record in
            guard let id = record["Id"]?.stringValue else { throw SyncError(.protocolViolation, "\(what): a record without an `Id`") }
            ids.append(id)
        }
        return ids
    }

    /// Calls `body` with each record `soql` answers, page after page (`nextRecordsUrl`) until the
    /// answer is done.
    func eachRecord(ofQuery soql: String, session: SyncSession, what: String, _ body: (JSONValue) throws -> Void) async throws {
        var url = try await api("query", [("q", soql)], session: session)
        while true {
            let answer = try await send("GET", url, session: session, what: what)
            try check(answer, what)
            let page = try answer.json(what)
            guard let records = page["records"]?.arrayValue else { throw SyncError(.protocolViolation, "\(what): the answer has no `records` list") }
            for record in records { try body(record) }
            guard page["done"]?.boolValue == false else { return }
            guard let next = page["nextRecordsUrl"]?.stringValue, next.hasPrefix("/services/data/") else {
                throw SyncError(.protocolViolation, "\(what): the answer is not done and has no `nextRecordsUrl` on this server")
            }
            url = try SyncHTTPClient.url(configuration.url, String(next.dropFirst()))
        }
    }

    /// A blob's bytes (a `base64` field's URL), with the bearer token.
    public func downloadBlob(_ url: String, session: SyncSession) async throws -> Data {
        // A record's base64 field holds the path (`/services/data/…`): what a blob a first
        // sync skipped is downloaded from by the next one (a black-box probe: refused).
        let url = url.hasPrefix("/services/data/") ? configuration.url.absoluteString.trimmingSuffix("/") + url : url
        guard let target = URL(string: url), url.hasPrefix(configuration.url.absoluteString) else {
            throw SyncError(.protocolViolation, "blob download: '\(url)' is not on this server")
        }
        let answer = try await send("GET", target, session: session, what: "blob download", maximumBytes: configuration.limits.maximumDownloadBytes)
        try check(answer, "blob download")
        return answer.body
    }

    // MARK: - Dates

    /// A record's content, to tell a record applied already from one changed within the same
    /// second.
    /// The most records at the newest second a cursor remembers as applied.
    static let rememberedAtSecond = 1_000

    /// A record as it is hashed: without Salesforce's `attributes` and without nulls.
    static func received(_ fields: JSONObject) -> JSONObject {
        fields.filter { name, value in name != "attributes" && !value.isNull }
    }

    static func hash(_ fields: JSONObject) -> String {
        var hasher = FNV()
        hasher.add(fields.jsonBytes)
        return String(hasher.value, radix: 36)
    }

    /// Whether datetime `a` is after `b`. Salesforce writes every datetime alike
    /// (`2024-05-01T10:00:00.000+0000`): those compare as text; others are parsed.
    static func later(_ a: String, than b: String) -> Bool {
        if a.utf8.count == b.utf8.count && a.hasSuffix("+0000") && b.hasSuffix("+0000") { return a > b }
        return (instant(a) ?? .distantPast) > (instant(b) ?? .distantPast)
    }

    /// Salesforce's datetimes: `2024-05-01T10:00:00.000+0000` (and ISO 8601's `Z` and `+hh:mm`,
    /// with or without a fraction). Parsed by `Date.ISO8601FormatStyle`, never by ICU's date
    /// parser (`ISO8601DateFormatter`), which divides by zero on a fraction of 60 digits.
    package static func instant(_ text: String) -> Date? {
        if let date = try? withFraction.parse(text) { return date }
        return try? withoutFraction.parse(text)
    }

    private static let withFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    private static let withoutFraction = Date.ISO8601FormatStyle()

    /// A datetime as a SOQL literal (UTC, whole seconds, unquoted).
    static func soqlDate(_ date: Date) -> String { isoDate(Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down))) }

    /// A datetime for `getDeleted`'s `start` and `end` (UTC, whole seconds).
    static func isoDate(_ date: Date) -> String { Date.ISO8601FormatStyle().format(date) }

    /// An HTTP `Date` header (see `HTTPDate`); nil for anything else, and the caller falls back to
    /// the cursor's time.
    package static func httpDate(_ text: String) -> Date? { HTTPDate.lastDate(inField: text) }
}

/// FNV-1a, 64 bits: a record's content hash (not for security).
struct FNV {
    var value: UInt64 = 0xcbf2_9ce4_8422_2325
    mutating func add(_ bytes: [UInt8]) {
        for byte in bytes {
            value ^= UInt64(byte)
            value = value &* 0x100_0000_01b3
        }
    }
}

extension String {
    func trimmingSuffix(_ suffix: String) -> String { hasSuffix(suffix) ? String(dropLast(suffix.count)) : self }
}
