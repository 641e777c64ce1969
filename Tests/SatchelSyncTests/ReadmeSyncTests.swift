import Satchel
import SatchelSync
import SatchelTestSupport
import Testing

/// The README's sync tour, line for line, with what its comments say checked.
@Suite("README sync tour")
struct ReadmeSyncTests {
    @Test("the sync tour runs and does what the comments say")
    func tour() async throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("MyApp.satchel"))
        defer { try? store.close() }
        let products = try store.model("Product")
        let widget = try products.create(["name": "Widget", "brand": "Acme", "price": 9.5, "favourite": true])

        let server = InMemoryBackend()
        let engine = SyncEngine(store: store, backend: server)
        try await engine.logIn(Credentials(user: "ann", password: "secret"))
        await engine.configure("Product", ModelSyncConfiguration(deviceOnlyAttributes: ["favourite"]))
        let progress = Task { for await event in engine.events { print(event) } }

        let report = try await engine.sync()
        for error in try store.recordErrors() {
            try store.resolve(error.model, error.objectID, error.actions[0])
        }
        #expect(report.accepted == 1)
        let id = try #require(await server.objects("Product").keys.first)
        #expect(await server.object("Product", id) == ["name": "Widget", "brand": "Acme", "price": 9.5], "favourite stays here")

        let draft = try products.beginEditing(id)
        draft.document["price"] = 15
        try draft.finishEditing(save: true)
        #expect(try products.pendingChanges().map(\.kind) == [.update])
        try await engine.sync(models: ["Product"], mode: .full)
        #expect(await server.object("Product", id)?["price"] == 15)
        #expect(id != widget.id, "the server gave the widget its own id")

        try await engine.clientReset()
        #expect(try products.count() == 0)
        #expect(await engine.isLoggedIn)
        try await engine.fullResetAndLogout()
        #expect(await !engine.isLoggedIn)
        progress.cancel()
    }
}
