import ArgumentParser
import Foundation
import Satchel
import SatchelSync
import Synchronization

/// `satchel demo`: the main job on the embedded default, end to end, through the Swift API.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Create a store, import the Fixtures/ data, index, query and change it, and sync it with an in-memory server.",
        discussion: """
            Without --db the demo works in a new temporary directory and prints its path, so the store can be \
            explored afterwards with the other commands. Fixtures are found with --fixtures, $SATCHEL_FIXTURES, \
            ./Fixtures, or next to the executable's checkout.
            """
    )

    /// `--db`: a new (or empty) directory for the demo store; a temporary one when absent.
    @OptionGroup var store: StoreOptions
    @Option(help: ArgumentHelp("The folder holding products.json, customers.json and orders.jsonl.", valueName: "dir"))
    var fixtures: String?

    func run() async throws {
        let fixtures = try locateFixtures()
        // An empty directory given stays (emptied again); one made here goes.
        let given = store.db.map { FileManager.default.fileExists(atPath: $0) } ?? false
        let path = try prepareDirectory()
        do {
            try await run(in: path, fixtures: fixtures)
        } catch {
            // A demo that fails leaves no store behind, as any command that would have made one
            // (a black-box probe: it failed half way and left its store).
            let made = given ? (try? FileManager.default.contentsOfDirectory(atPath: path))?.map { path + "/" + $0 } ?? [] : [path]
            for item in made { try? FileManager.default.removeItem(atPath: item) }
            throw error
        }
    }

    private func run(in path: String, fixtures: URL) async throws {
        // With --key-file (or $SATCHEL_KEY_FILE) the demo's store is created encrypted, as any.
        let configuration = try self.store.configuration(creating: true)
        let store = try Store(path: path, configuration: configuration)
        defer { try? store.close() }
        say("Satchel demo: store at \(path)\(configuration.encryptionKey == nil ? "" : ", encrypted")")

        // 1. Models: three synced property bags in the user partition, and a local model (kept
        // on this device, never synced) for the app's settings.
        let products = try store.model("Product")
        let customers = try store.model("Customer")
        // An order's `customer` holds a customer's id: sync renames follow it.
        let orders = try store.register(ModelDefinition(name: "Order", associations: ["customer": "Customer"]))
        let settings = try store.register(ModelDefinition(name: "Setting", partition: .local))

        // 2. Import the fixtures: validated whole, then written in batches.
        for (model, file) in [(products, "products.json"), (customers, "customers.json"), (orders, "orders.jsonl")] {
            let count = try store.importObjects(from: fixtures.appendingPathComponent(file), into: model, batchSize: 250)
            say("imported \(count) \(model.name) objects from \(file)")
        }
        try settings.save(Object(id: "theme", attributes: ["value": "dark"]))

        // 3. Indexes, built over the imported objects and kept current by every write.
        section("indexes")
        for (model, index) in [
            (products, IndexDefinition("brand", "price")), (products, .elements(of: "tags")), (orders, IndexDefinition("customer")),
            (orders, IndexDefinition("status", "total")), (customers, IndexDefinition("address.city")),
        ] {
            try model.createIndex(index)
            say("\(model.name): index \(index) (\(try model.indexes.first { $0.definition == index }?.entries ?? 0) entries)")
        }

        // 4. Queries, each with the plan explain reports.
        section("queries")
        let first = try require(try products.find("prod-0001"), "prod-0001")
        say("find(\"prod-0001\") → \(first)")
        let brand = try require(first["brand"], "a brand")
        let query = Query(where: "brand" == brand && "price" < 500).order(by: "price", descending: true).limit(3).select("name", "price")
        say("\(query.condition), by price desc, limit 3 → \(try products.findAll(query).map(\.description).joined(separator: " "))")
        say("  plan: \(try products.explain(query))")
        let onSale = Query(where: Field("tags").contains("sale"))
        say("tags contains \"sale\" → \(try products.count(where: onSale.condition)) products; plan: \(try products.explain(onSale))")
        let order = try require(try orders.findFirst(where: "status" == "pending", order: [.descending("total")]), "a pending order")
        say("the largest pending order → \(order.id) for \(order["customer"]?.stringValue ?? "?"), total \(order["total"] ?? .null)")
        let customer = try require(try customers.find(order["customer"]?.stringValue ?? ""), "the order's customer")
        say(
            "its customer: \(customer["name"]?.stringValue ?? "?") of \(customer["address"]?["city"]?.stringValue ?? "?"), \(try orders.count(where: ["customer": .string(customer.id)])) orders"
        )
        let city = Query(where: Field("address.city").beginsWith("Lis"))
        say("customers in a city beginning with \"Lis\" → \(try customers.count(where: city.condition)); plan: \(try customers.explain(city))")
        let scan = Query(where: Field("email").contains("example"), limit: 5)
        say("a condition no index serves is a scan → plan: \(try customers.explain(scan))")
        say("count(where: status = delivered) → \(try orders.count(where: ["status": "delivered"])) of \(try orders.count()) orders")

        // 5. Changes: a merge, the null rule, and a transaction that lands whole or not at all.
        section("changes")
        let updated = try products.update(first.id, with: ["price": 19.99, "tags": .null])
        say("update(prod-0001, price = 19.99, tags = null) → \(updated.map(\.description) ?? "deleted")")
        let placed = try await store.bulkUpdate { tx -> Object in
            let order = try tx.create(
                ["customer": .string(customer.id), "status": "pending", "items": [["product": .string(first.id), "qty": 2]], "total": 39.98],
                in: orders)
            let stock = (try tx.find(first.id, in: products)?["quantity"]?.intValue ?? 2) - 2
            try tx.update(first.id, with: ["quantity": .int(stock)], in: products)
            return order
        }
        say("bulkUpdate: placed order \(placed.id) and took 2 from stock → quantity \(try products.find(first.id)?["quantity"] ?? .null)")
        let before = try orders.count()
        do {
            try await store.bulkUpdate { tx in
                try tx.create(["customer": .string(customer.id), "status": "pending", "total": 1], in: orders)
                try tx.create(["object": .string(placed.id), "status": "duplicate"], in: orders)  // fails: the id exists
            }
        } catch let error as SatchelError {
            say("a failing bulkUpdate wrote nothing: \(error.code) (orders: \(before) → \(try orders.count()))")
        }
        let scratch = try products.create(["name": "Scratch"])
        try products.update(scratch.id, with: ["name": .null])
        say("an object whose last attribute is nulled is deleted: find → \(try products.find(scratch.id).map(\.description) ?? "nil")")

        // 6. The change log: what the next sync will push.
        section("pending changes")
        for model in [products, customers, orders] {
            let statistics = try model.statistics()
            say(
                "\(model.name): \(statistics.objects) objects, pending create \(statistics.pendingCreates), update \(statistics.pendingUpdates), delete \(statistics.pendingDeletes)"
            )
        }
        say("\(settings.name): \(try settings.count()) object, nothing pending: a local model (the app's own settings) never syncs")

        // 7. Sync with a server (in memory here; RhoConnect, Kinto… behind the same protocol).
        try await sync(store, products: products, orders: orders, customers: customers, placed: placed)

        // 8. A full consistency check: objects, statistics, and every index entry both ways.
        let report = try store.verify()
        section("check")
        say(
            "\(report.keys) keys, \(report.objects) objects, \(report.pendingChanges) pending changes: \(report.isHealthy ? "ok" : "\(report.problemCount) problems")"
        )
        say("\nexplore it: \(Self.invocation) --db \(path) find Product --where brand=\(brand.stringValue ?? "") --limit 3")
        if !report.isHealthy { throw ExitCode.failure }
    }

    /// Pushes everything to a new in-memory server that gives objects its own ids, brings
    /// another client's changes back, and settles a conflict.
    private func sync(_ store: Store, products: Model, orders: Model, customers: Model, placed: Object) async throws {
        section("sync (an in-memory server)")
        let server = InMemoryBackend()
        let engine = SyncEngine(store: store, backend: server)
        let counts = Locked<[SyncNotification.Status: Int]>([:])
        await engine.setEventHandler { event in
            if case .sync(let notification) = event { counts.withLock { $0[notification.status, default: 0] += 1 } }
        }
        try await engine.logIn(Credentials(user: "demo", password: "demo"))
        let first = try await engine.sync()
        let seen = counts.withLock { $0 }
        say(
            "first sync of \(first.models.joined(separator: ", ")) (customers before the orders that refer to them): "
                + "pushed \(first.accepted) changes, pulled \(first.pulled) objects")
        say(
            "  its notifications: \(seen[.inProgress] ?? 0) inProgress (a push done or a page applied), "
                + "\(seen[.ok] ?? 0) ok (a model done), \(seen[.complete] ?? 0) complete (the whole sync)")
        let order = try require(try orders.findFirst(where: ["total": 39.98]), "the placed order")
        let owner = try require(try customers.find(order["customer"]?.stringValue ?? ""), "its customer")
        say(
            "the server gave objects its own ids: order \(placed.id) is now \(order.id), "
                + "and its customer reference follows: \(owner.id) (\(owner["name"]?.stringValue ?? "?"))")
        let product = try require(try products.findFirst(where: "price" > 100, order: [.ascending("price")]), "a product over 100")

        // Another client changes the server; the next sync brings it here.
        await server.update("Product", product.id, ["price": 123.45, "tags": .null])
        await server.delete("Order", order.id)
        let second = try await engine.sync()
        say(
            "another client repriced \(product.id) and deleted order \(order.id): the next sync pulled \(second.pulled) → "
                + "price \(try products.find(product.id)?["price"] ?? .null), order \(try orders.find(order.id) == nil ? "gone" : "still here")")

        // A conflict: both sides change the same product. The server refuses the stale update.
        await server.update("Product", product.id, ["price": 150])
        try products.update(product.id, with: ["price": 99])
        let third = try await engine.sync()
        let error = try require(try store.refusedChanges(model: "Product").first, "a refused change")
        say(
            "both sides changed \(product.id): \(third.refused) change refused (\(error.message)); "
                + "kept here as \(error.kind.rawValue) error, local price \(try products.find(product.id)?["price"] ?? .null), server's \(error.serverCopy?["price"] ?? .null)"
        )
        try store.resolve("Product", product.id, .rollback)
        try await engine.sync()
        say(
            "resolve(\(product.id), .rollback) and sync → price \(try products.find(product.id)?["price"] ?? .null); "
                + "pending changes \(try store.pendingChanges().count), errors \(try store.refusedChanges().count)")

        // Different attributes on both sides: no conflict. The stale update is merged attribute by
        // attribute and sent again in the same sync.
        await server.update("Product", product.id, ["name": "Desk lamp, brass"])
        try products.update(product.id, with: ["price": 95])
        let fourth = try await engine.sync()
        let merged = try products.find(product.id)
        let remote = await server.object("Product", product.id)
        say(
            "the server renamed \(product.id) while this device repriced it: \(fourth.merged) merged, \(fourth.refused) refused → "
                + "here \(merged?["name"] ?? .null) at \(merged?["price"] ?? .null), on the server \(remote?["name"] ?? .null) at \(remote?["price"] ?? .null)"
        )
    }

    /// How to run this program again, as typed: its path when it was started by one (`swift run`
    /// starts `.build/debug/satchel`), else its name, found on `PATH`.
    static var invocation: String {
        let program = CommandLine.arguments[0]
        guard program.contains("/") else { return program }
        return URL(fileURLWithPath: program).standardizedFileURL.path
    }

    private func say(_ text: String) { Output.line(text) }
    private func section(_ title: String) { Output.line("\n== \(title)") }

    private func require<T>(_ value: T?, _ what: String) throws -> T {
        guard let value else { throw SatchelError(.notFound, "the fixtures have no \(what)") }
        return value
    }

    private func prepareDirectory() throws -> String {
        let fileManager = FileManager.default
        guard let db = store.db else {
            let path = fileManager.temporaryDirectory.appendingPathComponent("satchel-demo-\(ObjectID.generate().lowercased())").path
            try fileManager.createDirectory(atPath: path, withIntermediateDirectories: true)
            return path
        }
        if let contents = try? fileManager.contentsOfDirectory(atPath: db), !contents.isEmpty {
            throw SatchelError(.invalidArgument, "the demo needs a new or empty directory; \(db) is not empty")
        }
        return db
    }

    private func locateFixtures() throws -> URL {
        var candidates: [URL] = []
        if let fixtures { candidates.append(URL(fileURLWithPath: fixtures)) }
        if let env = ProcessInfo.processInfo.environment["SATCHEL_FIXTURES"] { candidates.append(URL(fileURLWithPath: env)) }
        candidates.append(URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent("Fixtures"))
        // From .build/<config>/satchel up to the checkout.
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        for _ in 0..<5 {
            candidates.append(directory.appendingPathComponent("Fixtures"))
            directory = directory.deletingLastPathComponent()
        }
        // All three files, before a store is made: one missing is known before anything is
        // written (a black-box probe: the demo failed half way and left its store).
        let files = ["products.json", "customers.json", "orders.jsonl"]
        for candidate in candidates where FileManager.default.fileExists(atPath: candidate.appendingPathComponent(files[0]).path) {
            let missing = files.filter { !FileManager.default.fileExists(atPath: candidate.appendingPathComponent($0).path) }
            guard missing.isEmpty else {
                throw SatchelError(.notFound, "the fixtures folder \(candidate.path) has no \(missing.joined(separator: " or ")); nothing was made")
            }
            return candidate
        }
        throw SatchelError(.notFound, "cannot find the Fixtures folder; pass --fixtures DIR")
    }
}
