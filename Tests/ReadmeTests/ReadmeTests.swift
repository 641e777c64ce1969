import Foundation
import Satchel
import SatchelSync
import SatchelTestSupport
import Synchronization
import Testing

/// Where the README's tours run (the placeholders a reader fills in), and what they print. The
/// tours themselves are the README's own lines, extracted at build time by the ReadmeTour
/// plugin into `storeTour` and `syncTour`.
final class ReadmeTour: Sendable {
    let directory = TemporaryDirectory("satchel-readme")
    /// `"/path/to/MyApp.satchel"` in the README.
    var storePath: String { directory.child("MyApp.satchel") }
    /// `"/path/to/MyApp-backup.satchel"` in the README.
    var backupPath: String { directory.child("MyApp-backup.satchel") }
    /// `"/path/to/Secret.satchel"` in the README.
    var secretPath: String { directory.child("Secret.satchel") }
    /// `URL(fileURLWithPath: "products.json")` in the README.
    let productsFile = Fixtures.url("products.json")
    /// `InMemoryBackend()` in the README.
    let server = InMemoryBackend()
    private let lines = Mutex<[String]>([])

    func record(_ line: String) { lines.withLock { $0.append(line) } }

    /// What the tour printed, line by line.
    var printed: [String] { lines.withLock { $0 } }

    /// Opens the store the tour left behind.
    func reopen() throws -> Store { try Store(path: storePath) }
}

@Suite("README tours, as written")
struct ReadmeTests {
    @Test("the Swift tour runs and does what its comments say")
    func storeTour() async throws {
        let tour = ReadmeTour()
        try await ReadmeTour.storeTour(tour)
        #expect(tour.printed.contains(#"index brand,price: brand == "Acme", read in index order; stop after 20"#), "the plan the comment shows")
        #expect(tour.printed.contains { $0.hasPrefix("create ") }, "the pending create is listed: \(tour.printed)")
        #expect(tour.printed.contains("in stock: 1, orders: 1"), "the snapshot's two reads: \(tour.printed)")

        let store = try tour.reopen()
        defer { try? store.close() }
        let products = try store.model("Product")
        let widget = try #require(try products.findFirst(where: ["name": "Widget"]))
        #expect(widget.attributes == ["name": "Widget", "price": 12, "quantity": 4], "`.null` removed brand; the transaction set quantity")
        #expect(try products.find("p-9")?.attributes == ["name": "Gadget", "price": 25], "put created p-9; the Codable Gadget saved its price")
        #expect(try products.count() == 302, "the widget, p-9, and the 300 fixtures the import added")
        #expect(try store.model("Order").count() == 1)
        #expect(try products.pendingChanges().count == 302, "every create waits for the next sync")
        #expect(store.models.first { $0.name == "Setting" }?.partition == .local)
        #expect(try products.indexes.map(\.definition) == [IndexDefinition("brand", "price"), .elements(of: "tags")])
        let orders = try store.model("Order")
        #expect(try orders.findAll().map { $0.attributes["status"] } == ["open"], "the migration added status")
        #expect(try orders.appliedMigrations == ["1: orders have a status"])
        #expect(try orders.pendingChanges().map(\.kind) == [.create], "the migration logged no change of its own")

        let backup = try Store(path: tour.backupPath)
        defer { try? backup.close() }
        #expect(try backup.model("Product").count() == 302, "the backup holds the store as of its moment")
        #expect(try backup.verify().isHealthy)

        var sealed = Store.Configuration()
        sealed.createIfMissing = false
        #expect(throws: SatchelError.self, "the encrypted store opens only with its key") {
            _ = try Store(path: tour.secretPath, configuration: sealed)
        }
        sealed.encryptionKey = try EncryptionKey(hex: String(repeating: "c0ffee42", count: 8))
        try Store(path: tour.secretPath, configuration: sealed).close()
    }

    @Test("the sync tour runs after the Swift tour, as a reader runs them, and does what its comments say")
    func syncTour() async throws {
        let tour = ReadmeTour()
        try await ReadmeTour.syncTour(tour)
        // (The events the tour prints from its `progress` task are not checked: the tour cancels
        // that task when it ends, whatever it has printed by then.)

        // The widget, pushed under the server's own id, repriced through the edit session;
        // `favourite` never left the device.
        let widgets = await tour.server.objects("Product").filter { $0.value["name"] == "Widget" }
        #expect(widgets.count == 1)
        #expect(widgets.first?.value == ["name": "Widget", "price": 15, "quantity": 4])
        #expect(await tour.server.objects("Product").count == 302)

        let store = try tour.reopen()
        defer { try? store.close() }
        #expect(try store.model("Product").count() == 0, "the full reset wiped the user partition")
        #expect(try store.storedSession() == nil, "and the session")
    }
}
