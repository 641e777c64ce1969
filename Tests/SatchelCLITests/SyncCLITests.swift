import Foundation
import Satchel
import SatchelSync
import SatchelTestSupport
import Testing

/// `satchel sync`, `errors`, `resolve`, `logout` and `reset`, against the in-memory server kept in
/// a file.
@Suite("satchel sync commands")
struct SyncCLITests {
    struct Setup {
        let directory = TemporaryDirectory()
        var db: String { directory.child("db") }
        var serverFile: String { directory.child("server.json") }

        /// Runs the CLI on this store, off the test's threads.
        func run(_ arguments: [String]) async throws -> CLI.Result { try await CLI.run(["--db", db] + arguments) }

        func sync(_ extra: [String] = [], environment: [String: String] = [:]) async throws -> CLI.Result {
            try await CLI.run(["--db", db, "sync", "--backend", "memory", "--url", serverFile] + extra, environment: environment)
        }

        /// Changes the server's state as another client would.
        func onServer(_ body: (InMemoryBackend) async -> Void) async throws {
            let saved = try InMemoryBackend.savedState(parsing: Array(Data(contentsOf: URL(fileURLWithPath: serverFile))))
            let server = try InMemoryBackend(savedState: saved)
            await body(server)
            try Data(await server.savedState().jsonBytes).write(to: URL(fileURLWithPath: serverFile))
        }

        func serverObjects(_ model: String) async throws -> [String: JSONObject] {
            let saved = try InMemoryBackend.savedState(parsing: Array(Data(contentsOf: URL(fileURLWithPath: serverFile))))
            return await (try InMemoryBackend(savedState: saved)).objects(model)
        }
    }

    @Test(
        "two stores syncing at once through one memory server file: each waits for the other, and the file keeps both pushes (found by a black-box probe)"
    )
    func concurrentSyncsShareTheFile() async throws {
        let setup = Setup()
        let other = setup.directory.child("other")
        for db in [setup.db, other] {
            let login = ["--db", db, "sync", "--backend", "memory", "--url", setup.serverFile, "--user", "ann", "--password", "pw"]
            #expect(try await CLI.run(login).status == 0)
        }
        for round in 0..<3 {
            for (db, prefix) in [(setup.db, "a"), (other, "b")] {
                #expect(try await CLI.run(["--db", db, "put", "Product", #"{"object":"\#(prefix)\#(round)","n":\#(round)}"#]).status == 0)
            }
            async let first = CLI.run(["--db", setup.db, "sync", "--backend", "memory", "--url", setup.serverFile])
            async let second = CLI.run(["--db", other, "sync", "--backend", "memory", "--url", setup.serverFile])
            let (a, b) = try await (first, second)
            #expect(a.status == 0 && b.status == 0, "\(a.stderr)\(b.stderr)")
            let kept = try await setup.serverObjects("Product")
            #expect(kept["a\(round)"] != nil && kept["b\(round)"] != nil, "round \(round): \(kept.keys.sorted())")
        }
        #expect(try await setup.serverObjects("Product").count == 6)
        let directory = try await setup.run(["sync", "--backend", "memory", "--url", setup.directory.path])
        #expect(directory.status == 1 && directory.stderr.split(separator: "\n").count == 1, "\(directory.stderr)")
        #expect(directory.stderr.contains("is a directory"), "\(directory.stderr)")
    }

    @Test(
        "a sync of every model says that the pending changes of a model named '' stay here: no server names a model so (a black-box probe: passed over in silence)"
    )
    func emptyNamedModelSaid() async throws {
        let setup = Setup()
        #expect(try await setup.run(["put", "Product", #"{"object":"p1","name":"A"}"#]).status == 0)
        #expect(try await setup.run(["put", "", #"{"object":"e1","name":"E"}"#]).status == 0)
        let sync = try await setup.sync(["--user", "ann", "--password", "pw"])
        #expect(sync.status == 0, "\(sync.stderr)")
        #expect(sync.lines.contains("model '' (the empty name): 1 pending change(s) stay here: no server names a model so"), "\(sync.stdout)")
        #expect(try await setup.serverObjects("Product").count == 1)
    }

    @Test("an object nested as deep as a store takes is kept by the memory server in a file every later sync reads (found by a black-box probe)")
    func deepestObjectKept() async throws {
        let setup = Setup()
        var deep = "1"
        for _ in 0..<(JSONValue.maxDepth - 1) { deep = "[\(deep)]" }
        let object = #"{"object":"d1","deep":"# + deep + "}"
        #expect(try await setup.run(["put", "Product", object]).status == 0)
        #expect(try await setup.run(["put", "Other", #"{"object":"o1","name":"O"}"#]).status == 0)
        let first = try await setup.sync(["--user", "ann", "--password", "pw"])
        #expect(first.status == 0, "\(first.stderr)")
        // Every later sync reads the server's file: this store's, and another store's.
        #expect(try await setup.run(["put", "Other", #"{"object":"o2","name":"P"}"#]).status == 0)
        let second = try await setup.sync()
        #expect(second.status == 0, "\(second.stderr)")
        #expect(try await setup.serverObjects("Other").count == 2)
        #expect(try await setup.serverObjects("Product")["d1"]?["deep"] == (try JSONValue(parsing: deep)))
        // Changed and deleted once synced: their pending changes keep such values a level down,
        // and read back (a black-box probe: the store failed its check, and every sync after).
        let changed = deep.replacingOccurrences(of: "1", with: "2")
        #expect(try await setup.run(["update", "Product", "d1", #"{"deep":"# + changed + "}"]).status == 0)
        #expect(try await setup.run(["put", "Product", #"{"object":"d2","deep":"# + deep + "}"]).status == 0)
        #expect(try await setup.sync().status == 0)
        #expect(try await setup.run(["delete", "Product", "d2"]).status == 0)
        let check = try await setup.run(["check"])
        #expect(check.status == 0, "\(check.stdout)\(check.stderr)")
        let third = try await setup.sync()
        #expect(third.status == 0, "\(third.stderr)")
        let products = try await setup.serverObjects("Product")
        #expect(products["d1"]?["deep"] == (try JSONValue(parsing: changed)))
        #expect(products["d2"] == nil)
    }

    @Test(
        "a sync's notifications go out as they come when stdout is a pipe: a sync stopped after a page has said so (found by a black-box probe: they came in one block at the end)"
    )
    func notificationsGoOutAsTheyCome() async throws {
        let setup = Setup()
        let server = InMemoryBackend()
        for i in 0..<12 { await server.put("Product", ["name": .string("P\(i)")], id: "p\(i)") }
        try Data(await server.savedState().jsonBytes).write(to: URL(fileURLWithPath: setup.serverFile))
        let killed = try await setup.sync(
            ["--user", "ann", "--password", "pw", "--page-size", "5", "--model", "Product"], environment: ["SATCHEL_KILL_AT": "before-pull:2"])
        #expect(killed.status == SIGKILL, "\(killed.stderr)")
        let lines = try killed.lines.map { try JSONObject(parsing: $0) }
        #expect(lines.contains { $0["status"] == "inProgress" && $0["processed"] == 5 }, "\(killed.stdout)")
    }

    @Test("verify and search as another user are refused in one line, the store untouched: they change nothing (found by a black-box probe)")
    func readsAsAnotherUser() async throws {
        let setup = Setup()
        #expect(try await setup.run(["put", "Product", #"{"object":"p1","name":"Lamp"}"#]).status == 0)
        #expect(try await setup.sync(["--user", "ann", "--password", "pw"]).status == 0)
        #expect(try await setup.run(["put", "Product", #"{"object":"p2","name":"Unpushed"}"#]).status == 0)
        let server = ["--backend", "memory", "--url", setup.serverFile, "--user", "bob", "--password", "pw"]
        for command in [["verify", "Product"], ["search", "Product"], ["search", "Product", "--store"]] {
            let result = try await setup.run(command + server)
            #expect(result.status != 0 && result.stderr.split(separator: "\n").count == 1, "\(command): \(result.stderr)")
            #expect(result.stderr.contains("ann") && result.stderr.contains("bob"), "\(result.stderr)")
            #expect(try await setup.run(["find", "Product", "--count"]).lines == ["2"], "\(command) kept both objects")
        }
        // The same user's credentials, or none, read as before.
        let same = try await setup.run(["verify", "Product", "--backend", "memory", "--url", setup.serverFile, "--user", "ann", "--password", "pw"])
        #expect(same.status == 0, "\(same.stdout)\(same.stderr)")
        #expect(try await setup.run(["search", "Product", "--backend", "memory", "--url", setup.serverFile]).lines.count == 1)
        #expect(try await setup.sync().status == 0)
        #expect(try await setup.serverObjects("Product").count == 2, "the unpushed create went on the next sync")
    }

    @Test("sync prints one notification per line and pushes local changes; a session persists")
    func syncRoundTrip() async throws {
        let setup = Setup()
        #expect(try await setup.run(["put", "Product", #"{"object":"p1","name":"Lamp","price":3}"#]).status == 0)
        let anonymous = try await setup.sync()
        #expect(anonymous.status != 0 && anonymous.status != 3)
        #expect(anonymous.stderr.split(separator: "\n").count == 1)
        #expect(anonymous.stderr.contains("--user"))

        let first = try await setup.sync(["--user", "ann", "--password", "hunter2"])
        #expect(first.status == 0, "\(first.stderr)")
        let notifications = try first.lines.map { try JSONObject(parsing: $0) }
        #expect(notifications.map { $0["status"]?.stringValue } == ["inProgress", "inProgress", "ok", "complete"])
        #expect(notifications[2]["model"] == "Product")
        #expect(try await setup.serverObjects("Product") == ["p1": ["name": "Lamp", "price": 3]])
        let stats = try JSONObject(parsing: try await setup.run(["stats", "--json"]).lines.first ?? "")
        #expect(stats["pending"] == ["create": 0, "update": 0, "delete": 0])
        #expect(stats["errors"] == 0)

        // The password is in no file: not the store's, not the server's.
        for file in try FileManager.default.subpathsOfDirectory(atPath: setup.directory.path) {
            let data = (try? Data(contentsOf: URL(fileURLWithPath: setup.directory.child(file)))) ?? Data()
            #expect(data.range(of: Data("hunter2".utf8)) == nil, "\(file) holds the password")
        }

        // Another client's change arrives; the session stored is enough.
        try await setup.onServer { await $0.put("Product", ["name": "Kettle", "price": 20], id: "p2") }
        #expect(try await setup.sync().status == 0)
        #expect(try await setup.run(["find", "Product", "--id", "p2"]).lines == [#"{"name":"Kettle","object":"p2","price":20}"#])
    }

    @Test("a refused update exits 3, is listed by errors, and resolve settles it")
    func refusedChanges() async throws {
        let setup = Setup()
        _ = try await setup.run(["put", "Product", #"{"object":"p1","name":"Lamp","price":3}"#])
        #expect(try await setup.sync(["--user", "ann", "--password", "x"]).status == 0)
        // A conflict: the server's copy changed since this client last saw it.
        try await setup.onServer { await $0.update("Product", "p1", ["price": 5]) }
        _ = try await setup.run(["update", "Product", "p1", #"{"price":4}"#])
        let sync = try await setup.sync()
        #expect(sync.status == 3)
        #expect(
            sync.stderr.split(separator: "\n").count == 1 && sync.stderr.contains("refused 1 change(s)"),
            "one line on stderr, as for every non-zero exit (found by a black-box probe: there was none): \(sync.stderr)")
        #expect(sync.lines.contains { $0.contains(#""error":"refusedChanges""#) })
        let errors = try await setup.run(["errors"])
        #expect(errors.status == 0)
        let error = try JSONObject(parsing: errors.lines.first ?? "")
        #expect(errors.lines.count == 1)
        #expect(error["model"] == "Product" && error["object"] == "p1" && error["kind"] == "update")
        #expect(error["server"] == ["name": "Lamp", "price": 5])
        #expect(try await setup.run(["find", "Product", "--id", "p1"]).lines.first?.contains(#""price":4"#) == true, "local value kept")
        // The refused change is one the server has not confirmed: pending + inFlight counts it
        // (found by a black-box probe: it was in neither).
        let stats = try JSONObject(parsing: try await setup.run(["stats", "--json"]).lines.first ?? "")
        #expect(stats["errors"] == 1 && stats["pending"] == ["create": 0, "update": 1, "delete": 0] && stats["inFlight"] == 0)

        let wrong = try await setup.run(["resolve", "Product", "p1", "--action", "recreate"])
        #expect(wrong.status != 0 && wrong.stderr.contains("retry or rollback"))
        // A model the store does not have is named with those it has (found by a black-box probe).
        let unknown = try await setup.run(["resolve", "Prodcut", "p1", "--action", "rollback"])
        #expect(unknown.status == 1 && unknown.stderr.contains("the store has 'Product'"), "\(unknown.stderr)")
        #expect(try await setup.run(["resolve", "Product", "p1", "--action", "rollback"]).status == 0)
        #expect(try await setup.run(["find", "Product", "--id", "p1"]).lines.first?.contains(#""price":5"#) == true)
        #expect(try await setup.sync().status == 0)
        #expect(try await setup.run(["errors", "Product"]).lines.isEmpty)
        #expect(try await setup.run(["check"]).status == 0)
    }

    @Test("an unknown client is reset and synced again, saying so in a line")
    func unknownClient() async throws {
        let setup = Setup()
        _ = try await setup.run(["put", "Product", #"{"object":"p1","name":"Lamp"}"#])
        #expect(try await setup.sync(["--user", "ann", "--password", "x"]).status == 0)
        _ = try await setup.run(["put", "Product", #"{"object":"p2","name":"Made offline"}"#])
        try await setup.onServer { await $0.forgetClients() }
        let sync = try await setup.sync()
        #expect(sync.status == 0)
        #expect(sync.lines.contains { $0.contains("unknownClient") && $0.contains("resetting") })
        #expect(try await setup.serverObjects("Product").keys.sorted() == ["p1", "p2"])
    }

    @Test("logout, reset --client and reset --full")
    func logoutAndResets() async throws {
        let setup = Setup()
        _ = try await setup.run(["put", "Product", #"{"object":"p1","name":"Lamp"}"#])
        _ = try await setup.run(["put", "Note", #"{"object":"n1","text":"local"}"#])
        #expect(try await setup.sync(["--user", "ann", "--password", "x", "--model", "Product"]).status == 0)

        // Without a server the reset is done here, and says the server was not told (DESIGN's
        // bare `reset --client`; found by a black-box probe: it was refused). The unpushed
        // create of n1 goes with the data, and the reset says so (found by another).
        let noServer = try await setup.run(["reset", "--client"])
        #expect(
            noServer.status == 0 && noServer.lines.count == 1
                && noServer.lines[0].hasPrefix(
                    "client reset; 1 local change the server had not confirmed went with the data; the server was not told (no server given"),
            "\(noServer.stdout)\(noServer.stderr)")
        let reset = try await setup.run(["reset", "--client", "--backend", "memory", "--url", setup.serverFile])
        #expect(reset.status == 0 && reset.lines == ["client reset"], "\(reset.stdout)")
        #expect(try await setup.run(["find", "Product", "--count"]).lines == ["0"])
        #expect(try await setup.run(["find", "Note", "--count"]).lines == ["0"], "every syncing model's data goes, pushed or not")
        #expect(try await setup.sync(["--model", "Product"]).status == 0, "the session is kept")
        #expect(try await setup.run(["find", "Product", "--count"]).lines == ["1"])

        // Without a server the logout is local, and says so (found by a black-box probe: said nothing).
        let logout = try await setup.run(["logout"])
        #expect(logout.status == 0 && logout.lines.count == 1 && logout.lines[0].hasPrefix("logged out; the server was not told (no server given"))
        #expect(try await setup.sync().status == 1)
        #expect(try await setup.sync(["--user", "ann", "--password", "x", "--model", "Product"]).status == 0)
        let full = try await setup.run(["reset", "--full", "--backend", "memory", "--url", setup.serverFile])
        #expect(full.lines == ["full reset; logged out"], "nothing unconfirmed to drop, the server told")
        #expect(try await setup.run(["find", "Product", "--count"]).lines == ["0"])
        #expect(try await setup.sync().status == 1, "logged out")
        #expect(try await setup.run(["reset"]).status != 0)
    }

    @Test("bad sync arguments are one-line errors")
    func badArguments() async throws {
        let setup = Setup()
        for arguments in [
            ["sync"], ["sync", "--backend", "memory"], ["sync", "--backend", "ftp", "--url", "x"],
            ["sync", "--backend", "memory", "--url", setup.serverFile, "--bulk", "--full"],
            ["sync", "--backend", "memory", "--url", setup.serverFile, "--user", "ann"],
            ["resolve", "Product", "p1", "--action", "explode"], ["resolve", "Product", "p1", "--action", "retry"],
        ] {
            let result = try await setup.run(arguments)
            #expect(result.status != 0 && result.status != 3, "\(arguments)")
            #expect(result.stderr.split(separator: "\n").count == 1, "\(arguments): \(result.stderr)")
        }
        try Data("not json".utf8).write(to: URL(fileURLWithPath: setup.serverFile))
        let corrupt = try await setup.sync(["--user", "ann", "--password", "x"])
        #expect(corrupt.status == 1 && corrupt.stderr.contains("in-memory server"))
    }

    /// Where the kill test stops the CLI: right after the server answered a push (Customer,
    /// Order, Product, in that order), or right before the next call, once the store has
    /// recorded the push as accepted.
    static let killPoints = ["after-push:1", "before-pull:1", "before-push:2", "after-push:2", "before-pull:3", "after-push:3"]

    @Test("killed (SIGKILL) at any point of a push, the memory server loses nothing it acknowledged: each change lands once", arguments: killPoints)
    func killedMidPush(_ point: String) async throws {
        let setup = Setup()
        let seed = (1...300).map { #"{"object":"p\#($0)","name":"Product \#($0)","price":\#($0),"brand":"Acme"}"# }
        let file = setup.directory.child("seed.jsonl")
        try Data(seed.joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: file))
        #expect(try await setup.run(["import", "Product", file]).status == 0)
        #expect(try await setup.sync(["--user", "ann", "--password", "x"]).status == 0)

        // Offline: creates, updates (some removing an attribute) and deletes in three models.
        do {
            let store = try Store(path: setup.db)
            let products = try store.model("Product"), customers = try store.model("Customer"), orders = try store.model("Order")
            try await store.bulkUpdate { tx in
                for i in 301...500 { _ = try tx.create(["object": .string("p\(i)"), "name": .string("New \(i)")], in: products) }
                for i in 1...80 {
                    _ = try tx.update("p\(i)", with: ["price": .int(Int64(1000 + i)), "brand": i % 2 == 0 ? .null : "Zenith"], in: products)
                }
                for i in 281...300 { try tx.delete("p\(i)", in: products) }
                for i in 1...50 {
                    _ = try tx.create(["object": .string("c\(i)"), "name": .string("Customer \(i)")], in: customers)
                    _ = try tx.create(["object": .string("o\(i)"), "customer": .string("c\(i)"), "total": .int(Int64(i))], in: orders)
                }
            }
            try store.close()
        }

        let killed = try await setup.sync(environment: ["SATCHEL_KILL_AT": point])
        #expect(killed.status == SIGKILL, "killed at \(point): \(killed.stderr)")
        let after = try await setup.sync()
        #expect(after.status == 0, "\(after.stderr)")
        #expect(try await setup.run(["check"]).status == 0)
        let stats = try await setup.run(["stats", "--json"]).lines.map { try JSONObject(parsing: $0) }
        #expect(stats.allSatisfy { $0["pending"] == ["create": 0, "update": 0, "delete": 0] && $0["errors"] == 0 }, "\(stats)")

        // The server holds every change once: what this store holds, and what a second store pulls.
        #expect(try await setup.serverObjects("Product").count == 480)
        #expect(try await setup.serverObjects("Product")["p2"] == ["name": "Product 2", "price": 1002])
        #expect(try await setup.serverObjects("Customer").count == 50)
        #expect(try await setup.serverObjects("Order").count == 50)
        let second = setup.directory.child("second")
        #expect(
            try await CLI.run([
                "--db", second, "sync", "--backend", "memory", "--url", setup.serverFile, "--user", "ann", "--password", "x",
                "--model", "Product", "--model", "Customer", "--model", "Order",
            ]).status == 0)
        for model in ["Product", "Customer", "Order"] {
            let here = try await setup.run(["find", model]).lines.sorted()
            let there = try await CLI.run(["--db", second, "find", model]).lines.sorted()
            #expect(here == there && !here.isEmpty, "\(model) differs between the two stores")
        }
    }
}
