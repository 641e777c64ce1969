import Foundation
import LoopbackSupport
import ParseTestServer
import Satchel
import SatchelTestSupport
import Testing

/// `satchel sync --backend parse` against the loopback Parse Server, over several runs of the CLI
/// on one store, checked on the server's side.
@Suite("satchel sync --backend parse")
struct ParseCLITests {
    /// The satchel command line for `db` and `server`, logging in as `user` when given.
    static func sync(_ db: String, _ server: ParseServer, as user: String?, _ extra: [String] = []) -> [String] {
        var arguments = ["--db", db, "sync", "--backend", "parse", "--url", server.url.absoluteString, "--app-id", server.appID]
        if let key = server.restKey { arguments += ["--rest-key", key] }
        if let user { arguments += ["--user", user, "--password", "secret"] }
        return arguments + extra
    }

    static func json(_ object: JSONObject) -> Data { Data(object.jsonBytes) }

    @Test("a stored session syncs without credentials; server deletes arrive; a local create gets the server's id; a revoked session is one line")
    func severalRuns() async throws {
        let server = try await ParseServer.start()
        defer { Task { await server.stop() } }
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        var ids: [String] = []
        for i in 1...7 { ids.append(await server.put("Product", Self.json(["name": .string("P\(i)"), "price": .int(Int64(i))]), id: nil)) }

        let first = try await CLI.run(Self.sync(db, server, as: "ann", ["--model", "Product", "--page-size", "3"]))
        #expect(first.status == 0, "\(first.stderr)")
        #expect(try await CLI.run(["--db", db, "find", "Product", "--count"]).lines == ["7"])

        // Between the runs: the server deletes two objects and removes an attribute; here, a new
        // object and an update.
        await server.delete("Product", ids[0])
        await server.delete("Product", ids[1])
        await server.update("Product", ids[2], Self.json(["price": ["__op": "Delete"]]))
        #expect(try await CLI.run(["--db", db, "put", "Product", #"{"object":"mine","name":"Lamp","price":9}"#]).status == 0)
        #expect(try await CLI.run(["--db", db, "update", "Product", ids[3], #"{"price":40}"#]).status == 0)
        let second = try await CLI.run(Self.sync(db, server, as: nil))
        #expect(second.status == 0, "\(second.stderr)")
        #expect(try await CLI.run(["--db", db, "find", "Product", "--id", ids[0]]).status == 1, "deleted on the server")
        #expect(try await CLI.run(["--db", db, "find", "Product", "--id", ids[1]]).status == 1, "deleted on the server")
        #expect(try await CLI.run(["--db", db, "find", "Product", "--id", ids[2], "--select", "price"]).lines == [#"{"object":"\#(ids[2])"}"#])
        #expect(try await CLI.run(["--db", db, "find", "Product", "--id", "mine"]).status == 1, "renamed to the server's id")
        let lamp = try await CLI.run(["--db", db, "find", "Product", "--where", "name=Lamp", "--select", "name,price"])
        let lampLine = try #require(lamp.lines.first)
        let lampID = try #require(try JSONValue(parsing: Data(lampLine.utf8))["object"]?.stringValue)
        #expect(lampID != "mine")
        let onServer = await server.objects("Product")
        #expect(onServer.count == 6)
        #expect(try JSONValue(parsing: try #require(onServer[lampID]))["price"] == 9)
        #expect(try JSONValue(parsing: try #require(onServer[ids[3]]))["price"] == 40)
        // One login: the second run used the stored session token.
        let requests = await server.requests
        #expect(requests.count { $0.method == "POST" && $0.path == "/parse/login" } == 1)
        let token = try #require(requests.last?.headers["x-parse-session-token"])
        #expect(requests.filter { $0.path != "/parse/login" }.allSatisfy { $0.headers["x-parse-session-token"] == token })

        // A revoked session: one line saying to log in again, non-zero, nothing lost.
        await server.expireSessions()
        #expect(try await CLI.run(["--db", db, "update", "Product", ids[4], #"{"price":50}"#]).status == 0)
        let revoked = try await CLI.run(Self.sync(db, server, as: nil))
        #expect(revoked.status != 0 && revoked.status != 3)
        #expect(revoked.stderr.contains("log in again"), "\(revoked.stderr)")
        #expect(revoked.stderr.split(separator: "\n").count == 1, "\(revoked.stderr)")
        #expect(try await CLI.run(Self.sync(db, server, as: "ann")).status == 0)
        #expect(try JSONValue(parsing: try #require(await server.objects("Product")[ids[4]]))["price"] == 50)
    }

    @Test("the shop fixture: pointers become associations, a File's bytes are read with blob, export round-trips through import")
    func shop() async throws {
        let server = try await ParseServer.start(try ParseFixture.named("shop"))
        defer { Task { await server.stop() } }
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let sync = try await CLI.run(Self.sync(db, server, as: "ann", ["--model", "Customer", "--model", "Product", "--model", "Order"]))
        #expect(sync.status == 0, "\(sync.stderr)")
        #expect(try await CLI.run(["--db", db, "find", "Order", "--count"]).lines == ["4"])
        let order = try await CLI.run(["--db", db, "find", "Order", "--id", "Ordr000001", "--select", "customer,items,createdAt"])
        #expect(order.lines == [#"{"createdAt":"2024-05-10T14:00:00.000Z","customer":"Cust000001","items":["Prod000001","Prod000002"],"object":"Ordr000001"}"#])

        let receipt = directory.child("receipt.txt")
        let blob = try await CLI.run(["--db", db, "blob", "Order", "Ordr000001", "receipt", "--out", receipt])
        #expect(blob.status == 0, "\(blob.stderr)")
        #expect(try String(contentsOfFile: receipt, encoding: .utf8).hasPrefix("Receipt 1001\n"))
        let none = try await CLI.run(["--db", db, "blob", "Order", "Ordr000001", "status"])
        #expect(none.status == 1 && none.stderr.split(separator: "\n").count == 1, "\(none.stderr)")

        let exported = directory.child("products.jsonl")
        #expect(try await CLI.run(["--db", db, "export", "Product", exported]).status == 0)
        let copy = directory.child("copy")
        #expect(try await CLI.run(["--db", copy, "import", "Product", exported]).lines.first == "imported 12")
        let original = try await CLI.run(["--db", db, "export", "Product"])
        #expect(original.lines.count == 12)
        #expect(try await CLI.run(["--db", copy, "export", "Product"]).lines == original.lines)
        #expect(try await CLI.run(["--db", db, "export", "Nope"]).status == 1)
    }

    @Test("--verbose prints the engine's log lines on stderr (a retry here), never the password or the session token")
    func verbose() async throws {
        let server = try await ParseServer.start()
        defer { Task { await server.stop() } }
        _ = await server.put("Product", Self.json(["n": 1]), id: nil)
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        await server.sabotageNext("GET", "/parse/classes/Product", status: 500, body: Data(#"{"code":1,"message":"Internal server error."}"#.utf8))
        let result = try await CLI.run(Self.sync(db, server, as: "ann", ["--model", "Product", "--verbose"]))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("sync call failed; retrying"), "\(result.stderr)")
        let token = try #require(await server.requests.compactMap { $0.headers["x-parse-session-token"] }.first)
        #expect(!result.stderr.contains(token) && !result.stdout.contains(token) && !result.stderr.contains("secret"))
        let quiet = try await CLI.run(Self.sync(db, server, as: nil))
        #expect(quiet.status == 0 && quiet.stderr.isEmpty, "without --verbose nothing is logged: \(quiet.stderr)")
    }

    @Test("bad parse arguments are one-line errors")
    func badArguments() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let noAppID = try await CLI.run(["--db", db, "sync", "--backend", "parse", "--url", "http://127.0.0.1:1/parse"])
        #expect(noAppID.status != 0 && noAppID.status != 3 && noAppID.stderr.contains("--app-id"), "\(noAppID.stderr)")
        let badURL = try await CLI.run(["--db", db, "sync", "--backend", "parse", "--url", "parse", "--app-id", "x"])
        #expect(badURL.status != 0 && badURL.status != 3 && badURL.stderr.contains("mount"), "\(badURL.stderr)")
    }
}
