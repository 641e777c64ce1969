import Foundation
import LoopbackSupport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SalesforceTestServer
import Testing

/// The loopback Salesforce itself, over HTTP with URLSession: what it answers must be what
/// Salesforce's REST API answers, or the adapter's tests prove nothing.
// One test at a time: each starts a loopback server, whose socket pool holds a Dispatch thread
// in epoll_wait while it runs. Every such test at once, beside the other suites, reached
// Dispatch's limit of threads in full runs: URLSession's queues got none, and clients timed out.
@Suite("Loopback Salesforce on the wire", .serialized)
struct SalesforceServerWireTests {
    /// An answer: status, headers by lower-cased name, body.
    struct Reply {
        var status: Int
        var headers: [String: String]
        var body: Data

        var json: Any? { try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]) }
        var object: [String: Any] { json as? [String: Any] ?? [:] }
        var array: [[String: Any]] { json as? [[String: Any]] ?? [] }
        /// The `errorCode` of a REST error array.
        var errorCode: String? { array.first?["errorCode"] as? String }
        var message: String { array.first?["message"] as? String ?? "" }
        var records: [[String: Any]] { object["records"] as? [[String: Any]] ?? [] }
    }

    // MARK: - Client

    /// A started org and a token of ann's.
    static func start(_ fixture: String = "org") async throws -> (SalesforceServer, String) {
        let server = try await SalesforceServer.start(try SalesforceFixture.named(fixture))
        return (server, await server.token(for: "ann"))
    }

    /// `/services/data/v59.0/` + `path`.
    static func api(_ server: SalesforceServer, _ path: String) -> String { "/services/data/v\(server.version)/\(path)" }

    /// Percent-encodes a query value strictly (`+`, `:` and spaces included).
    static func encode(_ text: String) -> String {
        text.addingPercentEncoding(
            withAllowedCharacters: CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")) ?? text
    }

    static func send(
        _ server: SalesforceServer, _ method: String, _ path: String, query: [(String, String)] = [], token: String? = nil,
        json: Any? = nil, form: [(String, String)]? = nil, headers: [String: String] = [:]
    ) async throws -> Reply {
        var text = server.url.absoluteString + path
        if !query.isEmpty { text += "?" + query.map { "\(encode($0.0))=\(encode($0.1))" }.joined(separator: "&") }
        var request = URLRequest(url: try #require(URL(string: text)))
        request.httpMethod = method
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let json {
            request.httpBody = try JSONSerialization.data(withJSONObject: json)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        if let form {
            request.httpBody = Data(form.map { "\(encode($0.0))=\(encode($0.1))" }.joined(separator: "&").utf8)
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        var lowered: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { lowered[name.lowercased()] = value }
        }
        return Reply(status: http.statusCode, headers: lowered, body: data)
    }

    static func query(_ server: SalesforceServer, _ token: String, _ soql: String, all: Bool = false) async throws -> Reply {
        try await send(server, "GET", api(server, all ? "queryAll" : "query"), query: [("q", soql)], token: token)
    }

    /// The per-record results of a collection call: `(success, id, first statusCode)`.
    static func results(_ reply: Reply) -> [(success: Bool, id: String?, code: String?)] {
        reply.array.map { result in
            let errors = result["errors"] as? [[String: Any]] ?? []
            return (result["success"] as? Bool ?? false, result["id"] as? String, errors.first?["statusCode"] as? String)
        }
    }

    // MARK: - Versions and sessions

    @Test("GET /services/data/ lists the versions without a token; an unknown version is 404 NOT_FOUND")
    func versions() async throws {
        let (server, token) = try await Self.start()
        defer { Task { await server.stop() } }
        let reply = try await Self.send(server, "GET", "/services/data/")
        #expect(reply.status == 200)
        #expect(reply.array.map { $0["version"] as? String } == ["57.0", "58.0", "59.0"])
        #expect(reply.array.last?["url"] as? String == "/services/data/v59.0")
        #expect(reply.array.last?["label"] as? String == "Winter '24")
        #expect(server.version == "59.0")
        let unknown = try await Self.send(server, "GET", "/services/data/v12.0/sobjects", token: token)
        #expect(unknown.status == 404 && unknown.errorCode == "NOT_FOUND")
        #expect(reply.headers["date"]?.hasSuffix(" GMT") == true)
    }

    @Test("401 INVALID_SESSION_ID without a token and after expireTokens; the password grant, refresh and userinfo work")
    func sessions() async throws {
        let (server, held) = try await Self.start()
        defer { Task { await server.stop() } }
        let none = try await Self.send(server, "GET", Self.api(server, "sobjects"))
        #expect(none.status == 401 && none.errorCode == "INVALID_SESSION_ID" && none.message == "Session expired or invalid")
        #expect(try await Self.send(server, "GET", Self.api(server, "sobjects"), token: held).status == 200)

        let bad = try await Self.send(
            server, "POST", "/services/oauth2/token", form: [("grant_type", "password"), ("username", "ann"), ("password", "nope")])
        #expect(bad.status == 400 && bad.object["error"] as? String == "invalid_grant")
        let login = try await Self.send(
            server, "POST", "/services/oauth2/token",
            form: [("grant_type", "password"), ("client_id", "x"), ("client_secret", "y"), ("username", "ann"), ("password", "secret")])
        #expect(login.status == 200 && login.object["token_type"] as? String == "Bearer")
        #expect(login.object["instance_url"] as? String == server.url.absoluteString)
        let access = try #require(login.object["access_token"] as? String)
        let refresh = try #require(login.object["refresh_token"] as? String)
        let info = try await Self.send(server, "GET", "/services/oauth2/userinfo", token: access)
        #expect(info.object["preferred_username"] as? String == "ann" && (info.object["user_id"] as? String)?.hasPrefix("005") == true)

        await server.expireTokens()
        for token in [held, access] {
            let expired = try await Self.send(server, "GET", Self.api(server, "sobjects"), token: token)
            #expect(expired.status == 401 && expired.errorCode == "INVALID_SESSION_ID")
        }
        let refreshed = try await Self.send(
            server, "POST", "/services/oauth2/token", form: [("grant_type", "refresh_token"), ("refresh_token", refresh)])
        let fresh = try #require(refreshed.object["access_token"] as? String)
        #expect(fresh != access && refreshed.object["refresh_token"] == nil)
        #expect(try await Self.send(server, "GET", Self.api(server, "sobjects"), token: fresh).status == 200)
        let handed = await server.token(for: "ann")
        #expect(try await Self.send(server, "GET", Self.api(server, "sobjects"), token: handed).status == 200)
        let wrong = try await Self.send(server, "POST", "/services/oauth2/token", form: [("grant_type", "refresh_token"), ("refresh_token", "nope")])
        #expect(wrong.status == 400 && wrong.object["error"] as? String == "invalid_grant")
    }

    // MARK: - Describe

    @Test("describe: system fields, picklists with validFor, a formula field; If-Modified-Since → 304 until touchDescribe")
    func describe() async throws {
        let (server, token) = try await Self.start()
        defer { Task { await server.stop() } }
        let path = Self.api(server, "sobjects/Account/describe")
        let reply = try await Self.send(server, "GET", path, token: token)
        #expect(reply.status == 200 && reply.object["keyPrefix"] as? String == "001")
        let fields = Dictionary(uniqueKeysWithValues: (reply.object["fields"] as? [[String: Any]] ?? []).map { ($0["name"] as? String ?? "", $0) })
        for name in ["Id", "IsDeleted", "CreatedDate", "LastModifiedDate", "SystemModstamp"] {
            #expect(fields[name]?["createable"] as? Bool == false && fields[name]?["updateable"] as? Bool == false, "\(name)")
        }
        #expect(fields["Id"]?["type"] as? String == "id" && fields["LastModifiedDate"]?["type"] as? String == "datetime")
        let tier = try #require(fields["Tier__c"])
        #expect(tier["controllerName"] as? String == "Industry" && tier["dependentPicklist"] as? Bool == true)
        let tiers = tier["picklistValues"] as? [[String: Any]] ?? []
        #expect(tiers.map { $0["value"] as? String } == ["Gold", "Silver", "Bronze"])
        #expect(tiers.map { $0["validFor"] as? String } == ["UAAA", "wAAA", "oAAA"])
        #expect(fields["Industry"]?["restrictedPicklist"] as? Bool == true)
        // The controller lists an inactive value first: validFor's bit 0 is it.
        let industries = fields["Industry"]?["picklistValues"] as? [[String: Any]] ?? []
        #expect(industries.map { $0["value"] as? String } == ["Agriculture", "Energy", "Retail", "Banking"])
        #expect(industries.map { $0["active"] as? Bool } == [false, true, true, true])
        #expect(fields["Score__c"]?["calculated"] as? Bool == true && fields["Score__c"]?["createable"] as? Bool == false)
        #expect(fields["Name"]?["nillable"] as? Bool == false)

        let modified = try #require(reply.headers["last-modified"])
        let again = try await Self.send(server, "GET", path, token: token, headers: ["If-Modified-Since": modified])
        #expect(again.status == 304 && again.body.isEmpty)
        await server.touchDescribe("Account")
        let changed = try await Self.send(server, "GET", path, token: token, headers: ["If-Modified-Since": modified])
        #expect(changed.status == 200 && changed.headers["last-modified"] != modified)
        let unknown = try await Self.send(server, "GET", Self.api(server, "sobjects/Nope/describe"), token: token)
        #expect(unknown.status == 404 && unknown.errorCode == "NOT_FOUND")
    }

    // MARK: - SOQL

    @Test("SOQL: fields in SELECT order with attributes, WHERE with IN / LIKE / OR / NOT / null, ORDER BY, LIMIT, OFFSET")
    func soql() async throws {
        let (server, token) = try await Self.start()
        defer { Task { await server.stop() } }
        let first = try await Self.query(
            server, token,
            "SELECT Name, Industry, AnnualRevenue FROM Account WHERE Industry IN ('Energy', 'Banking') AND AnnualRevenue > 1000000 ORDER BY Name DESC LIMIT 5"
        )
        #expect(first.status == 200 && first.object["totalSize"] as? Int == 2 && first.object["done"] as? Bool == true)
        #expect(first.records.map { $0["Name"] as? String } == ["Civic Bank", "Acme Energy"])
        let attributes = try #require(first.records.first?["attributes"] as? [String: Any])
        #expect(attributes["type"] as? String == "Account")
        #expect((attributes["url"] as? String)?.hasPrefix("/services/data/v59.0/sobjects/Account/001") == true)
        #expect(first.records.first?["Id"] == nil, "only what is selected")
        #expect(String(decoding: first.body, as: UTF8.self).contains(#""AnnualRevenue":12000000.0"#))

        // Keywords and names in any case, LIKE without case, nulls with != and NULLS LAST.
        let like = try await Self.query(
            server, token, "select name from account where NAME like 'ac%' or (rating = null and not industry = 'Energy')")
        #expect(Set(like.records.compactMap { $0["Name"] as? String }) == ["Acme Energy", "Civic Bank", "Echo Stores"])
        let notHot = try await Self.query(
            server, token, "SELECT Name, Rating FROM Account WHERE Rating != 'Hot' ORDER BY Rating ASC NULLS LAST, Name")
        #expect(notHot.records.map { $0["Name"] as? String } == ["Bright Retail", "Delta Power", "Civic Bank", "Echo Stores"])
        #expect(notHot.records.last.map { $0["Rating"] is NSNull } == true)
        let page = try await Self.query(server, token, "SELECT Id FROM Contact ORDER BY LastName LIMIT 2 OFFSET 1")
        #expect(page.object["totalSize"] as? Int == 2)
        let count = try await Self.query(server, token, "SELECT COUNT() FROM Contact WHERE AccountId != null")
        #expect(count.object["totalSize"] as? Int == 7 && count.records.isEmpty)
    }

    @Test("ties: writes in one second share LastModifiedDate; LastModifiedDate >= T ORDER BY LastModifiedDate, Id gives them in Id order")
    func ties() async throws {
        let (server, token) = try await Self.start("kit")
        defer { Task { await server.stop() } }
        await server.freezeClock("2026-01-02T03:04:05.000+0000")
        var ids: [String] = []
        for i in 1...5 { ids.append(await server.insert("Product", Data(#"{"name":"P\#(i)","price":\#(i)}"#.utf8))) }
        await server.advanceClock(seconds: 1)
        let later = await server.insert("Product", Data(#"{"name":"Later"}"#.utf8))
        #expect(ids.allSatisfy { $0.count == 18 && $0.hasPrefix("01t") })

        let soql = "SELECT Id, name, LastModifiedDate FROM Product WHERE LastModifiedDate >= 2026-01-02T03:04:05Z ORDER BY LastModifiedDate, Id"
        let reply = try await Self.query(server, token, soql)
        #expect(reply.records.map { $0["Id"] as? String } == ids + [later])
        #expect(reply.records.first?["LastModifiedDate"] as? String == "2026-01-02T03:04:05.000+0000")
        #expect(reply.records.last?["LastModifiedDate"] as? String == "2026-01-02T03:04:06.000+0000")
        // The same instant written with another offset; a strict > leaves only the later second.
        let offset = try await Self.query(server, token, "SELECT Id FROM Product WHERE LastModifiedDate >= 2026-01-02T05:04:05+02:00")
        #expect(offset.object["totalSize"] as? Int == 6)
        // SOQL's literals have no fraction and a colon in the offset: the form records are read in is refused.
        let readForm = try await Self.query(server, token, "SELECT Id FROM Product WHERE LastModifiedDate >= 2026-01-02T03:04:05.000+0000")
        #expect(readForm.status == 400 && readForm.errorCode == "MALFORMED_QUERY", "\(readForm.status)")
        let strict = try await Self.query(server, token, "SELECT Id FROM Product WHERE LastModifiedDate > 2026-01-02T03:04:05Z")
        #expect(strict.records.map { $0["Id"] as? String } == [later])
        // The admin's view: every field, nulls kept, no attributes.
        let stored = try #require(await server.records("Product")[later])
        let record = try #require(try JSONSerialization.jsonObject(with: stored) as? [String: Any])
        #expect(record["attributes"] == nil && record["price"] is NSNull && record["IsDeleted"] as? Bool == false)
    }

    @Test("nextRecordsUrl pages through a query of more rows than the page size")
    func paging() async throws {
        let (server, token) = try await Self.start()
        defer { Task { await server.stop() } }
        await server.setQueryPageSize(3)
        var reply = try await Self.query(server, token, "SELECT Id, LastName FROM Contact ORDER BY LastModifiedDate, Id")
        var seen: [String] = []
        var pages = 0
        while true {
            pages += 1
            #expect(reply.status == 200 && reply.object["totalSize"] as? Int == 8)
            seen += reply.records.compactMap { $0["Id"] as? String }
            guard let next = reply.object["nextRecordsUrl"] as? String else { break }
            #expect(reply.object["done"] as? Bool == false && next.hasPrefix("/services/data/v59.0/query/01g"))
            reply = try await Self.send(server, "GET", next, token: token)
            if pages > 5 { break }
        }
        #expect(pages == 3 && reply.object["done"] as? Bool == true)
        #expect(seen.count == 8 && Set(seen).count == 8)
        let gone = try await Self.send(server, "GET", Self.api(server, "query/01gNOPE-3"), token: token)
        #expect(gone.status == 400 && gone.errorCode == "INVALID_QUERY_LOCATOR")
    }

    @Test("SOQL errors: duplicate field, unknown field, malformed query, AND mixed with OR, quoted datetime, unknown object")
    func soqlErrors() async throws {
        let (server, token) = try await Self.start()
        defer { Task { await server.stop() } }
        let duplicate = try await Self.query(server, token, "SELECT Id, Name, name FROM Account")
        #expect(duplicate.status == 400 && duplicate.errorCode == "INVALID_FIELD" && duplicate.message == "duplicate field selected: Name")
        let unknown = try await Self.query(server, token, "SELECT Id, Nope FROM Account")
        #expect(
            unknown.status == 400 && unknown.errorCode == "INVALID_FIELD" && unknown.message.contains("No such column 'Nope' on entity 'Account'"))
        #expect(unknown.message.contains("ERROR at Row:1:Column:12"))
        for soql in [
            "SELECT Name FROM Account WHERE", "SELECT FROM Account", "SELECT Name FROM Account LIMIT x",
            "SELECT Name FROM Account WHERE Name = 'a' AND Rating = 'Hot' OR Industry = 'Energy'",
            "SELECT Name FROM Account WHERE Name = 'unterminated",
        ] {
            let reply = try await Self.query(server, token, soql)
            #expect(reply.status == 400 && reply.errorCode == "MALFORMED_QUERY", "\(soql)")
        }
        let quoted = try await Self.query(server, token, "SELECT Id FROM Account WHERE LastModifiedDate > '2024-05-01T00:00:00Z'")
        #expect(quoted.status == 400 && quoted.errorCode == "INVALID_FIELD" && quoted.message.contains("must be of type dateTime"))
        let object = try await Self.query(server, token, "SELECT Id FROM Nope")
        #expect(object.status == 400 && object.errorCode == "INVALID_TYPE")
    }

    // MARK: - getDeleted

    @Test("getDeleted: the delete log by minute, latestDateCovered, the window rules and an expired window")
    func deleted() async throws {
        let (server, token) = try await Self.start("kit")
        defer { Task { await server.stop() } }
        await server.freezeClock("2026-01-02T03:04:05.000+0000")
        let kept = await server.insert("Product", Data(#"{"name":"kept"}"#.utf8))
        let gone = await server.insert("Product", Data(#"{"name":"gone"}"#.utf8))
        await server.advanceClock(seconds: 30)
        await server.delete("Product", gone)
        await server.advanceClock(seconds: 120)  // the clock: 03:06:35
        let path = Self.api(server, "sobjects/Product/deleted/")
        let reply = try await Self.send(
            server, "GET", path, query: [("start", "2026-01-02T03:04:59+00:00"), ("end", "2026-01-02T03:10:00Z")], token: token)
        #expect(reply.status == 200)
        let records = reply.object["deletedRecords"] as? [[String: Any]] ?? []
        #expect(records.map { $0["id"] as? String } == [gone])
        #expect(records.first?["deletedDate"] as? String == "2026-01-02T03:04:35.000+0000")
        #expect(reply.object["latestDateCovered"] as? String == "2026-01-02T03:06:00.000+0000", "the last full minute of the clock")
        #expect((reply.object["earliestDateAvailable"] as? String)?.hasPrefix("2025-12-18") == true)
        // The next window starts at latestDateCovered: the deletion is not reported again.
        let next = try await Self.send(
            server, "GET", path, query: [("start", "2026-01-02T03:06:00Z"), ("end", "2026-01-02T03:08:00Z")], token: token)
        #expect((next.object["deletedRecords"] as? [[String: Any]])?.isEmpty == true)
        // A window of a minute or less, one older than 15 days, and an expired log.
        for (start, end) in [("2026-01-02T03:05:00Z", "2026-01-02T03:06:00Z"), ("2025-12-01T00:00:00Z", "2026-01-02T03:06:00Z")] {
            let refused = try await Self.send(server, "GET", path, query: [("start", start), ("end", end)], token: token)
            #expect(refused.status == 400 && refused.errorCode == "INVALID_REPLICATION_DATE", "\(start)")
        }
        await server.setDeletedWindowExpired(true)
        let expired = try await Self.send(
            server, "GET", path, query: [("start", "2026-01-02T03:04:00Z"), ("end", "2026-01-02T03:06:00Z")], token: token)
        #expect(expired.status == 400 && expired.errorCode == "INVALID_REPLICATION_DATE")
        // query leaves the deleted record out; queryAll shows it with IsDeleted.
        let live = try await Self.query(server, token, "SELECT Id FROM Product")
        #expect(live.records.map { $0["Id"] as? String } == [kept])
        let all = try await Self.query(server, token, "SELECT Id, IsDeleted FROM Product WHERE IsDeleted = true", all: true)
        #expect(all.records.map { $0["Id"] as? String } == [gone])
    }

    // MARK: - Writes

    @Test(
        "composite create: per-record statusCode for a missing required field, a restricted picklist, a dependent picklist, a formula field, a missing parent"
    )
    func compositeCreate() async throws {
        let (server, token) = try await Self.start()
        defer { Task { await server.stop() } }
        let acme = "001Qy0000000001IAA"
        let records: [[String: Any]] = [
            [
                "attributes": ["type": "Account"], "Name": "New Co", "Industry": "Energy", "Tier__c": "Silver", "Active__c": true,
                "Discount__c": "Low",
            ],
            ["attributes": ["type": "Account"], "Industry": "Retail"],
            ["attributes": ["type": "Account"], "Name": "Mine Co", "Industry": "Mining"],
            ["attributes": ["type": "Account"], "Name": "Shop Co", "Industry": "Retail", "Tier__c": "Gold"],
            ["attributes": ["type": "Account"], "Name": "Off Co", "Active__c": false, "Discount__c": "High"],
            ["attributes": ["type": "Account"], "Name": "Formula Co", "Score__c": 9],
            ["attributes": ["type": "Contact"], "LastName": "Orphan", "AccountId": "001Qy000000zzzz"],
            ["attributes": ["type": "Contact"], "LastName": "Child", "AccountId": acme],
            ["attributes": ["type": "Contact"], "LastName": ""],
        ]
        let reply = try await Self.send(
            server, "POST", Self.api(server, "composite/sobjects"), token: token, json: ["allOrNone": false, "records": records])
        #expect(reply.status == 200)
        let results = Self.results(reply)
        #expect(results.map(\.success) == [true, false, false, false, false, false, false, true, false])
        #expect(
            results.map(\.code) == [
                nil, "REQUIRED_FIELD_MISSING", "INVALID_OR_NULL_FOR_RESTRICTED_PICKLIST", "FIELD_INTEGRITY_EXCEPTION",
                "FIELD_INTEGRITY_EXCEPTION", "INVALID_FIELD_FOR_INSERT_UPDATE", "INVALID_CROSS_REFERENCE_KEY", nil, "REQUIRED_FIELD_MISSING",
            ])
        let missing = try #require((reply.array[1]["errors"] as? [[String: Any]])?.first)
        #expect(missing["message"] as? String == "Required fields are missing: [Name]" && missing["fields"] as? [String] == ["Name"])
        let created = try #require(results[0].id)
        #expect(created.count == 18 && created.hasPrefix("001"))
        let stored = try #require(await server.records("Account")[created])
        let record = try #require(try JSONSerialization.jsonObject(with: stored) as? [String: Any])
        #expect(record["Name"] as? String == "New Co" && record["Rating"] is NSNull && record["CreatedDate"] is String)
        let (accounts, contacts) = (await server.records("Account"), await server.records("Contact"))
        #expect(accounts.count == 6 && contacts.count == 9)

        // allOrNone: one failure rolls the others back.
        let atomic = try await Self.send(
            server, "POST", Self.api(server, "composite/sobjects"), token: token,
            json: ["allOrNone": true, "records": [["attributes": ["type": "Account"], "Name": "A"], ["attributes": ["type": "Account"]]]])
        #expect(Self.results(atomic).map(\.code) == ["ALL_OR_NONE_OPERATION_ROLLED_BACK", "REQUIRED_FIELD_MISSING"])
        #expect(await server.records("Account").count == 6)
        // validFor's bits count the controller's inactive entry (Agriculture, bit 0): Gold is
        // bit 1 and 3, Energy and Banking; an inactive value of a restricted picklist is refused.
        let dependent = try await Self.send(
            server, "POST", Self.api(server, "composite/sobjects"), token: token,
            json: [
                "records": [
                    ["attributes": ["type": "Account"], "Name": "Gold Energy", "Industry": "Energy", "Tier__c": "Gold"],
                    ["attributes": ["type": "Account"], "Name": "Gold Bank", "Industry": "Banking", "Tier__c": "Gold"],
                    ["attributes": ["type": "Account"], "Name": "Bronze Energy", "Industry": "Energy", "Tier__c": "Bronze"],
                    ["attributes": ["type": "Account"], "Name": "Farm", "Industry": "Agriculture"],
                ]
            ])
        #expect(Self.results(dependent).map(\.code) == [nil, nil, "FIELD_INTEGRITY_EXCEPTION", "INVALID_OR_NULL_FOR_RESTRICTED_PICKLIST"])
        #expect(await server.records("Account").count == 8)
        // An unknown field fails the whole call; so do more than 200 records.
        let unknown = try await Self.send(
            server, "POST", Self.api(server, "composite/sobjects"), token: token,
            json: ["records": [["attributes": ["type": "Account"], "Name": "A", "Nope__c": 1]]])
        #expect(unknown.status == 400 && unknown.errorCode == "INVALID_FIELD")
        let many = Array(repeating: ["attributes": ["type": "Account"], "Name": "A"] as [String: Any], count: 201)
        let tooMany = try await Self.send(server, "POST", Self.api(server, "composite/sobjects"), token: token, json: ["records": many])
        #expect(tooMany.status == 400 && tooMany.errorCode == "EXCEEDED_ID_LIMIT")
    }

    @Test("composite update and delete: null clears, LastModifiedDate moves, a deleted id is ENTITY_IS_DELETED, rules refuse")
    func compositeUpdateDelete() async throws {
        let (server, token) = try await Self.start()
        defer { Task { await server.stop() } }
        let acme = "001Qy0000000001IAA", bright = "001Qy0000000002IAA"
        await server.freezeClock("2026-01-02T03:04:05.000+0000")
        let path = Self.api(server, "composite/sobjects")
        let patch = try await Self.send(
            server, "PATCH", path, token: token,
            json: [
                "allOrNone": false,
                "records": [
                    ["attributes": ["type": "Account"], "id": acme, "Rating": NSNull(), "AnnualRevenue": 10],
                    ["attributes": ["type": "Account"], "id": bright, "Name": NSNull()],
                    ["attributes": ["type": "Account"], "id": bright, "CreatedDate": "2020-01-01T00:00:00Z"],
                ],
            ])
        #expect(Self.results(patch).map(\.code) == [nil, "REQUIRED_FIELD_MISSING", "INVALID_FIELD_FOR_INSERT_UPDATE"])
        let stored = try #require(await server.records("Account")[acme])
        let record = try #require(try JSONSerialization.jsonObject(with: stored) as? [String: Any])
        #expect(record["Rating"] is NSNull && record["LastModifiedDate"] as? String == "2026-01-02T03:04:05.000+0000")
        #expect(record["Score__c"] as? Double == 10, "the formula follows its inputs")

        await server.addRule(SalesforceFixture.Rule(object: "Account", operation: "delete", ids: [bright], message: "Keep Bright"))
        let delete = try await Self.send(
            server, "DELETE", path, query: [("ids", "\(acme),\(acme),\(bright),bogus,001Qy000000zzzz"), ("allOrNone", "false")], token: token)
        #expect(
            Self.results(delete).map(\.code) == [
                nil, "ENTITY_IS_DELETED", "FIELD_CUSTOM_VALIDATION_EXCEPTION", "MALFORMED_ID", "INVALID_CROSS_REFERENCE_KEY",
            ])
        let remaining = await server.records("Account")
        #expect(remaining[acme] == nil && remaining[bright] != nil)
        let updateDeleted = try await Self.send(
            server, "PATCH", path, token: token, json: ["records": [["attributes": ["type": "Account"], "id": acme, "Name": "Back"]]])
        #expect(Self.results(updateDeleted).map(\.code) == ["ENTITY_IS_DELETED"])
    }

    @Test("single records: POST 201, GET, PATCH 204, DELETE 204, then 404 ENTITY_IS_DELETED; Id in a body is INVALID_FIELD")
    func singleRecords() async throws {
        let (server, token) = try await Self.start()
        defer { Task { await server.stop() } }
        let created = try await Self.send(
            server, "POST", Self.api(server, "sobjects/Contact"), token: token, json: ["LastName": "Solo", "Email": "solo@example.com"])
        #expect(created.status == 201 && created.object["success"] as? Bool == true)
        let id = try #require(created.object["id"] as? String)
        let path = Self.api(server, "sobjects/Contact/\(id)")
        let read = try await Self.send(server, "GET", path, query: [("fields", "LastName,Email")], token: token)
        #expect(read.object["LastName"] as? String == "Solo" && read.object["FirstName"] == nil)
        #expect(try await Self.send(server, "PATCH", path, token: token, json: ["FirstName": "Han"]).status == 204)
        let bad = try await Self.send(server, "PATCH", path, token: token, json: ["Email": "not-an-address"])
        #expect(bad.status == 400 && bad.errorCode == "INVALID_EMAIL_ADDRESS")
        let withID = try await Self.send(server, "POST", Self.api(server, "sobjects/Contact"), token: token, json: ["Id": id, "LastName": "X"])
        #expect(withID.status == 400 && withID.errorCode == "INVALID_FIELD")
        #expect(try await Self.send(server, "DELETE", path, token: token).status == 204)
        let after = try await Self.send(server, "GET", path, token: token)
        #expect(after.status == 404 && after.errorCode == "ENTITY_IS_DELETED")
    }

    @Test("upsert by external id: 201 created, then 200 updated; a fixture built in code")
    func upsert() async throws {
        var fixture = SalesforceFixture()
        fixture.objects["Item__c"] = SalesforceFixture.ObjectSchema(
            keyPrefix: "a02",
            fields: [
                SalesforceFixture.Field(name: "Code__c", type: "string", externalId: true, unique: true),
                SalesforceFixture.Field(name: "Label__c", type: "string"),
            ])
        let server = try await SalesforceServer.start(fixture)
        defer { Task { await server.stop() } }
        let token = await server.token(for: "bob")
        let path = Self.api(server, "sobjects/Item__c/Code__c/X-1")
        let created = try await Self.send(server, "PATCH", path, token: token, json: ["Label__c": "first"])
        #expect(created.status == 201 && created.object["created"] as? Bool == true)
        let updated = try await Self.send(server, "PATCH", path, token: token, json: ["Label__c": "second"])
        #expect(
            updated.status == 200 && updated.object["created"] as? Bool == false && updated.object["id"] as? String == created.object["id"] as? String
        )
        let rows = try await Self.query(server, token, "SELECT Code__c, Label__c FROM Item__c")
        #expect(rows.records.map { $0["Label__c"] as? String } == ["second"] && rows.records.first?["Code__c"] as? String == "X-1")
        let notExternal = try await Self.send(server, "PATCH", Self.api(server, "sobjects/Item__c/Label__c/x"), token: token, json: ["Label__c": "x"])
        #expect(notExternal.status == 404 && notExternal.errorCode == "NOT_FOUND")
    }

    @Test("an Attachment's Body is a URL in query results; GET of it gives the bytes")
    func attachmentBody() async throws {
        let (server, token) = try await Self.start()
        defer { Task { await server.stop() } }
        let reply = try await Self.query(server, token, "SELECT Id, Name, Body FROM Attachment ORDER BY Name")
        let first = try #require(reply.records.first)
        let id = try #require(first["Id"] as? String)
        let url = try #require(first["Body"] as? String)
        #expect(url == "/services/data/v59.0/sobjects/Attachment/\(id)/Body")
        let body = try await Self.send(server, "GET", url, token: token)
        #expect(body.status == 200 && String(decoding: body.body, as: UTF8.self) == "Contract between Acme Energy and the Satchel project.\n")
    }

    @Test("sabotageNext answers the next matching request only, and the request is still logged")
    func sabotage() async throws {
        let (server, token) = try await Self.start()
        defer { Task { await server.stop() } }
        await server.sabotageNext("GET", Self.api(server, "query"), status: 503, body: Data("garbage".utf8))
        let soql = "SELECT Id FROM Account"
        let broken = try await Self.query(server, token, soql)
        #expect(broken.status == 503 && String(decoding: broken.body, as: UTF8.self) == "garbage")
        let fine = try await Self.query(server, token, soql)
        #expect(fine.status == 200 && fine.object["totalSize"] as? Int == 5)
        let logged = await server.requests.filter { $0.path.hasSuffix("/query") }
        #expect(logged.count == 2 && logged.allSatisfy { $0.query["q"] == soql && $0.headers["authorization"] == "Bearer \(token)" })
    }
}
