import Foundation
import LoopbackSupport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import ParseTestServer
import Testing

/// The loopback Parse Server itself, over plain HTTP: what Parse Server answers (statuses, codes,
/// messages, headers) for the rules of `rest-backends.md` §A, checked without the adapter.
// One test at a time: each starts a loopback server, whose socket pool holds a Dispatch thread
// in epoll_wait while it runs. Every such test at once, beside the other suites, reached
// Dispatch's limit of threads in full runs: URLSession's queues got none, and clients timed out.
@Suite("Parse loopback server on the wire", .serialized)
struct ParseServerWireTests {
    /// An HTTP client of one server, sending the app's headers (and a session token once set).
    struct Wire {
        let server: ParseServer
        var token: String?

        struct Answer {
            var status: Int
            var headers: [String: String]
            var body: Data
            /// The body as a JSON object (empty when it is not one).
            var json: [String: Any] { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:] }
            var code: Int? { json["code"] as? Int }
            var error: String? { json["error"] as? String }
            var results: [[String: Any]] { json["results"] as? [[String: Any]] ?? [] }
        }

        /// Sends `method path` (under the mount) with the query `query` and a JSON body.
        func send(
            _ method: String, _ path: String, query: [String: String] = [:], json: Any? = nil, body: Data? = nil,
            headers: [String: String]? = nil
        ) async throws -> Answer {
            var components = URLComponents(url: server.url.appendingPathComponent(path), resolvingAgainstBaseURL: false)!
            if !query.isEmpty {
                // Strict percent-encoding: `+`, `&`, `=` and the JSON punctuation of `where` included.
                let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
                components.percentEncodedQuery = query.sorted { $0.key < $1.key }.map {
                    "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: allowed)!)"
                }.joined(separator: "&")
            }
            var request = URLRequest(url: components.url!)
            request.httpMethod = method
            var sent = headers ?? ["X-Parse-Application-Id": server.appID, "X-Parse-REST-API-Key": server.restKey ?? ""]
            if let token { sent["X-Parse-Session-Token"] = token }
            for (name, value) in sent { request.setValue(value, forHTTPHeaderField: name) }
            if let json {
                request.httpBody = try JSONSerialization.data(withJSONObject: json)
                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            } else if let body {
                request.httpBody = body
            }
            let (data, response) = try await URLSession.shared.data(for: request)
            let http = try #require(response as? HTTPURLResponse)
            var answerHeaders: [String: String] = [:]
            for (name, value) in http.allHeaderFields {
                if let name = name as? String, let value = value as? String { answerHeaders[name.lowercased()] = value }
            }
            return Answer(status: http.statusCode, headers: answerHeaders, body: data)
        }

        /// Logs in and keeps the session token for the next requests.
        mutating func logIn(_ username: String = "ann", _ password: String = "secret") async throws {
            let answer = try await send("POST", "login", json: ["username": username, "password": password])
            token = try #require(answer.json["sessionToken"] as? String)
        }
    }

    /// Runs `body` against a new server, stopping it afterwards (also when `body` throws).
    func withServer(_ fixture: ParseFixture = ParseFixture(), _ body: (inout Wire) async throws -> Void) async throws {
        let server = try await ParseServer.start(fixture)
        var wire = Wire(server: server)
        do {
            try await body(&wire)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    static func json(_ text: String) -> Data { Data(text.utf8) }

    @Test("a wrong or missing app id or REST key is 403 {\"error\":\"unauthorized\"}, without code")
    func unauthorized() async throws {
        try await withServer { wire in
            let none = try await wire.send("GET", "classes/Product", headers: [:])
            #expect(none.status == 403)
            #expect(none.error == "unauthorized")
            #expect(none.code == nil)
            let wrongKey = try await wire.send(
                "GET", "classes/Product", headers: ["X-Parse-Application-Id": wire.server.appID, "X-Parse-REST-API-Key": "nope"])
            #expect(wrongKey.status == 403)
            let right = try await wire.send("GET", "classes/Product")
            #expect(right.status == 200)
            #expect(right.results.isEmpty)
            let outside = try await wire.send("GET", "nowhere")
            #expect(outside.status == 404)
            // Every request is logged, headers by lower-cased name.
            let logged = await wire.server.requests
            #expect(logged.count == 4)
            #expect(logged[2].headers["x-parse-application-id"] == "satchel-app")
            #expect(logged[2].path == "/parse/classes/Product")
        }
    }

    @Test("login answers the user with an r: token; bad credentials are 404 code 101")
    func login() async throws {
        try await withServer { wire in
            let ok = try await wire.send("POST", "login", json: ["username": "ann", "password": "secret"])
            #expect(ok.status == 200)
            #expect(ok.json["username"] as? String == "ann")
            #expect((ok.json["sessionToken"] as? String)?.hasPrefix("r:") == true)
            #expect(ok.json["password"] == nil)
            let bad = try await wire.send("POST", "login", json: ["username": "ann", "password": "wrong"])
            #expect(bad.status == 404)
            #expect(bad.code == 101)
            #expect(bad.error == "Invalid username/password.")
            let noPassword = try await wire.send("GET", "login", query: ["username": "ann"])
            #expect(noPassword.status == 400)
            #expect(noPassword.code == 201)
            try await wire.logIn("bob")
            let me = try await wire.send("GET", "users/me")
            #expect(me.json["username"] as? String == "bob")
        }
    }

    @Test("after expireSessions every token is 400 code 209, on any route; no token is still allowed")
    func expiredSession() async throws {
        try await withServer { wire in
            try await wire.logIn()
            #expect(try await wire.send("GET", "classes/Product").status == 200)
            await wire.server.expireSessions()
            for (method, path) in [("GET", "classes/Product"), ("POST", "login"), ("POST", "batch"), ("GET", "users/me")] {
                let answer = try await wire.send(method, path, json: method == "POST" ? [:] : nil)
                #expect(answer.status == 400, "\(method) \(path)")
                #expect(answer.code == 209)
                #expect(answer.error == "Invalid session token")
            }
            wire.token = nil
            #expect(try await wire.send("GET", "classes/Product").status == 200)
        }
    }

    @Test("a create is 201 with Location and a 10-character id; a client objectId or bad field name is 105")
    func create() async throws {
        try await withServer { wire in
            let created = try await wire.send("POST", "classes/Thing", json: ["name": "lamp", "price": 12])
            #expect(created.status == 201)
            let id = try #require(created.json["objectId"] as? String)
            #expect(id.count == 10 && id.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) })
            #expect(created.headers["location"] == wire.server.url.absoluteString + "/classes/Thing/" + id)
            let createdAt = try #require(created.json["createdAt"] as? String)
            #expect(createdAt.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil)
            let stored = try #require(await wire.server.objects("Thing")[id])
            let object = try #require(try JSONSerialization.jsonObject(with: stored) as? [String: Any])
            #expect(object["name"] as? String == "lamp")
            #expect(object["updatedAt"] as? String == createdAt)

            let chosen = try await wire.send("POST", "classes/Thing", json: ["objectId": "mine", "name": "x"])
            #expect(chosen.status == 400)
            #expect(chosen.code == 105)
            #expect(chosen.error == "objectId is an invalid field name.")
            let badName = try await wire.send("POST", "classes/Thing", json: ["_secret": 1])
            #expect(badName.code == 105)
            let wrongType = try await wire.send("PUT", "classes/Thing/\(id)", json: ["price": "twelve"])
            #expect(wrongType.code == 111)
            #expect(wrongType.error == "schema mismatch for Thing.price; expected Number but got String")
            #expect(await wire.server.objects("Thing").count == 1)
        }
    }

    @Test("PUT is partial: __op Increment answers the new value, Delete removes; missing is 404 101")
    func updateOperators() async throws {
        try await withServer { wire in
            await wire.server.freezeClock("2024-01-01T00:00:00.000Z")
            let id = await wire.server.put("Thing", Self.json(#"{"n":1,"tags":["a"],"note":"x"}"#), id: nil)
            await wire.server.freezeClock("2024-01-01T00:00:01.000Z")
            let updated = try await wire.send(
                "PUT", "classes/Thing/\(id)",
                json: [
                    "n": ["__op": "Increment", "amount": 2], "note": ["__op": "Delete"], "tags": ["__op": "AddUnique", "objects": ["a", "b"]],
                ])
            #expect(updated.status == 200)
            #expect(updated.json["updatedAt"] as? String == "2024-01-01T00:00:01.000Z")
            #expect(updated.json["n"] as? Int == 3)
            let object = try await wire.send("GET", "classes/Thing/\(id)").json
            #expect(object["note"] == nil)
            #expect(object["tags"] as? [String] == ["a", "b"])
            #expect(object["createdAt"] as? String == "2024-01-01T00:00:00.000Z")
            let unsupported = try await wire.send("PUT", "classes/Thing/\(id)", json: ["n": ["__op": "Multiply", "amount": 2]])
            #expect(unsupported.code == 108)
            #expect(unsupported.error == "The Multiply operator is not supported yet.")
            let missing = try await wire.send("PUT", "classes/Thing/NoSuchThng", json: ["n": 1])
            #expect(missing.status == 404)
            #expect(missing.code == 101)
            #expect(missing.error == "Object not found.")
        }
    }

    @Test("the keyset $or on (updatedAt, objectId) pages through many ties in order=updatedAt,objectId")
    func keysetOverTies() async throws {
        try await withServer { wire in
            let tie = "2024-05-01T10:00:00.000Z"
            await wire.server.freezeClock("2024-05-01T09:59:59.999Z")
            let before = await wire.server.put("Item", Self.json(#"{"n":0}"#), id: nil)
            await wire.server.freezeClock(tie)
            var tied: [String] = []
            for n in 1...7 { tied.append(await wire.server.put("Item", Self.json(#"{"n":\#(n)}"#), id: nil)) }
            await wire.server.freezeClock("2024-05-01T10:00:00.001Z")
            let after = await wire.server.put("Item", Self.json(#"{"n":8}"#), id: nil)
            tied.sort()

            // One page from a cursor inside the ties.
            let date = #"{"__type":"Date","iso":"\#(tie)"}"#
            let keyset = #"{"$or":[{"updatedAt":{"$gt":\#(date)}},{"updatedAt":\#(date),"objectId":{"$gt":"\#(tied[2])"}}]}"#
            let page = try await wire.send("GET", "classes/Item", query: ["where": keyset, "order": "updatedAt,objectId", "limit": "3"])
            #expect(page.results.map { $0["objectId"] as? String } == tied[3...5].map { $0 })

            // Paging from the start: every object once, in order.
            var seen: [String] = []
            var cursor: (String, String)? = nil
            while true {
                var query = ["order": "updatedAt,objectId", "limit": "2"]
                if let (at, id) = cursor {
                    let wrapped = #"{"__type":"Date","iso":"\#(at)"}"#
                    query["where"] = #"{"$or":[{"updatedAt":{"$gt":\#(wrapped)}},{"updatedAt":\#(wrapped),"objectId":{"$gt":"\#(id)"}}]}"#
                }
                let rows = try await wire.send("GET", "classes/Item", query: query).results
                guard let last = rows.last else { break }
                seen += rows.compactMap { $0["objectId"] as? String }
                cursor = (try #require(last["updatedAt"] as? String), try #require(last["objectId"] as? String))
            }
            #expect(seen == [before] + tied + [after])
            // A comparison with a plain string never matches a date (MongoDB's rule): use the wrapper.
            let plain = try await wire.send("GET", "classes/Item", query: ["where": #"{"updatedAt":{"$gte":"\#(tie)"}}"#])
            #expect(plain.results.isEmpty)
        }
    }

    @Test("maxLimit clamps limit silently; count ignores limit and skip; limit=0 answers only the count")
    func maxLimitAndCount() async throws {
        try await withServer { wire in
            for n in 1...5 { _ = await wire.server.put("Item", Self.json(#"{"n":\#(n)}"#), id: nil) }
            await wire.server.setMaxLimit(3)
            let clamped = try await wire.send("GET", "classes/Item", query: ["limit": "10", "count": "1", "order": "-n"])
            #expect(clamped.status == 200)
            #expect(clamped.results.map { $0["n"] as? Int } == [5, 4, 3])
            #expect(clamped.json["count"] as? Int == 5)
            let countOnly = try await wire.send("GET", "classes/Item", query: ["limit": "0", "count": "1", "where": #"{"n":{"$gte":2}}"#])
            #expect(countOnly.results.isEmpty)
            #expect(countOnly.json["count"] as? Int == 4)
            let skipped = try await wire.send("GET", "classes/Item", query: ["skip": "4", "order": "n"])
            #expect(skipped.results.map { $0["n"] as? Int } == [5])
        }
    }

    @Test("an unknown query parameter is 102; a single GET takes only keys/include/excludeKeys; bad where JSON is 107")
    func parameters() async throws {
        try await withServer { wire in
            let unknown = try await wire.send("GET", "classes/Item", query: ["since": "1"])
            #expect(unknown.status == 400)
            #expect(unknown.code == 102)
            #expect(unknown.error == "Invalid parameter for query: since")
            let id = await wire.server.put("Item", Self.json(#"{"n":1}"#), id: nil)
            let single = try await wire.send("GET", "classes/Item/\(id)", query: ["where": "{}"])
            #expect(single.code == 102)
            #expect(single.error == "Improper encode of parameter")
            let malformed = try await wire.send("GET", "classes/Item", query: ["where": #"{"n":"#])
            #expect(malformed.code == 107)
            #expect(try await wire.send("GET", "classes/Item", query: ["comment": "accepted", "hint": "x"]).status == 200)
        }
    }

    @Test("the shop fixture: keys, count, include of a pointer and an array of pointers, dates and file URLs")
    func shopQueries() async throws {
        try await withServer(try ParseFixture.named("shop")) { wire in
            let orders = try await wire.send(
                "GET", "classes/Order",
                query: [
                    "include": "customer,items", "keys": "customer,items,number", "count": "1", "order": "-number", "limit": "1",
                ])
            #expect(orders.json["count"] as? Int == 4)
            let order = try #require(orders.results.first)
            #expect(Set(order.keys) == ["objectId", "createdAt", "updatedAt", "customer", "items", "number"])
            #expect(order["objectId"] as? String == "Ordr000004")
            let customer = try #require(order["customer"] as? [String: Any])
            #expect(customer["__type"] as? String == "Object")
            #expect(customer["className"] as? String == "Customer")
            #expect(customer["name"] as? String == "Chloé Martin")
            let items = try #require(order["items"] as? [[String: Any]])
            #expect(items.map { $0["objectId"] as? String } == ["Prod000003", "Prod000011"])
            #expect(items.allSatisfy { $0["__type"] as? String == "Object" && $0["price"] != nil })

            let released = try await wire.send(
                "GET", "classes/Product",
                query: [
                    "where": #"{"releasedAt":{"$gte":{"__type":"Date","iso":"2023-10-01T00:00:00.000Z"}},"category":{"$in":["lighting","writing"]}}"#,
                    "keys": "name", "order": "releasedAt",
                ])
            #expect(released.results.map { $0["name"] as? String } == ["Floor Lamp", "Pencil Set"])
            let byPointer = try await wire.send(
                "GET", "classes/Order",
                query: [
                    "where": #"{"customer":{"__type":"Pointer","className":"Customer","objectId":"Cust000001"}}"#, "order": "number",
                ])
            #expect(byPointer.results.map { $0["number"] as? Int } == [1001, 1003])

            let paid = try await wire.send("GET", "classes/Order/Ordr000001")
            let receipt = try #require(paid.json["receipt"] as? [String: Any])
            let url = try #require((receipt["url"] as? String).flatMap(URL.init(string:)))
            #expect(url.absoluteString.hasPrefix(wire.server.url.absoluteString + "/files/satchel-app/"))
            let (bytes, _) = try await URLSession.shared.data(from: url)
            #expect(String(decoding: bytes, as: UTF8.self).hasPrefix("Receipt 1001"))
        }
    }

    @Test("a batch answers 200 with success or error per item, in order; a path without the mount fails the call")
    func batch() async throws {
        try await withServer { wire in
            let id = await wire.server.put("Item", Self.json(#"{"n":1}"#), id: nil)
            let answer = try await wire.send(
                "POST", "batch",
                json: [
                    "requests": [
                        ["method": "POST", "path": "/parse/classes/Item", "body": ["n": 2]],
                        ["method": "PUT", "path": "/parse/classes/Item/\(id)", "body": ["n": 10]],
                        ["method": "DELETE", "path": "/parse/classes/Item/Gone000000"],
                        ["method": "GET", "path": "/parse/classes/Item/\(id)"],
                    ]
                ])
            #expect(answer.status == 200)
            let items = try #require((try JSONSerialization.jsonObject(with: answer.body)) as? [[String: Any]])
            #expect(items.count == 4)
            let created = try #require(items[0]["success"] as? [String: Any])
            #expect(created["objectId"] is String && created["createdAt"] is String)
            #expect((items[1]["success"] as? [String: Any])?["updatedAt"] is String)
            let failed = try #require(items[2]["error"] as? [String: Any])
            #expect(failed["code"] as? Int == 101)
            #expect(failed["error"] as? String == "Object not found for delete.")
            #expect((items[3]["success"] as? [String: Any])?["n"] as? Int == 10)
            #expect(await wire.server.objects("Item").count == 2)

            let unmounted = try await wire.send("POST", "batch", json: ["requests": [["method": "POST", "path": "/classes/Item", "body": ["n": 3]]]])
            #expect(unmounted.status == 400)
            #expect(unmounted.code == 107)
            #expect(await wire.server.objects("Item").count == 2)
        }
    }

    @Test("a rule rejects matching writes with its code (142), directly and inside a batch")
    func rules() async throws {
        try await withServer { wire in
            await wire.server.addRule(
                ParseFixture.Rule(className: "Item", operation: "create", matching: Self.json(#"{"name":"forbidden"}"#), message: "name is forbidden")
            )
            let refused = try await wire.send("POST", "classes/Item", json: ["name": "forbidden"])
            #expect(refused.status == 400)
            #expect(refused.code == 142)
            #expect(refused.error == "name is forbidden")
            #expect(try await wire.send("POST", "classes/Item", json: ["name": "fine"]).status == 201)
            let answer = try await wire.send(
                "POST", "batch",
                json: [
                    "requests": [
                        ["method": "POST", "path": "/parse/classes/Item", "body": ["name": "forbidden"]],
                        ["method": "POST", "path": "/parse/classes/Item", "body": ["name": "also fine"]],
                    ]
                ])
            let items = try #require((try JSONSerialization.jsonObject(with: answer.body)) as? [[String: Any]])
            #expect((items[0]["error"] as? [String: Any])?["code"] as? Int == 142)
            #expect(items[1]["success"] != nil)
            await wire.server.clearRules()
            #expect(try await wire.send("POST", "classes/Item", json: ["name": "forbidden"]).status == 201)
            #expect(await wire.server.objects("Item").count == 3)
        }
    }

    @Test("files: upload answers 201 with a unique name and a URL that serves the bytes without headers")
    func files() async throws {
        try await withServer { wire in
            let bytes = Data("hello, parse".utf8)
            let uploaded = try await wire.send(
                "POST", "files/hello.txt", body: bytes,
                headers: [
                    "X-Parse-Application-Id": wire.server.appID, "X-Parse-REST-API-Key": wire.server.restKey ?? "", "Content-Type": "text/plain",
                ])
            #expect(uploaded.status == 201)
            let name = try #require(uploaded.json["name"] as? String)
            #expect(name.hasSuffix("_hello.txt") && name != "hello.txt")
            let url = try #require(uploaded.json["url"] as? String)
            #expect(url == wire.server.url.absoluteString + "/files/satchel-app/" + name)
            #expect(uploaded.headers["location"] == url)
            #expect(await wire.server.fileNames == [name])
            let (served, response) = try await URLSession.shared.data(from: try #require(URL(string: url)))
            #expect(served == bytes)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
        }
    }

    @Test("cloud functions answer {\"result\":…}; the shop's orderGraph nests objects three levels deep; unknown is 141")
    func functions() async throws {
        try await withServer(try ParseFixture.named("shop")) { wire in
            let graph = try await wire.send("POST", "functions/orderGraph", json: [:])
            #expect(graph.status == 200)
            let order = try #require(graph.json["result"] as? [String: Any])
            #expect(order["className"] as? String == "Order")
            let customer = try #require(order["customer"] as? [String: Any])
            let favorite = try #require(customer["favoriteProduct"] as? [String: Any])
            #expect(favorite["__type"] as? String == "Object")
            #expect(favorite["className"] as? String == "Product")
            #expect(favorite["objectId"] as? String == "Prod000002")
            let unknown = try await wire.send("POST", "functions/nope", json: [:])
            #expect(unknown.status == 400)
            #expect(unknown.code == 141)
            #expect(unknown.error == #"Invalid function: "nope""#)
        }
    }

    @Test("sabotageNext answers the next matching request once, and the request is still logged")
    func sabotage() async throws {
        try await withServer { wire in
            await wire.server.sabotageNext(
                "GET", "/parse/classes/Item", status: 500, body: Self.json(#"{"code":1,"message":"Internal server error."}"#))
            let broken = try await wire.send("GET", "classes/Item")
            #expect(broken.status == 500)
            #expect(broken.json["message"] as? String == "Internal server error.")
            #expect(try await wire.send("GET", "classes/Item").status == 200)
            #expect(await wire.server.requests.count == 2)
        }
    }
}
