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
        #expect(
            order.lines == [
                #"{"createdAt":"2024-05-10T14:00:00.000Z","customer":"Cust000001","items":["Prod000001","Prod000002"],"object":"Ordr000001"}"#
            ])

        let receipt = directory.child("receipt.txt")
        let blob = try await CLI.run(["--db", db, "blob", "Order", "Ordr000001", "receipt", "--out", receipt])
        #expect(blob.status == 0, "\(blob.stderr)")
        #expect(try String(contentsOfFile: receipt, encoding: .utf8).hasPrefix("Receipt 1001\n"))
        // A file that cannot be written is one plain line (found by a black-box probe: a
        // Foundation error's dump, with a hint to read the help).
        let nowhere = directory.child("missing/receipt.txt")
        let unwritable = try await CLI.run(["--db", db, "blob", "Order", "Ordr000001", "receipt", "--out", nowhere])
        #expect(
            unwritable.status == 1 && unwritable.stderr == "satchel: cannot write '\(nowhere)': No such file or directory\n", "\(unwritable.stderr)")
        let none = try await CLI.run(["--db", db, "blob", "Order", "Ordr000001", "status"])
        #expect(none.status == 1 && none.stderr.split(separator: "\n").count == 1, "\(none.stderr)")

        // An export of a model with blobs says that their bytes stay here (a black-box probe).
        let orders = try await CLI.run(["--db", db, "export", "Order"])
        #expect(orders.status == 0 && orders.stderr.contains("blob attributes (receipt) are exported as references"), "\(orders.stderr)")
        let exported = directory.child("products.jsonl")
        let products = try await CLI.run(["--db", db, "export", "Product", exported])
        #expect(products.status == 0 && products.stderr == "satchel: exported 12\n", "\(products.stderr)")
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

    @Test(
        "a change the server could not take this time exits 1, even beside a refused one (the cycle is not complete), one line naming both (found by a black-box probe: exit 3 hid it)"
    )
    func postponedBesideRefused() async throws {
        let server = try await ParseServer.start()
        defer { Task { await server.stop() } }
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let a = await server.put("Product", Self.json(["name": "A"]), id: nil)
        let b = await server.put("Product", Self.json(["name": "B"]), id: nil)
        #expect(try await CLI.run(Self.sync(db, server, as: "ann", ["--model", "Product"])).status == 0)
        await server.addRule(ParseFixture.Rule(className: "Product", operation: "update", ids: [a], message: "no"))
        await server.addRule(ParseFixture.Rule(className: "Product", operation: "update", ids: [b], code: 1, message: "Internal server error."))
        for id in [a, b] { #expect(try await CLI.run(["--db", db, "update", "Product", id, #"{"name":"changed"}"#]).status == 0) }
        let both = try await CLI.run(Self.sync(db, server, as: nil))
        #expect(both.status == 1, "\(both.stderr)")
        let line = try #require(both.stderr.split(separator: "\n").last)
        #expect(line.contains("refused 1 change") && line.contains("1 change(s) not taken by the server this time"), "\(line)")
        // The next sync pushes the postponed one; the refused one waits for its resolution.
        await server.clearRules()
        let next = try await CLI.run(Self.sync(db, server, as: nil))
        #expect(next.status == 0, "\(next.stderr)")
        #expect(try JSONValue(parsing: try #require(await server.objects("Product")[b]))["name"] == "changed")
        #expect(try JSONValue(parsing: try #require(await server.objects("Product")[a]))["name"] == "A")
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

/// Issue 25's command-line side against the loopback Parse Server: secrets off the command line,
/// search and the drift check, lost create answers across runs, create protections.
@Suite("satchel sync, search and verify --backend parse: round 2")
struct ParseCLIRoundTwoTests {
    static func base(_ db: String, _ server: ParseServer, _ command: String) -> [String] {
        ["--db", db, command, "--backend", "parse", "--url", server.url.absoluteString, "--app-id", server.appID]
    }

    @Test("secrets off the command line: --password-stdin, SATCHEL_PASSWORD and SATCHEL_REST_KEY log in; mistakes are one line")
    func secrets() async throws {
        let server = try await ParseServer.start()
        defer { Task { await server.stop() } }
        let key = try #require(server.restKey)
        _ = await server.put("Product", ParseCLITests.json(["name": "Lamp"]), id: nil)
        let directory = TemporaryDirectory()
        let args = Self.base(directory.child("a"), server, "sync") + ["--rest-key", key, "--model", "Product"]
        let piped = try await CLI.run(args + ["--user", "ann", "--password-stdin"], input: "secret\n")
        #expect(piped.status == 0, "\(piped.stderr)")
        let fromEnvironment = try await CLI.run(
            Self.base(directory.child("b"), server, "sync") + ["--model", "Product", "--user", "ann"],
            environment: ["SATCHEL_PASSWORD": "secret", "SATCHEL_REST_KEY": key])
        #expect(fromEnvironment.status == 0, "\(fromEnvironment.stderr)")
        #expect(try await CLI.run(["--db", directory.child("b"), "find", "Product", "--count"]).lines == ["1"])
        let logins = await server.requests.filter { $0.path == "/parse/login" }
        #expect(logins.count == 2 && logins.allSatisfy { $0.headers["x-parse-rest-api-key"] == key })

        for (extra, input, words) in [
            (["--user", "ann", "--password", "secret", "--password-stdin"], "secret\n", "--password and --password-stdin"),
            (["--user", "ann", "--password-stdin"], "", "standard input is empty"),
            (["--user", "ann", "--password-stdin", "--token-stdin"], "x\n", "cannot both"),
        ] {
            let failed = try await CLI.run(args + extra, input: input)
            #expect(failed.status != 0 && failed.stderr.contains(words), "\(extra): \(failed.stderr)")
            #expect(failed.stderr.split(separator: "\n").count == 1, "\(failed.stderr)")
        }
        let help = try await CLI.run(["sync", "--help"])
        #expect(help.stdout.contains("--password-stdin") && help.stdout.contains("SATCHEL_PASSWORD") && help.stdout.contains("--token-stdin"))
    }

    @Test(
        "search prints exactly the server's matching objects and stores them only with --store; verify exits 0 when the store agrees, 4 with a line per drift"
    )
    func searchAndVerify() async throws {
        let server = try await ParseServer.start()
        defer { Task { await server.stop() } }
        var ids: [String] = []
        for i in 1...6 { ids.append(await server.put("Product", ParseCLITests.json(["name": .string("P\(i)"), "price": .int(Int64(i))]), id: nil)) }
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let key = try #require(server.restKey)
        #expect(
            try await CLI.run(Self.base(db, server, "sync") + ["--rest-key", key, "--user", "ann", "--password", "secret", "--model", "Product"])
                .status == 0)
        try await CLI.run(["--db", db, "delete", "Product", ids[5]]).expectSuccess()
        let search = try await CLI.run(Self.base(db, server, "search") + ["--rest-key", key, "Product", "--where", "price>3", "--where", "name!=P5"])
        #expect(search.status == 0, "\(search.stderr)")
        let found = try search.lines.map { try JSONObject(parsing: $0) }
        #expect(Set(found.compactMap { $0["object"]?.stringValue }) == [ids[3], ids[5]], "\(search.lines)")
        #expect(found.allSatisfy { $0["createdAt"] != nil }, "as the server holds them")
        #expect(try await CLI.run(["--db", db, "find", "Product", "--id", ids[5]]).status == 1, "not stored")

        // The store agrees, its unpushed delete aside.
        let agreeing = try await CLI.run(Self.base(db, server, "verify") + ["--rest-key", key, "Product"])
        #expect(agreeing.status == 0, "\(agreeing.stdout) \(agreeing.stderr)")
        let summary = try JSONObject(parsing: try #require(agreeing.lines.last))
        #expect(summary["agree"] == true && summary["objects"] == 6 && summary["unconfirmed"] == 1, "\(summary)")

        // Behind the device's back.
        await server.update("Product", ids[0], ParseCLITests.json(["price": 100]))
        await server.delete("Product", ids[1])
        let differing = try await CLI.run(Self.base(db, server, "verify") + ["--rest-key", key, "Product"])
        #expect(differing.status == 4, "\(differing.stdout) \(differing.stderr)")
        #expect(
            differing.stderr.split(separator: "\n").count == 1 && differing.stderr.contains("differ"),
            "one line on stderr, as for every non-zero exit (found by a black-box probe: there was none)")
        let lines = try differing.lines.map { try JSONObject(parsing: $0) }
        let drifts = Dictionary(uniqueKeysWithValues: lines.dropLast().map { ($0["object"]?.stringValue ?? "", $0) })
        #expect(drifts[ids[0]]?["drift"] == "differs" && drifts[ids[0]]?["attributes"]?["price"] == ["here": 1, "there": 100])
        #expect(drifts[ids[0]]?["attributes"]?["updatedAt"] != nil, "the server's updatedAt moved too")
        #expect(drifts[ids[1]]?["drift"] == "onlyHere" && drifts[ids[1]]?["model"] == "Product")
        #expect(lines.last?["agree"] == false && lines.last?["differing"] == 1 && lines.last?["onlyHere"] == 1)
        #expect(
            try await CLI.run(["--db", db, "find", "Product", "--id", ids[0], "--select", "price"]).lines == [#"{"object":"\#(ids[0])","price":1}"#])

        // --store keeps what was found; a sync brings the rest; then they agree.
        let stored = try await CLI.run(Self.base(db, server, "search") + ["--rest-key", key, "Product", "--where", "price=100", "--store"])
        #expect(stored.lines.count == 1, "\(stored.stderr)")
        #expect(
            try await CLI.run(["--db", db, "find", "Product", "--id", ids[0], "--select", "price"]).lines == [#"{"object":"\#(ids[0])","price":100}"#]
        )
        #expect(try await CLI.run(Self.base(db, server, "sync") + ["--rest-key", key, "--full"]).status == 0)
        #expect(try await CLI.run(Self.base(db, server, "verify") + ["--rest-key", key, "Product"]).status == 0)

        // Wrong questions.
        let unknown = try await CLI.run(Self.base(db, server, "verify") + ["--rest-key", key, "Prodct"])
        #expect(unknown.status == 1 && unknown.stderr.contains("Product"), "\(unknown.stderr)")
        let badWhere = try await CLI.run(Self.base(db, server, "search") + ["--rest-key", key, "Product", "--where", "price<<1"])
        #expect(badWhere.status != 0 && badWhere.stderr.split(separator: "\n").count == 1, "\(badWhere.stderr)")
    }

    @Test(
        "a create whose answer was lost, over two runs with the server's idempotency on: the second run carries the same request id and makes nothing twice"
    )
    func lostCreateAcrossRuns() async throws {
        var fixture = ParseFixture()
        fixture.idempotency = ParseFixture.Idempotency()
        let server = try await ParseServer.start(fixture)
        defer { Task { await server.stop() } }
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let key = try #require(server.restKey)
        try await CLI.run(["--db", db, "put", "Product", #"{"object":"mine","name":"Lamp","price":9}"#]).expectSuccess()
        for _ in 0..<4 { await server.loseNextAnswer("POST", "/parse/classes/Product") }  // every retry of the first run
        let lost = try await CLI.run(Self.base(db, server, "sync") + ["--rest-key", key, "--user", "ann", "--password", "secret"])
        #expect(lost.status != 0 && lost.status != 3, "\(lost.stdout)")
        #expect(await server.objects("Product").count == 1, "made by the first request")
        let second = try await CLI.run(Self.base(db, server, "sync") + ["--rest-key", key])
        #expect(second.status == 0, "\(second.stderr)")
        let objects = await server.objects("Product")
        #expect(objects.count == 1, "made once")
        let posts = await server.requests.filter { $0.method == "POST" && $0.path == "/parse/classes/Product" }
        #expect(Set(posts.compactMap { $0.headers["x-parse-request-id"] }).count == 1, "one change, one request id, in both runs")
        let id = try #require(objects.keys.first)
        #expect(try await CLI.run(["--db", db, "find", "Product", "--id", id, "--select", "name"]).lines == [#"{"name":"Lamp","object":"\#(id)"}"#])
        #expect(try JSONObject(parsing: try #require(objects[id])).keys.sorted() == ["createdAt", "name", "objectId", "price", "updatedAt"])
    }

    @Test("--create-protection object-id sends the local id as objectId; field=NAME writes that field; a bad value is one line")
    func createProtections() async throws {
        var fixture = ParseFixture()
        fixture.allowCustomObjectID = true
        let server = try await ParseServer.start(fixture)
        defer { Task { await server.stop() } }
        let directory = TemporaryDirectory()
        let key = try #require(server.restKey)
        let db = directory.child("db")
        try await CLI.run(["--db", db, "put", "Product", #"{"object":"mine","name":"Lamp"}"#]).expectSuccess()
        let sync = try await CLI.run(
            Self.base(db, server, "sync") + ["--rest-key", key, "--user", "ann", "--password", "secret", "--create-protection", "object-id"])
        #expect(sync.status == 0, "\(sync.stderr)")
        #expect(await server.objects("Product").keys.sorted() == ["mine"])
        let other = directory.child("other")
        try await CLI.run(["--db", other, "put", "Product", #"{"object":"theirs","name":"Desk"}"#]).expectSuccess()
        let field = try await CLI.run(
            Self.base(other, server, "sync") + ["--rest-key", key, "--user", "ann", "--password", "secret", "--create-protection", "field=deviceRef"])
        #expect(field.status == 0, "\(field.stderr)")
        let desk = try #require(await server.objects("Product").values.map { try JSONObject(parsing: $0) }.first { $0["name"] == "Desk" })
        #expect(desk["deviceRef"] == "theirs")
        #expect(
            try await CLI.run(["--db", other, "find", "Product", "--where", "name=Desk", "--select", "deviceRef"]).stdout.contains(
                #""deviceRef":"theirs""#))
        let bad = try await CLI.run(Self.base(other, server, "sync") + ["--rest-key", key, "--create-protection", "sometimes"])
        #expect(bad.status != 0 && bad.stderr.contains("request-id, object-id, field=NAME or none"), "\(bad.stderr)")
    }
}

extension CLI.Result {
    func expectSuccess(sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(status == 0, "\(stderr)", sourceLocation: sourceLocation)
    }
}
