import Foundation
import RhoConnectTestServer
import Satchel
import SatchelTestSupport
import Testing

/// `satchel sync --backend rhoconnect` against the loopback RhoConnect server.
@Suite("satchel sync --backend rhoconnect")
struct RhoConnectCLITests {
    @Test("syncs, pushes, exits 3 on a refused record, and names the models it was given")
    func sync() async throws {
        let server = try await RhoConnectServer.start(try Fixture.named("products"))
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let url = server.url.absoluteString
        let first = try await CLI.run([
            "--db", db, "sync", "--backend", "rhoconnect", "--url", url, "--user", "ann", "--password", "secret", "--model", "Product",
        ])
        #expect(first.status == 0, "\(first.stderr)")
        // The last line counts the objects of the whole sync: its models' `ok` lines' (found by a
        // black-box probe: it said 0).
        let okLines = try first.lines.map { try JSONObject(parsing: $0) }.filter { $0["status"] == "ok" }
        let pulledInAll = okLines.compactMap { $0["processed"]?.intValue }.reduce(0, +)
        #expect(okLines.count == 1 && first.lines.last == #"{"processed":\#(pulledInAll),"status":"complete"}"#, "\(first.stdout)")
        #expect(
            try await CLI.run(["--db", db, "find", "Product", "--id", "1"]).lines == [
                #"{"brand":"Apple","name":"iPhone","object":"1","price":"199.99"}"#
            ])

        _ = try await CLI.run(["--db", db, "put", "Product", #"{"object":"tmp","name":"wrongname"}"#])
        let refused = try await CLI.run(["--db", db, "sync", "--backend", "rhoconnect", "--url", url])
        #expect(refused.status == 3, "\(refused.stderr)")
        #expect(try await CLI.run(["--db", db, "errors"]).stdout.contains("error create"))

        let bad = try await CLI.run(["--db", db, "sync", "--backend", "rhoconnect", "--url", "not a url"])
        #expect(bad.status != 0 && bad.stderr.contains("server's root"))
        await server.stop()
    }

    /// The satchel command line for `db` and `server`, logging in as `user` when given.
    static func sync(_ db: String, _ server: RhoConnectServer, as user: String?, _ extra: [String] = []) -> [String] {
        var arguments = ["--db", db, "sync", "--backend", "rhoconnect", "--url", server.url.absoluteString]
        if let user { arguments += ["--user", user, "--password", "secret"] }
        return arguments + extra
    }

    @Test("credentials on every run keep the device's client: the server's deletes and removals arrive")
    func loginEveryRun() async throws {
        let server = try await RhoConnectServer.start(try Fixture.named("products"))
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let first = try await CLI.run(Self.sync(db, server, as: "ann", ["--model", "Product"]))
        #expect(first.status == 0, "\(first.stderr)")
        #expect(try await CLI.run(["--db", db, "find", "Product", "--count"]).lines == ["12"])

        await server.delete("Product", user: "ann", id: "1")
        await server.delete("Product", user: "ann", id: "2")
        await server.update("Product", user: "ann", id: "3", ["brand": nil])
        let second = try await CLI.run(Self.sync(db, server, as: "ann", ["--model", "Product"]))
        #expect(second.status == 0, "\(second.stderr)")
        #expect(!second.stdout.contains("userChanged"))
        #expect(try await CLI.run(["--db", db, "find", "Product", "--id", "1"]).status == 1, "deleted on the server")
        #expect(try await CLI.run(["--db", db, "find", "Product", "--id", "2"]).status == 1, "deleted on the server")
        // Object lines name what the sync did here (a black-box probe: status lines only).
        let objectLines = try second.lines.map { try JSONObject(parsing: $0) }.filter { $0["status"] == nil }
        #expect(objectLines.allSatisfy { $0["model"] == "Product" }, "\(second.stdout)")
        #expect(Set(objectLines.flatMap { $0["deleted"]?.arrayValue ?? [] }) == ["1", "2"], "\(second.stdout)")
        #expect(objectLines.contains { $0["updated"]?.arrayValue?.contains("3") == true }, "\(second.stdout)")
        #expect(try await CLI.run(["--db", db, "find", "Product", "--id", "3"]).lines == [#"{"name":"Pixel","object":"3","price":"499"}"#])
        #expect(try await CLI.run(["--db", db, "find", "Product", "--count"]).lines == ["10"])
        // A create renamed to the server's id says so (and its new id).
        #expect(try await CLI.run(["--db", db, "put", "Product", #"{"object":"n1","name":"New"}"#]).status == 0)
        let third = try await CLI.run(Self.sync(db, server, as: nil, ["--model", "Product"]))
        let renamed = try third.lines.map { try JSONObject(parsing: $0) }.compactMap { $0["renamed"]?.objectValue }
        let serverID = try #require(renamed.first?["n1"]?.stringValue, "\(third.stdout)")
        #expect(try await CLI.run(["--db", db, "find", "Product", "--id", serverID]).status == 0)

        // What the server saw: two logins, one client.
        let requests = await server.requests
        #expect(requests.count { $0.method == "POST" && $0.path == "/rc/v1/app/login" } == 2)
        #expect(requests.count { $0.method == "POST" && $0.path == "/rc/v1/clients" } == 1, "one client registration")
        #expect(Set(requests.compactMap(\.clientID)).count == 1, "every request from the same client")
        #expect(await server.clients.count == 1)
        await server.stop()
    }

    @Test("another user's login wipes the user partition, keeps app and local data, and says so in a line")
    func userSwitch() async throws {
        let server = try await RhoConnectServer.start(try Fixture.named("products"))
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        do {
            let store = try Store(path: db)
            _ = try store.register(ModelDefinition(name: "Catalog", partition: .app))
            try store.register(ModelDefinition(name: "Setting", partition: .local)).create(["object": "s1", "theme": "dark"])
            try store.close()
        }
        await server.put("Product", user: "ann", id: "a1", ["name": "Ann's own"])
        await server.put("Product", user: "bob", id: "b1", ["name": "Bob's own"])
        let models = ["--model", "Product", "--model", "Catalog"]
        #expect(try await CLI.run(Self.sync(db, server, as: "ann", models)).status == 0)
        #expect(try await CLI.run(["--db", db, "find", "Product", "--id", "a1"]).status == 0)
        #expect(try await CLI.run(["--db", db, "find", "Catalog", "--count"]).lines == ["2"])
        _ = try await CLI.run(["--db", db, "put", "Product", #"{"object":"draft","name":"Ann's draft"}"#])
        // Shared (app) data changes meanwhile.
        await server.delete("Catalog", user: "bob", id: "c2")

        let bob = try await CLI.run(Self.sync(db, server, as: "bob", models))
        #expect(bob.status == 0, "\(bob.stderr)")
        let switched = bob.lines.filter { $0.contains(#""status":"userChanged""#) }
        #expect(switched.count == 1, "one line says so: \(bob.stdout)")
        #expect(switched.first?.contains("wiped") == true)
        #expect(try await CLI.run(["--db", db, "find", "Product", "--id", "a1"]).status == 1, "ann's data is gone")
        #expect(try await CLI.run(["--db", db, "find", "Product", "--id", "draft"]).status == 1)
        #expect(try await CLI.run(["--db", db, "find", "Product", "--id", "b1"]).status == 0, "bob's data arrived")
        #expect(try await CLI.run(["--db", db, "find", "Catalog", "--count"]).lines == ["1"], "app data kept, and re-pulled whole")
        #expect(try await CLI.run(["--db", db, "find", "Setting", "--id", "s1"]).lines == [#"{"object":"s1","theme":"dark"}"#])
        #expect(await server.objects("Product", user: "bob")["draft"] == nil, "ann's draft was not pushed as bob's")
        #expect(try await CLI.run(["--db", db, "check"]).status == 0)

        // The same user again: no switch.
        let again = try await CLI.run(Self.sync(db, server, as: "bob", models))
        #expect(again.status == 0 && !again.stdout.contains("userChanged"))
        await server.stop()
    }

    @Test("a retried call says how long it waits, rounded")
    func retryNotification() async throws {
        let server = try await RhoConnectServer.start(try Fixture.named("products"))
        let directory = TemporaryDirectory()
        await server.sabotageNext("GET", "/app/v1/Product", status: 503, body: Data("busy".utf8))
        let result = try await CLI.run(Self.sync(directory.child("db"), server, as: "ann", ["--model", "Product"]))
        #expect(result.status == 0, "\(result.stderr)")
        let retry = try #require(result.lines.first { $0.contains("retrying in") })
        #expect(retry.range(of: #"retrying in [0-9]+(\.[0-9])? s""#, options: .regularExpression) != nil, "\(retry)")
        await server.stop()
    }
}
