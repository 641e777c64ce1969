import Foundation
import Satchel
import SatchelSync
import SatchelSyncTesting
import SatchelTestSupport
import Testing

/// What an app's live views see of a sync: a create acknowledged under the server's id is the
/// same object renamed, and a pulled page is one commit.
@Suite("Live queries through sync")
struct LiveSyncTests {
    /// The next value of `iterator`, or a failure when none comes within a minute.
    static func next<I: AsyncIteratorProtocol & Sendable>(_ iterator: I) async throws -> I.Element? where I.Element: Sendable {
        try await withThrowingTaskGroup(of: I.Element?.self) { group in
            group.addTask {
                var iterator = iterator
                return try await iterator.next()
            }
            group.addTask {
                try await Task.sleep(for: .seconds(60))
                throw CancellationError()
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
    }

    @Test(
        "a create the server takes under its own id is renamed, not deleted: observe(id) follows it, change sets and notifications say old → new, a list keeps its row",
        arguments: [false, true])
    func renameFollowed(linksViaPull: Bool) async throws {
        var configuration = InMemoryBackend.Configuration()
        configuration.linksViaPull = linksViaPull  // RhoConnect's links, or a push result's id (Parse, Salesforce)
        let server = InMemoryBackend(configuration: configuration)
        _ = await server.put("Product", ["name": "Lamp", "price": 5], id: "p1")
        let client = try SyncClient(backend: server, models: [ModelDefinition(name: "Product")], pageSize: 5)
        await client.record()
        try await client.engine.logIn(Credentials(user: "ann", password: "secret"))
        let products = try client.model("Product")
        try await client.engine.sync()
        try products.create(["object": "local-1", "name": "Desk", "price": 1])

        var one = products.observe("local-1").makeAsyncIterator()
        #expect(try await one.next()??["name"] == "Desk")
        let list = products.observeChanges(Query().order(by: "price")).makeAsyncIterator()
        #expect(try await Self.next(list)?.objects.map(\.id) == ["local-1", "p1"])
        var changes = client.store.changes.makeAsyncIterator()

        try await client.engine.sync()
        let serverID = try #require(try products.findAll().map(\.id).first { $0 != "p1" })
        #expect(serverID != "local-1", "the server gave its own id")

        let followed = try #require(try await one.next())
        #expect(followed?.id == serverID && followed?["name"] == "Desk", "the object under its new id, never nil")
        let update = try #require(try await Self.next(list))
        #expect(update.objects.map(\.id) == [serverID, "p1"])
        #expect(update.change == ResultsChange(modifications: [0], renames: [.init(position: 0, from: "local-1", to: serverID)]))
        let set = try #require(await changes.next())
        #expect(set.renamed == ["local-1": serverID] && set.created.isEmpty && set.deleted.isEmpty)
        let notified = client.log.objects("Product")
        #expect(notified.renamed == ["local-1": serverID] && !notified.created.contains(serverID))

        // Later writes reach the observation under the new id.
        try products.update(serverID, with: ["price": 9])
        #expect(try await one.next()??["price"] == 9)
    }

    @Test("a pulled page of 10,000 objects is one commit: one change set, and each live query's next results are the page's")
    func pageWakesOnce() async throws {
        let server = InMemoryBackend()
        for i in 0..<10_000 {
            _ = await server.put("Product", ["price": .int(Int64(i % 100)), "brand": i % 2 == 0 ? "Acme" : "Zenith"], id: "p\(i)")
        }
        let client = try SyncClient(backend: server, models: [ModelDefinition(name: "Product")], pageSize: 10_000)
        try await client.engine.logIn(Credentials(user: "ann", password: "secret"))
        let products = try client.model("Product")
        let queries = [Query(where: "brand" == "Acme").order(by: "price").limit(20), Query(where: "price" < 3), Query()]
        let lives = queries.map { products.observeChanges($0).makeAsyncIterator() }
        for live in lives { #expect(try await Self.next(live)?.objects == []) }
        var changes = client.store.changes.makeAsyncIterator()

        try await client.engine.sync()
        let set = try #require(await changes.next())
        #expect(set.created.count == 10_000 && set.origin == .server, "the page landed as one commit")
        for (query, live) in zip(queries, lives) {
            var ordered = query
            if ordered.order.isEmpty { ordered.order = [SortKey(.id)] }
            let results = try #require(try await Self.next(live))
            #expect(results.objects == (try products.findAll(ordered)))
            #expect(results.change?.insertions.count == results.objects.count)
        }
        // Nothing else was committed to the model by the sync: a write now is the next change set.
        try products.update("p0", with: ["price": 1])
        #expect(try #require(await changes.next()).updated == ["p0"])
    }
}
