import Foundation
import Satchel
import SatchelSync
import SatchelSyncTesting
import SatchelTestSupport
import Testing

/// Faults injected around the in-memory backend (and events of the server itself), each followed
/// by the same checks: no local change lost, no page half applied, the store's check clean, and
/// the next sync converging.
@Suite("Faults around the in-memory backend")
struct FaultTests {
    static let credentials = Credentials(user: "ann", password: "secret")
    static let models = [ModelDefinition(name: "Product")]

    /// A server with `count` products, the faults around it, and a logged-in client with pages of
    /// 5 and no retries.
    static func setUp(
        _ count: Int = 20, configuration: InMemoryBackend.Configuration = InMemoryBackend.Configuration(),
        retry: RetryPolicy = RetryPolicy(maxAttempts: 1)
    ) async throws -> (InMemoryBackend, FaultyBackend, SyncClient) {
        let server = InMemoryBackend(configuration: configuration)
        for i in 1...count { await server.put("Product", ["name": .string("Product \(i)"), "price": .int(Int64(i))], id: "p\(i)") }
        let faults = FaultyBackend(server)
        let client = try SyncClient(backend: faults, models: models, pageSize: 5, retry: retry)
        await client.record()
        try await client.engine.logIn(credentials)
        return (server, faults, client)
    }

    /// Local changes of every kind, made offline after a first sync.
    static func changeOffline(_ client: SyncClient) throws {
        let products = try client.model("Product")
        try products.create(["object": "n1", "name": "Made offline", "price": 0])
        try products.update("p1", with: ["price": 100])
        try products.delete("p2")
    }

    /// The local changes of ``changeOffline(_:)`` are on the server, once.
    static func expectChangesLanded(_ server: InMemoryBackend, sourceLocation: SourceLocation = #_sourceLocation) async {
        let objects = await server.objects("Product")
        #expect(objects.values.filter { $0["name"] == "Made offline" }.count == 1, sourceLocation: sourceLocation)
        #expect(objects["p1"]?["price"] == 100, sourceLocation: sourceLocation)
        #expect(objects["p2"] == nil, sourceLocation: sourceLocation)
    }

    /// The local changes of ``changeOffline(_:)`` are still here, pending or in flight.
    static func expectChangesKept(_ client: SyncClient, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let fates = try client.store.changeFates(model: "Product")
        #expect(fates.count == 3, "\(fates)", sourceLocation: sourceLocation)
        #expect(try client.model("Product").find("p1")?["price"] == 100, sourceLocation: sourceLocation)
        #expect(try client.model("Product").find("p2") == nil, sourceLocation: sourceLocation)
    }

    static func expectConverged(_ client: SyncClient, _ server: InMemoryBackend, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        #expect(try client.store.verify().problems == [], sourceLocation: sourceLocation)
        #expect(try client.store.changeFates(model: "Product") == [:], sourceLocation: sourceLocation)
        #expect(try client.objects("Product") == (await server.objects("Product")), sourceLocation: sourceLocation)
    }

    static func expectFailure(_ code: SyncError.Code, _ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) async {
        await #expect(sourceLocation: sourceLocation) { try await body() } throws: { ($0 as? SyncError)?.code == code }
    }

    @Test("a connection dropped mid-page loses the page, nothing else")
    func droppedMidPage() async throws {
        let (server, faults, client) = try await Self.setUp()
        faults.inject(.dropAnswer, on: .pull, after: 2)
        await Self.expectFailure(.network) { try await client.engine.sync() }
        #expect(try client.model("Product").count() == 10, "two whole pages, not the dropped one")
        #expect(try client.store.verify().problems == [])
        let report = try await client.engine.sync()
        #expect(report.pulled == 10, "resumed after the last page applied")
        try await Self.expectConverged(client, server)

        // Again while local changes are on their way, and with the push's answer lost too.
        try Self.changeOffline(client)
        faults.inject(.dropAnswer, on: .push)
        await Self.expectFailure(.network) { try await client.engine.sync() }
        try Self.expectChangesKept(client)
        try await client.engine.sync()
        await Self.expectChangesLanded(server)
        try await Self.expectConverged(client, server)
    }

    @Test("a page served twice is applied once")
    func duplicatedPage() async throws {
        let (server, faults, client) = try await Self.setUp()
        faults.inject(.repeatPreviousPage, on: .pull, after: 1)
        try await client.engine.sync()
        let created = client.log.objects("Product").created
        #expect(created.count == 20 && Set(created).count == 20)
        #expect(faults.count(.pull) == 5, "four pages and the repeat")
        try await Self.expectConverged(client, server)

        // Again with local changes on their way and the server's changes coming back.
        try Self.changeOffline(client)
        for i in 3...14 { await server.update("Product", "p\(i)", ["stock": .int(Int64(i))]) }
        faults.inject(.repeatPreviousPage, on: .pull, after: 1)
        try await client.engine.sync()
        await Self.expectChangesLanded(server)
        try await Self.expectConverged(client, server)
    }

    @Test("5xx then success: retried with backoff and jitter, Retry-After honoured")
    func serverErrorsThenSuccess() async throws {
        let (server, faults, client) = try await Self.setUp(retry: RetryPolicy(maxAttempts: 3, baseDelay: .seconds(1), jitter: 0.5))
        try await client.engine.sync()
        try Self.changeOffline(client)
        faults.failNext(2, with: SyncError(.server, "service unavailable", httpStatus: 503), on: .push)
        faults.inject(.fail(SyncError(.server, "overloaded", httpStatus: 503, retryAfter: .seconds(30))), on: .pull)
        try await client.engine.sync()
        // random() is 0.5 in SyncClient, so the jitter adds nothing: 1 s, 2 s, then the server's 30 s.
        #expect(client.delays.all == [.seconds(1), .seconds(2), .seconds(30)])
        await Self.expectChangesLanded(server)
        try await Self.expectConverged(client, server)

        // More failures than attempts: the sync fails, and loses nothing.
        let products = try client.model("Product")
        try products.create(["object": "n2", "name": "Second"])
        try products.update("p3", with: ["price": 300])
        try products.delete("p4")
        faults.failNext(3, on: .push)
        await Self.expectFailure(.server) { try await client.engine.sync() }
        #expect(try client.store.changeFates(model: "Product").count == 3)
        try await client.engine.sync()
        let objects = await server.objects("Product")
        #expect(objects.values.contains { $0["name"] == "Second" } && objects["p3"]?["price"] == 300 && objects["p4"] == nil)
        try await Self.expectConverged(client, server)
    }

    @Test("a server that asks to wait longer than the policy's maxDelay fails the sync at once, saying how long; nothing lost")
    func retryAfterBeyondMaxDelay() async throws {
        let (server, faults, client) = try await Self.setUp(retry: RetryPolicy(maxAttempts: 3, baseDelay: .seconds(1), maxDelay: .seconds(30)))
        try await client.engine.sync()
        try Self.changeOffline(client)
        // A hostile or broken server: eleven days, then (on the next sync) 292 billion years.
        for seconds in [1_000_000, Int64.max] {
            faults.inject(.fail(SyncError(.server, "overloaded", httpStatus: 503, retryAfter: .seconds(seconds))), on: .push)
            await #expect {
                try await client.engine.sync()
            } throws: {
                guard let error = $0 as? SyncError else { return false }
                return error.code == .server && error.retryAfter == .seconds(seconds) && error.message.contains("longer than the retry policy's 30 s")
            }
            #expect(client.delays.all == [], "no wait of \(seconds) s")
            #expect(try client.store.changeFates(model: "Product").count == 3, "the changes wait for the next sync")
        }
        try await client.engine.sync()
        await Self.expectChangesLanded(server)
        try await Self.expectConverged(client, server)
    }

    @Test("a 401 mid-sync drops the session; after logging in, the sync converges")
    func unauthorizedMidSync() async throws {
        let (server, faults, client) = try await Self.setUp()
        try await client.engine.sync()
        try Self.changeOffline(client)
        for i in 21...32 { await server.put("Product", ["name": .string("Product \(i)")], id: "p\(i)") }
        faults.inject(.before { await server.expireSessions() }, on: .pull, after: 1)
        await Self.expectFailure(.unauthorized) { try await client.engine.sync() }
        #expect(await !client.engine.isLoggedIn)
        #expect(try client.store.verify().problems == [])
        await Self.expectChangesLanded(server)  // pushed before the session expired
        try await client.engine.logIn(Self.credentials)
        try await client.engine.sync()
        try await Self.expectConverged(client, server)
    }

    @Test("rejected create, update and delete are kept as errors and resolved")
    func refusedChanges() async throws {
        let (server, _, client) = try await Self.setUp(5)
        try await client.engine.sync()
        try Self.changeOffline(client)
        await server.reject(InMemoryBackend.Rejection(matching: ["name": "Made offline"], message: "name taken"))
        await server.reject(InMemoryBackend.Rejection(kinds: [.update, .delete], ids: ["p1", "p2"], message: "read-only"))
        let report = try await client.engine.sync()
        #expect(report.refused == 3)
        let errors = try client.store.refusedChanges(model: "Product")
        #expect(errors.map(\.kind) == [.create, .update, .delete], "sorted by id: n1, p1, p2")
        #expect(errors.map(\.message) == ["name taken", "read-only", "read-only"])
        #expect(errors[1].serverCopy?["price"] == 1, "an update error carries the server's copy")
        try Self.expectChangesKept(client)
        #expect(try client.store.verify().problems == [])

        await server.clearRejections()
        try client.store.resolve("Product", "n1", .recreate)
        try client.store.resolve("Product", "p1", .retry)
        try client.store.resolve("Product", "p2", .retry)
        #expect(try await client.engine.sync().refused == 0)
        await Self.expectChangesLanded(server)
        try await Self.expectConverged(client, server)
    }

    @Test(
        "a push goes a chunk at a time: a failed chunk leaves the earlier ones done and the later ones pending, and an edit made meanwhile goes with its object"
    )
    func pushInChunks() async throws {
        var configuration = InMemoryBackend.Configuration()
        configuration.maxPushBatch = 2
        configuration.serverAssignsIDs = false
        let (server, faults, client) = try await Self.setUp(1, configuration: configuration)
        try await client.engine.sync()
        let products = try client.model("Product")
        for i in 1...5 { try products.create(["object": .string("n\(i)"), "price": .int(Int64(i))]) }
        // While the first chunk (n1, n2) is under way, n5 changes; the second chunk (n3, n4) fails.
        let store = client.store
        faults.inject(
            .before({ try? store.bulkUpdate { tx in _ = try tx.update("n5", with: ["price": 50], in: try store.model("Product")) } }), on: .push)
        faults.inject(.fail(SyncError(.server, "service unavailable", httpStatus: 503)), on: .push)  // met after the first
        await Self.expectFailure(.server) { try await client.engine.sync() }
        #expect(Set((await server.objects("Product")).keys) == ["p1", "n1", "n2"])
        let fates = try client.store.changeFates(model: "Product")
        #expect(fates == ["n3": .inFlight(.create, awaitingLink: false), "n4": .inFlight(.create, awaitingLink: false), "n5": .pending(.create)])
        #expect(try client.store.verify().problems == [])

        let report = try await client.engine.sync()
        #expect(report.accepted == 3)
        #expect((await server.object("Product", "n5"))?["price"] == 50, "the edit went with the create")
        #expect(faults.count(.push) == 4, "n1 n2, then n3 n4 failed; then n3 n4 and n5")
        try await Self.expectConverged(client, server)
    }

    @Test("stop() mid-sync ends at a page boundary; the next sync finishes")
    func stopMidSync() async throws {
        let (server, _, client) = try await Self.setUp()
        let engine = client.engine
        await engine.setEventHandler { event in
            if case .sync(let n) = event, n.status == .inProgress, n.processedCount == 10 { engine.stop() }
        }
        await Self.expectFailure(.cancelled) { try await engine.sync() }
        #expect(await !engine.isSyncing)
        #expect(try client.model("Product").count() == 10)
        #expect(try client.store.verify().problems == [])
        await engine.setEventHandler(nil)
        #expect(try await engine.sync().pulled == 10)
        try await Self.expectConverged(client, server)

        // Stopped while local changes were pushed and the server's changes were coming.
        try Self.changeOffline(client)
        for i in 3...20 { await server.update("Product", "p\(i)", ["stock": .int(Int64(i))]) }
        await engine.setEventHandler { event in
            if case .sync(let n) = event, n.status == .inProgress, n.processedCount == 5 { engine.stop() }
        }
        await Self.expectFailure(.cancelled) { try await engine.sync() }
        #expect(try client.model("Product").findAll().filter { $0["stock"] != nil }.count == 5, "one whole page")
        #expect(try client.store.verify().problems == [])
        await engine.setEventHandler(nil)
        try await engine.sync()
        await Self.expectChangesLanded(server)
        try await Self.expectConverged(client, server)
    }

    @Test("killed between pages: the reopened store resumes where it stopped")
    func killedBetweenPages() async throws {
        let (server, faults, client) = try await Self.setUp()
        try await client.engine.sync()
        try Self.changeOffline(client)
        for i in 3...20 { await server.update("Product", "p\(i)", ["stock": .int(Int64(i))]) }
        faults.inject(.fail(SyncError(.network, "the app was killed")), on: .pull, after: 2)
        await Self.expectFailure(.network) { try await client.engine.sync() }
        let reopened = try await client.reopened(backend: faults, models: Self.models)
        #expect(await reopened.engine.isLoggedIn, "the session persists in the store")
        #expect(try reopened.store.verify().problems == [])
        #expect(try reopened.model("Product").findAll().filter { $0["stock"] != nil }.count == 10, "two whole pages")
        let report = try await reopened.engine.sync()
        #expect(report.pulled < 18, "resumed from the stored cursor, not from the start")
        await Self.expectChangesLanded(server)
        try await Self.expectConverged(reopened, server)
    }

    @Test("an app that does not allow resets gets the unknown-client error, and loses nothing")
    func unknownClientWithoutReset() async throws {
        let server = InMemoryBackend()
        await server.put("Product", ["name": "Lamp"], id: "p1")
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        defer { try? store.close() }
        _ = try store.model("Product")
        var configuration = SyncEngine.Configuration()
        configuration.resetOnUnknownClient = false
        let engine = SyncEngine(store: store, backend: server, configuration: configuration)
        try await engine.logIn(Self.credentials)
        try await engine.sync()
        try store.model("Product").update("p1", with: ["price": 3])
        await server.forgetClients()
        await Self.expectFailure(.unknownClient) { try await engine.sync() }
        #expect(try store.model("Product").pendingChanges().map(\.objectID) == ["p1"])
        #expect(try store.model("Product").find("p1")?["price"] == 3)
    }

    @Test("the server forgets the client: reset, full sync, local changes kept")
    func unknownClient() async throws {
        let (server, _, client) = try await Self.setUp(8)
        try await client.engine.sync()
        try Self.changeOffline(client)
        await server.delete("Product", "p3")
        await server.forgetClients()
        let report = try await client.engine.sync()
        #expect(report.clientWasReset)
        #expect(client.log.notifications(.error).contains { $0.errorCode == .unknownClient })
        await Self.expectChangesLanded(server)
        try await Self.expectConverged(client, server)
    }
}
