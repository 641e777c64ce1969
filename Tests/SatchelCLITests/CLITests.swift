import Foundation
import SatchelTestSupport
import Testing

@testable import Satchel

/// Runs the built `satchel` executable.
enum CLI {
    struct Failure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
        var lines: [String] { stdout.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) }
    }

    /// The `satchel` binary next to the test bundle (`.build/<config>/`).
    static var executable: URL {
        let next = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("satchel")
        if FileManager.default.isExecutableFile(atPath: next.path) { return next }
        return Fixtures.directory.deletingLastPathComponent().appendingPathComponent(".build/debug/satchel")
    }

    /// Runs the CLI to its end, waiting off the test's threads (the concurrency pool has one per
    /// core): an in-process server, and the other tests, keep running meanwhile.
    static func run(_ arguments: [String], environment: [String: String] = [:], input: String? = nil) async throws -> Result {
        let child = try await ChildProcess.detached(
            executable.path, arguments, environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
            input: input.map { Data($0.utf8) })
        return Result(
            status: child.status, stdout: String(decoding: child.stdout, as: UTF8.self), stderr: String(decoding: child.stderr, as: UTF8.self))
    }
}

@Suite("satchel CLI")
struct CLITests {
    @Test("put, find, update and delete through the command line")
    func singleObjectWrites() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let put = try await CLI.run(["--db", db, "put", "Product", #"{"object":"p1","name":"Lamp","price":10,"tags":["a"]}"#])
        #expect(put.status == 0)
        #expect(put.lines == [#"{"name":"Lamp","object":"p1","price":10,"tags":["a"]}"#])
        let generated = try await CLI.run(["--db", db, "put", "Product", #"{"name":"Kettle","price":25.5}"#])
        let generatedObject = try JSONObject(parsing: generated.lines.first ?? "")
        #expect(generatedObject["object"]?.stringValue?.count == 26)

        #expect(try await CLI.run(["find", "--db", db, "Product", "--id", "p1"]).lines == put.lines)
        #expect(try await CLI.run(["--db", db, "find", "Product", "--count"]).lines == ["2"])
        #expect(try await CLI.run(["--db", db, "find", "Product", "--where", "price=10"]).lines == put.lines)
        #expect(try await CLI.run(["--db", db, "find", "Product", "--where", "price = 10.0", "--where", "name=Lamp", "--count"]).lines == ["1"])
        #expect(try await CLI.run(["--db", db, "find", "Product", "--where", "name=\"10\""]).lines.isEmpty)

        let update = try await CLI.run(["--db", db, "update", "Product", "p1", #"{"price":12,"tags":null}"#])
        #expect(update.lines == [#"{"name":"Lamp","object":"p1","price":12}"#])
        let removed = try await CLI.run(["--db", db, "update", "Product", "p1", #"{"price":null,"name":null}"#])
        #expect(removed.status == 0)
        #expect(removed.stdout.isEmpty)
        let missing = try await CLI.run(["--db", db, "find", "Product", "--id", "p1"])
        #expect(missing.status == 1)
        #expect(missing.stdout.isEmpty)

        #expect(try await CLI.run(["--db", db, "delete", "Product", generatedObject["object"]!.stringValue!]).status == 0)
        let again = try await CLI.run(["--db", db, "delete", "Product", "p1"])
        #expect(again.status == 1)
        #expect(again.stderr.contains("no object"))
        #expect(try await CLI.run(["--db", db, "find", "Product", "--count"]).lines == ["0"])
        let unknown = try await CLI.run(["--db", db, "find", "Nothing", "--count"])
        #expect(unknown.status == 1 && unknown.stdout.isEmpty, "a model the store never saw is no empty answer")
    }

    @Test(
        "bad input gives one line on stderr and a non-zero exit, changing nothing",
        arguments: [
            ["put", "Product", "{\"a\":"], ["put", "Product", "[1]"], ["put", "Product", "{\"object\":5,\"a\":1}"],
            ["update", "Product", "p1", "not json"], ["update", "Product", "nope", "{\"a\":1}"], ["find", "Product", "--where", "price"],
            ["import", "Product", "/nonexistent/file.json"],
        ])
    func badInput(_ arguments: [String]) async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        #expect(try await CLI.run(["--db", db, "put", "Product", #"{"object":"p1","a":1}"#]).status == 0)
        let result = try await CLI.run(["--db", db] + arguments)
        #expect(result.status != 0)
        #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
        #expect(result.stderr.hasPrefix("satchel: ") || result.stderr.hasPrefix("Error: "))
        #expect(try await CLI.run(["--db", db, "find", "Product"]).lines == [#"{"a":1,"object":"p1"}"#])
    }

    @Test("import prints its count; a malformed file imports nothing")
    func importFiles() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let result = try await CLI.run(["--db", db, "import", "Product", Fixtures.url("products.json").path])
        #expect(result.status == 0)
        #expect(result.lines == ["imported 300"])
        #expect(result.stderr.isEmpty)  // no progress bar when stderr is not a terminal
        let bad = directory.child("bad.jsonl")
        try Data(((0..<5000).map { "{\"i\":\($0)}" }.joined(separator: "\n") + "\n{\"i\":").utf8).write(to: URL(fileURLWithPath: bad))
        let failed = try await CLI.run(["--db", db, "import", "Product", bad, "--batch-size", "10"])
        #expect(failed.status == 1)
        #expect(failed.stderr.contains("line 5001"))
        #expect(try await CLI.run(["--db", db, "find", "Product", "--count"]).lines == ["300"])
        let check = try await CLI.run(["--db", db, "check"])
        #expect(check.status == 0)
        #expect(check.lines.last?.hasSuffix("ok") == true)
    }

    @Test("stats --json prints one object per model with the contract's keys")
    func statsJSON() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        _ = try await CLI.run(["--db", db, "import", "Order", Fixtures.url("orders.jsonl").path])
        _ = try await CLI.run(["--db", db, "put", "Customer", #"{"object":"c1","name":"A"}"#])
        _ = try await CLI.run(["--db", db, "update", "Order", "ord-00001", #"{"status":"x"}"#])
        let result = try await CLI.run(["--db", db, "stats", "--json"])
        #expect(result.status == 0)
        let lines = try result.lines.map { try JSONObject(parsing: $0) }
        #expect(lines.map { $0["model"] } == ["Customer", "Order"])
        let order = try #require(lines.last)
        #expect(order["partition"] == "user")
        #expect(order["objects"] == 600)
        #expect(order["pending"] == ["create": 600, "update": 0, "delete": 0])
        #expect(order["errors"] == 0)
        #expect(order["indexes"] == .object([:]))
        #expect(
            lines.allSatisfy { Set($0.keys) == ["model", "partition", "objects", "pending", "inFlight", "errors", "indexes"] },
            "the contract's keys, no others (found by a black-box probe: bytes was there too)")
    }

    @Test("a store held by another process is reported as locked")
    func locked() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let store = try Store(path: db)
        defer { try? store.close() }
        try store.model("Product").create(["object": "p", "a": 1])
        let result = try await CLI.run(["--db", db, "find", "Product", "--count"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("locked") || result.stderr.contains("another process"))
        #expect(result.stdout.isEmpty)
    }

    @Test("check exits non-zero on an undecodable object or statistics that disagree with the data")
    func checkFindsDamage() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        #expect(try await CLI.run(["--db", db, "put", "Product", #"{"object":"p1","a":1}"#]).status == 0)
        #expect(try await CLI.run(["--db", db, "check"]).status == 0)
        // Behind Satchel's back: a damaged object, and an object the statistics do not know.
        let store = try Store(path: db)
        var batch = LevelDBWriteBatch()
        batch.put(Keys.object("Product", "p1"), Array("{\"a\":".utf8))
        batch.put(Keys.object("Product", "p2"), Array("{\"a\":2}".utf8))
        try store.database(.user).write(batch, sync: false)
        try store.close()
        let result = try await CLI.run(["--db", db, "check"])
        #expect(result.status == 1)
        #expect(result.stdout.contains("object 'p1' of model 'Product' does not decode"))
        #expect(result.stdout.contains("stored statistics (objects 1"))
        #expect(result.lines.last?.hasSuffix("2 problems") == true)
    }

    @Test("index and find with every option, through the command line")
    func queries() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        #expect(try await CLI.run(["--db", db, "import", "Product", Fixtures.url("products.json").path]).status == 0)
        let built = try await CLI.run(["--db", db, "index", "Product", "brand,price"])
        #expect(built.lines == ["index brand,price of Product: 300 entries"])
        #expect(try await CLI.run(["--db", db, "index", "Product", "tags[]"]).status == 0)
        #expect(
            try await CLI.run(["--db", db, "index", "Product", "--list"]).lines == [
                "brand,price\tvalue\tready\t300 entries", "tags[]\telements\tready\t496 entries",
            ])

        func find(_ arguments: String...) async throws -> [String] {
            let result = try await CLI.run(["--db", db, "find", "Product"] + arguments)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            return result.lines
        }
        let top = try await find("--where", "brand=Acme", "--order", "price:desc", "--limit", "3", "--select", "name,price")
        #expect(top.count == 3)
        let prices = try top.map { try JSONObject(parsing: $0) }.map { $0["price"]!.doubleValue! }
        #expect(prices == prices.sorted(by: >))
        #expect(try JSONObject(parsing: top[0]).keys == ["name", "object", "price"])
        #expect(
            try await find("--where", "brand=Acme", "--order", "price:desc", "--limit", "3", "--explain")
                == ["index brand,price: brand == \"Acme\", read in reverse index order; stop after 3"])
        let page2 = try await find("--where", "brand=Acme", "--order", "price:desc", "--limit", "3", "--offset", "3")
        let firstSix = try await find("--where", "brand=Acme", "--order", "price:desc", "--limit", "6")
        #expect(page2 == Array(firstSix.suffix(3)))

        let all = try await find().map { try JSONObject(parsing: $0) }
        func expectCount(_ condition: String, _ predicate: (JSONObject) -> Bool) async throws {
            #expect(try await find("--where", condition, "--count") == [String(all.filter(predicate).count)], "\(condition)")
        }
        try await expectCount("price < 100") { ($0["price"]?.doubleValue ?? .infinity) < 100 }
        try await expectCount("price>=500") { ($0["price"]?.doubleValue ?? -1) >= 500 }
        try await expectCount("brand != Acme") { $0["brand"] != "Acme" }
        try await expectCount("name ^= Acme") { $0["name"]?.stringValue?.hasPrefix("Acme") == true }
        try await expectCount("tags ~= sale") { $0["tags"]?.arrayValue?.contains("sale") == true }
        try await expectCount("description ~= quiet") { $0["description"]?.stringValue?.contains("quiet") == true }
        try await expectCount("brand in Acme,Hooli,Stark") { ["Acme", "Hooli", "Stark"].contains($0["brand"]?.stringValue ?? "") }
        try await expectCount("discontinued=true") { $0["discontinued"] == true }
        #expect(try await find("--where", "tags ~= sale", "--explain").first?.hasPrefix("index tags[]") == true)
        #expect(try await find("--where", "brand=Acme", "--where", "price>=100", "--explain").first?.hasPrefix("index brand,price") == true)

        #expect(try await CLI.run(["--db", db, "index", "Product", "category", "--keys-only"]).status == 0)
        #expect(try await CLI.run(["--db", db, "index", "Product", "--list"]).lines.last == "category\tvalue, keys only\tready\t300 entries")
        #expect(try await find("--where", "category=books", "--explain").first?.hasPrefix("index category") == true)
        try await expectCount("category=books") { $0["category"] == "books" }
        #expect(try await CLI.run(["--db", db, "index", "Product", "--drop", "category"]).status == 0)
        let dropped = try await CLI.run(["--db", db, "index", "Product", "--drop", "tags[]"])
        #expect(dropped.lines == ["dropped index tags[] of Product"])
        #expect(try await find("--where", "tags ~= sale", "--explain").first?.hasPrefix("scan Product") == true)
        // A text index is dropped by the name --list prints (found by a black-box probe), or by --text --drop.
        #expect(try await CLI.run(["--db", db, "index", "Product", "--text", "name,description"]).status == 0)
        #expect(try await CLI.run(["--db", db, "index", "Product", "--list"]).lines.last?.hasPrefix("text(name,description)\ttext") == true)
        let droppedText = try await CLI.run(["--db", db, "index", "Product", "--drop", "text(name,description)"])
        #expect(droppedText.lines == ["dropped index text(name,description) of Product"], "\(droppedText.stderr)")
        #expect(try await CLI.run(["--db", db, "index", "Product", "--text", "name"]).status == 0)
        #expect(try await CLI.run(["--db", db, "index", "Product", "--text", "--drop", "name"]).lines == ["dropped index text(name) of Product"])
        let stats = try JSONObject(parsing: try await CLI.run(["--db", db, "stats", "--json"]).lines[0])
        #expect(stats["indexes"] == ["brand,price": 300])
        #expect(try await CLI.run(["--db", db, "check"]).status == 0)
    }

    @Test("check exits non-zero when an index disagrees with its objects")
    func checkFindsIndexDamage() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        #expect(try await CLI.run(["--db", db, "put", "Product", #"{"object":"p1","brand":"A"}"#]).status == 0)
        #expect(try await CLI.run(["--db", db, "index", "Product", "brand"]).status == 0)
        let store = try Store(path: db)
        var batch = LevelDBWriteBatch()
        batch.put(Keys.object("Product", "p1"), Array(#"{"brand":"B"}"#.utf8))  // the index still says A
        try store.database(.user).write(batch, sync: false)
        try store.close()
        let result = try await CLI.run(["--db", db, "check"])
        #expect(result.status == 1)
        #expect(result.stdout.contains("lacks its entry in index brand"))
        #expect(result.stdout.contains("does not match the object"))
    }

    @Test("the demo runs end to end")
    func demo() async throws {
        let directory = TemporaryDirectory()
        let result = try await CLI.run(["demo", "--db", directory.child("demo"), "--fixtures", Fixtures.directory.path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("imported 300 Product objects"))
        #expect(result.stdout.contains("a failing bulkUpdate wrote nothing"))
        #expect(result.stdout.contains(": ok"))
        #expect(result.stdout.contains("first sync of Customer, Order, Product"))
        #expect(result.stdout.contains("pushed 1051 changes"))
        #expect(result.stdout.contains("1 change refused"))
        #expect(result.stdout.contains("pending changes 0, errors 0"))
        #expect(result.stdout.contains("1 complete (the whole sync)"), "notifications are explained")
        #expect(result.stdout.contains("Setting: 1 object, nothing pending: a local model"))
        // The command the demo suggests works as printed.
        let explore = try #require(result.lines.last { $0.hasPrefix("explore it: ") })
        let words = explore.dropFirst("explore it: ".count).split(separator: " ").map(String.init)
        let suggested = try await ChildProcess.detached(words[0], Array(words.dropFirst()))
        #expect(suggested.status == 0, "\(explore): \(String(decoding: suggested.stderr, as: UTF8.self))")
        #expect(String(decoding: suggested.stdout, as: UTF8.self).split(separator: "\n").count == 3)
        let reopened = try Store(path: directory.child("demo"))
        defer { try? reopened.close() }
        #expect(try reopened.model("Order").count() == 600, "one deleted on the server")
        #expect(try reopened.pendingChanges().isEmpty)

        // A fixtures folder missing a file fails before a store is made (a black-box probe: it
        // failed half way and left its store).
        let partial = directory.child("partial")
        try FileManager.default.createDirectory(atPath: partial, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Fixtures.directory.appendingPathComponent("products.json").path, toPath: partial + "/products.json")
        let failed = try await CLI.run(["demo", "--db", directory.child("half"), "--fixtures", partial])
        #expect(failed.status == 1 && failed.stderr.contains("customers.json"), "\(failed.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.child("half")), "no store left")
    }

    @Test("an import killed mid-way leaves only whole batches")
    func killedImport() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let file = directory.child("many.jsonl")
        let total = 200_000
        try Data((0..<total).map { "{\"i\":\($0),\"s\":\"some text to make the object bigger\"}" }.joined(separator: "\n").utf8)
            .write(to: URL(fileURLWithPath: file))
        // Once batches are landing, killed without warning.
        let child = try await ChildProcess.detached(
            CLI.executable.path, ["--db", db, "import", "Item", file, "--batch-size", "100", "--progress", "lines"],
            killWhen: { $0.contains("batch 3 committed") })
        #expect(child.signaled && child.status == SIGKILL)
        #expect(String(decoding: child.stderr, as: UTF8.self).contains("batch 3 committed"))
        let store = try Store(path: db)
        defer { try? store.close() }
        let items = try store.model("Item")
        let count = try items.count()
        #expect(count >= 300)
        #expect(count % 100 == 0, "\(count) objects: a partial batch landed")
        #expect(try items.findAll().count == count)
        #expect(try store.verify().isHealthy)
    }
}
