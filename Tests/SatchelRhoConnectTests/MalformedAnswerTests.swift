import Foundation
import RhoConnectTestServer
import Satchel
import SatchelRhoConnect
import SatchelSync
import SatchelSyncTesting
import Testing

/// Hostile and broken answers: each gives a typed, clear error, and leaves the store as it was;
/// the next sync against a sane server converges.
// One test at a time: each starts a loopback server, whose socket pool holds a Dispatch thread
// in epoll_wait while it runs. Every such test at once, beside the other suites, reached
// Dispatch's limit of threads in full runs: URLSession's queues got none, and clients timed out.
@Suite("RhoConnect adapter: malformed answers", .serialized)
struct MalformedAnswerTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var path: String
        var status = 200
        var body: String
        var code: SyncError.Code
        var testDescription: String { name }
    }

    static let header = #"{"version":3},{"token":"42"},{"count":1},{"progress_count":0},{"total_count":1}"#

    static let pageCases: [Case] = [
        Case(name: "truncated JSON", path: "/app/v1/Product", body: #"[{"version":3},{"token":"4751"#, code: .protocolViolation),
        Case(name: "not JSON", path: "/app/v1/Product", body: "<html>Bad gateway</html>", code: .protocolViolation),
        Case(name: "an object, not a page", path: "/app/v1/Product", body: #"{"version":3}"#, code: .protocolViolation),
        Case(
            name: "wrong version", path: "/app/v1/Product",
            body: #"[{"version":2},{"token":""},{"count":0},{"progress_count":0},{"total_count":0},{}]"#, code: .versionMismatch),
        Case(name: "no version", path: "/app/v1/Product", body: #"[{"token":""},{"count":0},{}]"#, code: .protocolViolation),
        Case(name: "no token", path: "/app/v1/Product", body: #"[{"version":3},{"count":0},{"total_count":0},{}]"#, code: .protocolViolation),
        // A token no query could send back (a black-box probe: kept, then every query was a 414).
        Case(
            name: "a 100,000-character token", path: "/app/v1/Product",
            body: #"[{"version":3},{"token":""# + String(repeating: "9", count: 100_000)
                + #""},{"count":0},{"progress_count":0},{"total_count":0},{}]"#,
            code: .protocolViolation),
        Case(name: "no count", path: "/app/v1/Product", body: #"[{"version":3},{"token":"42"},{"total_count":3},{}]"#, code: .protocolViolation),
        Case(name: "insert is a list", path: "/app/v1/Product", body: "[\(header),{\"insert\":[\"1\"]}]", code: .protocolViolation),
        Case(name: "an object that is a string", path: "/app/v1/Product", body: "[\(header),{\"insert\":{\"1\":\"x\"}}]", code: .protocolViolation),
        Case(name: "a link without its id", path: "/app/v1/Product", body: "[\(header),{\"links\":{\"tmp\":{}}}]", code: .protocolViolation),
        Case(name: "elements after the command", path: "/app/v1/Product", body: "[\(header),{},{}]", code: .protocolViolation),
        // Acknowledged, the objects it lost would be lost for good (a black-box probe).
        // Header elements of the wrong JSON type (the protocol's are numbers, and the token a
        // string): refused, nothing of the page applied (a black-box probe).
        Case(
            name: "a version that is a string", path: "/app/v1/Product",
            body: #"[{"version":"3"},{"token":""},{"count":1},{"total_count":1},{"insert":{"9":{"name":"X"}}}]"#, code: .protocolViolation),
        Case(
            name: "a token that is a number", path: "/app/v1/Product",
            body: #"[{"version":3},{"token":5},{"count":1},{"total_count":1},{"insert":{"9":{"name":"X"}}}]"#, code: .protocolViolation),
        Case(
            name: "a count that is a string", path: "/app/v1/Product",
            body: #"[{"version":3},{"token":""},{"count":"1"},{"total_count":1},{"insert":{"9":{"name":"X"}}}]"#, code: .protocolViolation),
        Case(
            name: "a total count that is a string", path: "/app/v1/Product",
            body: #"[{"version":3},{"token":""},{"count":1},{"total_count":"1"},{"insert":{"9":{"name":"X"}}}]"#, code: .protocolViolation),
        Case(name: "a count of objects it does not hold", path: "/app/v1/Product", body: "[\(header),{}]", code: .protocolViolation),
        Case(name: "a server error", path: "/app/v1/Product", status: 503, body: "down for maintenance", code: .server),
        Case(name: "a client without an id", path: "/rc/v1/clients", body: #"{"client":{}}"#, code: .protocolViolation),
        // Within the 32 MiB answer limit, but each a tree no page needs (AnswerLimits).
        Case(
            name: "ten million values in 20 MB", path: "/app/v1/Product",
            body: "[" + String(repeating: "0,", count: 9_999_999) + "0]", code: .protocolViolation),
        Case(
            name: "100,000 levels of nesting", path: "/app/v1/Product",
            body: String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000), code: .protocolViolation),
    ]

    @Test(arguments: pageCases)
    func answer(_ bad: Case) async throws {
        let server = try await RhoConnectServer.start(try Fixture.named("products"))
        let client = try SyncClient(backend: RhoConnectBackend.forTests(server), models: [ModelDefinition(name: "Product")])
        try await client.engine.logIn(Credentials(user: "ann", password: "secret"))
        if bad.path != "/rc/v1/clients" { try await client.engine.sync() }
        try await server.runScript("edits")
        try client.model("Product").create(["object": "made-here", "name": "Made here"])
        let before = try client.objects("Product")
        let pending = try client.store.pendingChanges()

        await server.sabotageNext(bad.path == "/rc/v1/clients" ? "POST" : "GET", bad.path, status: bad.status, body: Data(bad.body.utf8))
        let error = await #expect(throws: SyncError.self) { try await client.engine.sync() }
        #expect(error?.code == bad.code, "\(String(describing: error))")
        #expect(error.map { !$0.message.isEmpty } == true)
        if bad.status == 503 { #expect(error?.httpStatus == 503 && error?.isRetryable == true) }
        #expect(try client.objects("Product") == before, "the store is as it was")
        // No local change lost: still pending, or already pushed (pushes go before queries).
        let stillPending = Set(try client.store.pendingChanges().map(\.objectID))
        let pushed = await server.objects("Product", user: "ann").values.contains { $0["name"] == "Made here" }
        #expect(pending.allSatisfy { stillPending.contains($0.objectID) } || pushed)
        #expect(try client.store.verify().problems == [])

        try await client.engine.sync()
        let remote = await server.objects("Product", user: "ann")
        #expect(try client.objects("Product").mapValues { $0.map(\.key).sorted() } == remote.mapValues { $0.keys.sorted() })
        #expect(try client.model("Product").find("3") == nil && remote.values.filter { $0["name"] == "Made here" }.count == 1)
        await server.stop()
    }

    @Test("a login that sets no cookie")
    func loginWithoutCookie() async throws {
        let server = try await RhoConnectServer.start(try Fixture.named("products"))
        let client = try SyncClient(backend: RhoConnectBackend.forTests(server), models: [ModelDefinition(name: "Product")])
        await server.sabotageNext("POST", "/rc/v1/app/login", body: Data())
        let error = await #expect(throws: SyncError.self) { try await client.engine.logIn(Credentials(user: "ann", password: "secret")) }
        #expect(error?.code == .protocolViolation && error?.rhoConnectCode == 4)
        #expect(await !client.engine.isLoggedIn)
        await server.stop()
    }

    @Test(
        "a bulk answer of nop (no bulk source in the partition) leaves the model's data, and the sync pulls it as an incremental one (found by a black-box probe)"
    )
    func bulkNop() async throws {
        let server = try await RhoConnectServer.start(try Fixture.named("products"))
        let client = try SyncClient(backend: RhoConnectBackend.forTests(server), models: [ModelDefinition(name: "Product")])
        try await client.engine.logIn(Credentials(user: "ann", password: "secret"))
        try await client.engine.sync()
        let before = try client.objects("Product")
        #expect(!before.isEmpty)
        await server.put("Product", user: "ann", id: "new-1", ["name": "New"])
        await server.sabotageNext("POST", "/rc/v1/app/bulk_data", body: Data(#"{"result":"nop"}"#.utf8))
        try await client.engine.sync(mode: .bulk)
        var after = before
        after["new-1"] = ["name": "New"]
        #expect(try client.objects("Product") == after)
        await server.stop()
    }

    @Test("a bulk file that is not a zip")
    func badBulkFile() async throws {
        let server = try await RhoConnectServer.start(try Fixture.named("products"))
        let client = try SyncClient(backend: RhoConnectBackend.forTests(server), models: [ModelDefinition(name: "Product")])
        try await client.engine.logIn(Credentials(user: "ann", password: "secret"))
        try await client.engine.sync()
        let before = try client.objects("Product")
        await server.sabotageNext("GET", "/data/", body: Data("PK not really".utf8))
        let error = await #expect(throws: SyncError.self) { try await client.engine.sync(mode: .bulk) }
        #expect(error?.code == .protocolViolation)
        #expect(try client.objects("Product") == before)
        await server.stop()
    }
}
