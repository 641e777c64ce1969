import Foundation
import Satchel
import SatchelSync
import SatchelSyncTesting
import Testing

/// Conflicts through the engine, beyond the conformance kit's scenarios: what a resolved
/// conflict leaves for the next one.
@Suite("Conflicts")
struct ConflictTests {
    @Test("a conflict retried by the app merges with a later server change to another attribute, instead of being refused again")
    func retriedThenMerged() async throws {
        let server = InMemoryBackend()
        _ = await server.put("Product", ["name": "Lamp", "price": 1], id: "p1")
        let client = try SyncClient(backend: server, models: [ModelDefinition(name: "Product")], pageSize: 5)
        try await client.engine.logIn(Credentials(user: "ann", password: "secret"))
        let products = try client.model("Product")
        try await client.engine.sync()

        // A true conflict, kept (no resolver), and retried: the app's price over the server's.
        await server.update("Product", "p1", ["price": 5])
        try products.update("p1", with: ["price": 50])
        #expect(try await client.engine.sync().refused == 1)
        try client.store.resolve("Product", "p1", .retry)
        #expect(try products.pendingChanges().first?.baseValues == ["price": 5], "the base is the server's copy retried over")

        // Before the retry reaches it, the server changes the name: not a conflict with the price.
        await server.update("Product", "p1", ["name": "Desk lamp"])
        let report = try await client.engine.sync()
        #expect(report.refused == 0 && report.merged == 1)
        #expect(await server.object("Product", "p1") == ["name": "Desk lamp", "price": 50])
        #expect(try products.find("p1")?.attributes == ["name": "Desk lamp", "price": 50])
        #expect(try client.store.refusedChanges(model: "Product").isEmpty)
    }
}
