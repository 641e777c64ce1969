import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import RhoConnectTestServer
import Satchel
import SatchelRhoConnect
import SatchelSync
import SatchelSyncTesting
import Testing

/// The RhoConnect adapter against the loopback server and the `products` fixture: the protocol
/// features one by one, as they appear on the wire.
// One test at a time: each starts a loopback server, whose socket pool holds a Dispatch thread
// in epoll_wait while it runs. Every such test at once, beside the other suites, reached
// Dispatch's limit of threads in full runs: URLSession's queues got none, and clients timed out.
@Suite("RhoConnect adapter", .serialized)
struct RhoConnectAdapterTests {
    static let product = ModelDefinition(name: "Product")
    static let catalog = ModelDefinition(name: "Catalog", partition: .app)
    static let photo = ModelDefinition(name: "Photo", blobAttributes: ["image"])

    /// A started server with the fixture, and a device logged in as ann, through a fault
    /// injector.
    struct Setup {
        let server: RhoConnectServer
        var device: SyncClient
        let faults: FaultyBackend

        init(
            models: [ModelDefinition] = [RhoConnectAdapterTests.product], pageSize: Int = 5,
            routes: RhoConnectBackend.Configuration.Routes = .protocol4
        )
            async throws
        {
            server = try await RhoConnectServer.start(try Fixture.named("products"))
            faults = FaultyBackend(RhoConnectBackend.forTests(server, routes: routes))
            device = try SyncClient(backend: faults, models: models, pageSize: pageSize)
            await device.record()
            try await device.engine.logIn(Credentials(user: "ann", password: "secret"))
        }

        var products: Model { get throws { try device.model("Product") } }

        /// The queries of `source` the server received: their `token` parameter (nil: none).
        func queryTokens(_ source: String = "Product") async -> [String?] {
            await server.requests.filter { $0.method == "GET" && $0.path == "/app/v1/\(source)" }.map { $0.query["token"] }
        }

        /// The JSON body of the last push of `source`.
        func lastPush(_ source: String = "Product") async throws -> [String: Any] {
            let push = try #require(await server.requests.last { $0.method == "POST" && $0.path == "/app/v1/\(source)" })
            return try #require(try JSONSerialization.jsonObject(with: push.body) as? [String: Any])
        }

        /// Asserts the store holds the server's objects (values compared as strings), with no
        /// pending change, and is healthy.
        func expectMatchesServer(_ source: String = "Product", sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let remote = await server.objects(source, user: "ann").mapValues { JSONObject($0.map { ($0.key, JSONValue.string($0.value)) }) }
            // RhoConnect keeps strings: a number written here is "5" there.
            let local = try device.objects(source).mapValues {
                JSONObject($0.map { ($0.key, JSONValue.string(RhoConnectConformanceServer.wire($0.value))) })
            }
            #expect(
                local == remote,
                "only here: \(local.filter { remote[$0.key] != $0.value }); only there: \(remote.filter { local[$0.key] != $0.value })",
                sourceLocation: sourceLocation)
            #expect(try device.store.pendingChanges().isEmpty, sourceLocation: sourceLocation)
            #expect(try device.store.verify().problems == [], sourceLocation: sourceLocation)
        }

        func stop() async { await server.stop() }
    }

    // MARK: - Pulling

    @Test("a first sync pulls more objects than p_size in pages, acknowledging each page's token")
    func multiPageInitialSync() async throws {
        let setup = try await Setup()
        let report = try await setup.device.engine.sync()
        #expect(report.pulled == 12)
        let tokens = await setup.queryTokens()
        #expect(tokens.count == 4, "3 pages of at most 5 objects, then the acknowledging request: \(tokens)")
        #expect(tokens.first == "0", "the first query carries the token of no page (a query without one drops a pending page)")
        #expect(Set(tokens.dropFirst().compactMap { $0 }).count == 3, "each page acknowledged by its own token")
        let queries = await setup.server.requests.filter { $0.path == "/app/v1/Product" }
        #expect(queries.allSatisfy { $0.query["p_size"] == "5" && $0.query["version"] == "3" && $0.cookie?.contains("rhoconnect_session=") == true })
        #expect(queries.allSatisfy { $0.clientID?.count == 32 }, "the client id header on every query")
        // A property bag keeps RhoConnect's strings.
        #expect(try setup.products.find("1")?.attributes == ["name": "iPhone", "brand": "Apple", "price": "199.99"])
        #expect(try await setup.device.engine.serverMetadata("Product") == ["title": "Products", "version": 1])
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test(
        "a property bag's values written here keep their types when the server sends them back as text (the echo of an update, a full pull); the server holds strings (found by a black-box probe: the echo made them strings)"
    )
    func echoKeepsTypes() async throws {
        let setup = try await Setup()
        try await setup.device.engine.sync()
        let written: JSONObject = ["price": 6, "ok": true, "tags": ["c"], "size": ["w": 2]]
        try setup.products.update("4", with: written)
        try setup.products.create(["object": "new", "name": "New", "price": 7.5])
        try await setup.device.engine.sync()
        let server = await setup.server.objects("Product", user: "ann")
        #expect(
            server["4"]?["price"] == "6" && server["4"]?["ok"] == "true" && server["4"]?["tags"] == #"["c"]"#, "\(String(describing: server["4"]))")
        for (name, value) in written { #expect(try setup.products.find("4")?[name] == value, "\(name)") }
        let created = try #require(try setup.products.findFirst(where: "name" == "New"))
        try await setup.device.engine.sync(mode: .full)
        for (name, value) in written { #expect(try setup.products.find("4")?[name] == value, "\(name), after a full pull") }
        #expect(try setup.products.find(created.id)?["price"] == 7.5, "after a full pull")
        #expect(try setup.products.count(where: "price" == 6) == 1)
        // A value changed on the server is the server's string.
        await setup.server.update("Product", user: "ann", id: "4", ["price": "9"])
        try await setup.device.engine.sync()
        #expect(try setup.products.find("4")?["price"] == "9")
        await setup.stop()
    }

    @Test("a fixed-schema model reads the strings as its declared types")
    func typedValues() async throws {
        let typed = ModelDefinition(name: "Product", kind: .fixedSchema(["name": .string, "brand": .string, "price": .number]))
        let setup = try await Setup(models: [typed])
        try await setup.device.engine.sync()
        #expect(try setup.products.find("1")?["price"] == 199.99)
        #expect(try setup.products.find("4")?["price"] == 5)
        try setup.products.update("4", with: ["price": 8])
        try await setup.device.engine.sync()
        #expect(await setup.server.objects("Product", user: "ann")["4"]?["price"] == "8", "pushed as a string")
        // The server's nil is an empty string: the attribute gone, not a page refused for good
        // (found by a black-box probe); a value not of the type names its object.
        await setup.server.update("Product", user: "ann", id: "4", ["price": ""])
        #expect(try await setup.device.engine.sync().pulled > 0)
        #expect(try setup.products.find("4").map { $0["price"] == nil && $0["name"] != nil } == true)
        await setup.server.update("Product", user: "ann", id: "4", ["price": "cheap"])
        let error = await #expect(throws: SyncError.self) { try await setup.device.engine.sync() }
        #expect(error?.message.contains("object '4'") == true, "\(String(describing: error))")
        await setup.stop()
    }

    @Test("a delta sync applies server edits, attribute removals and whole-object removals")
    func deltaSync() async throws {
        let setup = try await Setup()
        try await setup.device.engine.sync()
        setup.device.log.clear()
        try await setup.server.runScript("edits")
        try await setup.device.engine.sync()
        let products = try setup.products
        #expect(try products.find("1")?["price"] == "149.99")
        #expect(try products.find("2")?.attributes == ["name": "G2", "price": "99.99"], "the removed attribute is gone")
        #expect(try products.find("3") == nil, "the object whose attributes were all removed is gone")
        #expect(try products.find("13")?["name"] == "Nexus")
        let objects = setup.device.log.objects("Product")
        #expect(objects.deleted == ["3"])
        #expect(objects.created == ["13"])
        #expect(Set(objects.updated) == ["1", "2"])
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test("an app-partition source is shared by every user")
    func appPartition() async throws {
        let setup = try await Setup(models: [Self.product, Self.catalog])
        try await setup.device.engine.sync(models: ["Catalog"])
        #expect(try setup.device.objects("Catalog").count == 2)
        await setup.server.put("Catalog", user: "bob", id: "c3", ["title": "Autumn"])
        try await setup.device.engine.sync(models: ["Catalog"])
        #expect(try setup.device.objects("Catalog")["c3"] == ["title": "Autumn"])
        await setup.stop()
    }

    @Test("query parameters from the model's server filter")
    func serverFilter() async throws {
        let setup = try await Setup()
        try await setup.device.engine.configure("Product", ModelSyncConfiguration(serverFilter: ["brand": "Acme"]))
        try await setup.device.engine.sync()
        let query = try #require(await setup.server.requests.first { $0.path == "/app/v1/Product" }?.query)
        #expect(query["query[brand]"] == "Acme")
        await setup.stop()
    }

    // MARK: - Pushing

    @Test("local creates, updates and deletes are pushed in one CUD request and creates linked")
    func pushAndLink() async throws {
        let setup = try await Setup()
        try await setup.device.engine.sync()
        let products = try setup.products
        try products.create(["object": "tmp-1", "name": "Fairphone", "price": "450", "dual_sim": true])
        try products.update("1", with: ["price": "189.99", "brand": .null])
        try products.delete("2")
        setup.device.log.clear()
        let report = try await setup.device.engine.sync()
        #expect(report.accepted == 3)
        let body = try await setup.lastPush()
        #expect(body["source_name"] as? String == "Product")
        #expect(
            (body["create"] as? [String: [String: String]])?["tmp-1"] == ["name": "Fairphone", "price": "450", "dual_sim": "true"],
            "values as strings")
        let update = try #require((body["update"] as? [String: [String: Any]])?["1"])
        #expect(update["price"] as? String == "189.99" && update["brand"] is NSNull && update.count == 2, "only the changed attributes")
        #expect((body["delete"] as? [String: [String: String]])?["2"] == ["name": "G2", "brand": "Android", "price": "99.99"], "the last attributes")
        // The link renamed the object to the server's id.
        #expect(try products.find("tmp-1") == nil)
        let created = try #require(setup.device.log.objects("Product").renamed["tmp-1"])
        #expect(try products.find(created)?["name"] == "Fairphone")
        #expect(await setup.server.objects("Product", user: "ann")[created]?["name"] == "Fairphone")
        try await setup.device.engine.sync()
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test(
        "a push carried out whose answer was lost is not sent again: the pull's links confirm its creates, and the server holds each once (found by a black-box probe)"
    )
    func lostPushAnswerCreatesOnce() async throws {
        var setup = try await Setup()
        try await setup.device.engine.sync()
        for i in 1...3 { try setup.products.create(["object": "here-\(i)", "name": "Made here \(i)"]) }
        try setup.products.update("1", with: ["price": "149.99"])
        // The server carries the push out; its answer never arrives.
        setup.faults.inject(.dropAnswer, on: .push)
        try await setup.device.engine.sync()
        #expect(try setup.device.store.changeFates(model: "Product") == [:], "the links came in the same sync's pull")
        // The app is started again and syncs twice more: nothing goes again.
        setup.device = try await setup.device.reopened(backend: setup.faults, models: [Self.product])
        try await setup.device.engine.sync()
        try await setup.device.engine.sync()
        let made = await setup.server.objects("Product", user: "ann").filter { $0.value["name"]?.hasPrefix("Made here") == true }
        #expect(made.count == 3, "each create carried out once: \(made)")
        // The update, which a pull cannot confirm, went again after it; the creates did not.
        let pushes = try await setup.server.requests.filter { $0.method == "POST" && $0.path == "/app/v1/Product" }.map {
            try #require(try JSONSerialization.jsonObject(with: $0.body) as? [String: Any])
        }
        #expect(pushes.count == 2 && (pushes.first?["create"] as? [String: Any])?.count == 3)
        #expect(pushes.last?["create"] == nil && (pushes.last?["update"] as? [String: Any])?.keys.sorted() == ["1"])
        #expect(await setup.server.objects("Product", user: "ann")["1"]?["price"] == "149.99")
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test("a push that never reached the server is sent again once a complete pull brought no link for it, in the same sync or a later one")
    func unansweredPushNotCarriedOut() async throws {
        var setup = try await Setup()
        try await setup.device.engine.sync()
        for i in 1...2 { try setup.products.create(["object": "here-\(i)", "name": "Made here \(i)"]) }
        try setup.products.delete("2")
        // The connection drops before the server reads the push; the pull after it goes through.
        setup.faults.inject(.fail(SyncError(.network, "the connection was reset")), on: .push)
        try await setup.device.engine.sync()
        #expect(await setup.server.objects("Product", user: "ann")["2"] == nil, "sent again after the pull, in the same sync")
        try await setup.device.engine.sync()
        #expect(try setup.device.store.changeFates(model: "Product") == [:])

        // Again with the network down for the pull too: the changes wait, in flight, across a
        // restart, until a pull completes.
        for i in 3...4 { try setup.products.create(["object": "here-\(i)", "name": "Made here \(i)"]) }
        setup.faults.inject(.fail(SyncError(.network, "the connection was reset")), on: .push)
        setup.faults.inject(.fail(SyncError(.network, "the network is down")), on: .pull)
        await #expect(throws: SyncError.self) { try await setup.device.engine.sync() }
        #expect(
            try setup.device.store.changeFates(model: "Product") == [
                "here-3": .inFlight(.create, awaitingLink: false), "here-4": .inFlight(.create, awaitingLink: false),
            ])
        setup.device = try await setup.device.reopened(backend: setup.faults, models: [Self.product])
        try setup.products.update("here-3", with: ["price": "5"])
        try await setup.device.engine.sync()
        try await setup.device.engine.sync()
        let made = await setup.server.objects("Product", user: "ann").values.filter { $0["name"]?.hasPrefix("Made here") == true }
        #expect(made.count == 4, "each create carried out once: \(made)")
        #expect(made.contains { $0["name"] == "Made here 3" && $0["price"] == "5" }, "the edit made meanwhile went with it")
        #expect(setup.faults.unusedFaults == 0)
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    // MARK: - Errors

    @Test("create-error: delete, and recreate")
    func createErrors() async throws {
        let setup = try await Setup()
        try await setup.device.engine.sync()
        let products = try setup.products
        try products.create(["object": "bad-1", "name": "wrongname"])
        try products.create(["object": "bad-2", "name": "wrongname"])
        #expect(try await setup.device.engine.sync().refused == 2)
        let errors = try setup.device.store.refusedChanges(model: "Product")
        #expect(errors.map(\.message) == ["error create", "error create"], "the server's message")
        #expect(errors.allSatisfy { $0.kind == .create && $0.attributes == ["name": "wrongname"] })
        let notification = try #require(setup.device.log.notifications(.error, model: "Product").last)
        #expect(notification.errorCode == .refusedChanges && SyncError(notification.errorCode!, "").rhoConnectCode == 8)

        try setup.device.store.resolve("Product", "bad-1", .delete)
        try products.update("bad-2", with: ["name": "rightname"])
        try setup.device.store.resolve("Product", "bad-2", .recreate)
        #expect(try await setup.device.engine.sync().refused == 0)
        #expect(await setup.server.objects("Product", user: "ann").values.contains { $0["name"] == "rightname" })
        #expect(try products.find("bad-1") == nil)
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test(
        "a create whose refusal came in a page whose answer was lost is kept as unlinked after the next complete pull, for recreate or delete (found by a black-box probe: in flight for ever)"
    )
    func unlinkedCreate() async throws {
        var setup = try await Setup()
        try await setup.device.engine.sync()
        try setup.products.create(["object": "bad", "name": "wrongname"])
        // The push is taken; the page carrying its create-error is lost (and sent only once).
        setup.faults.inject(.dropAnswer, on: .pull)
        await #expect(throws: SyncError.self) { try await setup.device.engine.sync() }
        setup.device = try await setup.device.reopened(backend: setup.faults, models: [Self.product])
        let report = try await setup.device.engine.sync()
        #expect(report.refused == 1)
        let error = try #require(try setup.device.store.refusedChanges(model: "Product").first)
        #expect(error.objectID == "bad" && error.kind == .create && error.code == "noLink" && error.actions == [.delete, .recreate])
        #expect(setup.device.log.notifications(.error, model: "Product").last?.errorCode == .refusedChanges)
        try setup.products.update("bad", with: ["name": "rightname"])
        try setup.device.store.resolve("Product", "bad", .recreate)
        #expect(try await setup.device.engine.sync().refused == 0)
        #expect(await setup.server.objects("Product", user: "ann").values.filter { $0["name"] == "rightname" }.count == 1)
        #expect(try setup.device.store.changeFates(model: "Product").isEmpty)
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test(
        "a link that comes after the app deleted its unlinked create: the next sync pulls the model whole and brings the server's object (found by a black-box probe: it stayed on the server only)"
    )
    func lateLinkAfterDelete() async throws {
        let setup = try await Setup()
        try await setup.device.engine.sync()
        try setup.products.create(["object": "late", "name": "Late"])
        // The push is taken; the page after it says nothing (its link comes in a later one).
        let total = await setup.server.objects("Product", user: "ann").count + 1
        let empty = #"[{"version":3},{"token":""},{"count":0},{"progress_count":0},{"total_count":\#(total)},{}]"#
        await setup.server.sabotageNext("GET", "/app/v1/Product", body: Data(empty.utf8))
        #expect(try await setup.device.engine.sync().refused == 1)
        let unlinked = try #require(try setup.device.store.refusedChanges(model: "Product").first)
        #expect(unlinked.objectID == "late" && unlinked.code == "noLink")
        try setup.device.store.resolve("Product", "late", .delete)
        try await setup.device.engine.sync()  // the link comes
        try await setup.device.engine.sync()
        #expect(try setup.products.count(where: "name" == "Late") == 1)
        #expect(await setup.server.objects("Product", user: "ann").values.filter { $0["name"] == "Late" }.count == 1)
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test("update-error: rollback takes update-rollback's values; retry sends the change again")
    func updateErrors() async throws {
        let setup = try await Setup()
        try await setup.device.engine.sync()
        let products = try setup.products
        try products.update("4", with: ["name": "wrongname"])
        #expect(try await setup.device.engine.sync().refused == 1)
        var error = try #require(try setup.device.store.refusedChanges(model: "Product").first)
        #expect(error.kind == .update && error.message == "error update")
        #expect(error.serverCopy == ["name": "Widget A", "brand": "Acme", "price": "5"], "the server's copy from update-rollback")
        try setup.device.store.resolve("Product", "4", .rollback)
        #expect(try products.find("4")?["name"] == "Widget A")

        try products.update("5", with: ["name": "wrongname"])
        #expect(try await setup.device.engine.sync().refused == 1)
        error = try #require(try setup.device.store.refusedChanges(model: "Product").first)
        #expect(error.objectID == "5")
        await setup.server.clearRules()
        try setup.device.store.resolve("Product", "5", .retry)
        #expect(try await setup.device.engine.sync().refused == 0)
        #expect(await setup.server.objects("Product", user: "ann")["5"]?["name"] == "wrongname")
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test(
        "a rollback restores the refused attributes only: a later edit of another attribute stays pending and is pushed (found by a black-box probe)")
    func rollbackKeepsALaterEdit() async throws {
        let setup = try await Setup()
        try await setup.device.engine.sync()
        let products = try setup.products
        try products.update("4", with: ["name": "wrongname"])
        #expect(try await setup.device.engine.sync().refused == 1)
        // While the error waits: the price, and the refused name again.
        try products.update("4", with: ["price": "6", "name": "wrongname again"])
        try setup.device.store.resolve("Product", "4", .rollback)
        #expect(try products.find("4")?.attributes == ["name": "Widget A", "brand": "Acme", "price": "6"])
        #expect(try setup.device.store.changeFates(model: "Product") == ["4": .pending(.update)])
        #expect(try await setup.device.engine.sync().refused == 0)
        #expect(await setup.server.objects("Product", user: "ann")["4"] == ["name": "Widget A", "brand": "Acme", "price": "6"])
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test("an update refused because the server deleted the object is a local change in the drift check, not drift (found by a black-box probe)")
    func verifyCountsAServerDeletedRefusal() async throws {
        let setup = try await Setup()
        try await setup.device.engine.sync()
        try setup.products.update("4", with: ["name": "Changed here"])
        await setup.server.delete("Product", user: "ann", id: "4")
        // The push fails with a 500, so the pull that settles it brings the delete.
        setup.faults.inject(.fail(SyncError(.server, "boom", httpStatus: 500)), on: .push)
        _ = try? await setup.device.engine.sync()
        let error = try #require(try setup.device.store.refusedChanges(model: "Product").first)
        #expect(error.objectID == "4" && error.serverDeleted)
        let report = try await setup.device.engine.verify("Product")
        #expect(report.drifts.isEmpty && report.unconfirmed == 1, "\(report)")
        await setup.stop()
    }

    @Test("numbers and booleans written here agree in the drift check with the strings RhoConnect keeps of them (found by a black-box probe)")
    func verifyReadsValuesInTheServersForm() async throws {
        let setup = try await Setup()
        try await setup.device.engine.sync()
        try setup.products.update("4", with: ["price": 4.5, "stock": 12, "active": true, "tags": ["a", "b"]])
        let created = try setup.products.create(["name": "Typed", "price": 2, "active": false])
        try await setup.device.engine.sync()
        let server = await setup.server.objects("Product", user: "ann")
        let stored = try #require(server["4"])
        #expect(stored["price"] == "4.5" && stored["stock"] == "12" && stored["active"] == "true" && stored["tags"] == #"["a","b"]"#)
        let id = try #require(server.first { $0.value["name"] == "Typed" }?.key, "\(created.id) reached the server")
        #expect(server[id]?["price"] == "2" && server[id]?["active"] == "false")
        let report = try await setup.device.engine.verify("Product")
        #expect(report.drifts.isEmpty, "\(report)")
        // A real difference in the same attributes is still drift.
        await setup.server.update("Product", user: "ann", id: id, ["price": "5"])
        let drift = try await setup.device.engine.verify("Product")
        #expect(drift.drifts.map(\.id) == [id] && drift.drifts.first?.attributes.keys.sorted() == ["price"], "\(drift)")
        await setup.stop()
    }

    @Test(
        "sync --full after a pull whose answer, with a create's link, was lost: the links are pulled before the full pull's reset drops them, so the create is linked once, not kept beside the server's copy (found by a black-box probe)"
    )
    func fullAfterLostLinks() async throws {
        let setup = try await Setup()
        try await setup.device.engine.sync()
        try setup.products.create(["object": "tmp1", "name": "Made here"])
        setup.faults.inject(.dropAnswer, on: .pull)
        await #expect(throws: SyncError.self) { try await setup.device.engine.sync() }
        let report = try await setup.device.engine.sync(mode: .full)
        #expect(report.refused == 0, "\(report)")
        let made = await setup.server.objects("Product", user: "ann").filter { $0.value["name"] == "Made here" }
        #expect(made.count == 1)
        let here = try setup.products.findAll(where: ["name": "Made here"]).map(\.id)
        #expect(here == Array(made.keys), "one object, under the server's id")
        #expect(try setup.device.store.changeFates(model: "Product").isEmpty)
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test(
        "a delete made after a pull whose answer was lost stays deleted when the server sends that page again, made before the delete (a black-box probe: the object came back for good)"
    )
    func deleteAfterLostPage() async throws {
        let setup = try await Setup()
        await setup.server.put("Product", user: "ann", id: "s1", ["a": "1"])
        try await setup.device.engine.sync()
        await setup.server.update("Product", user: "ann", id: "s1", ["a": "2"])
        setup.faults.inject(.dropAnswer, on: .pull)
        await #expect(throws: SyncError.self) { try await setup.device.engine.sync() }
        try setup.products.delete("s1")
        let report = try await setup.device.engine.sync()
        #expect(report.refused == 0, "\(report)")
        #expect(try setup.products.find("s1") == nil, "not brought back")
        #expect(await setup.server.objects("Product", user: "ann")["s1"] == nil)
        #expect(try setup.device.store.changeFates(model: "Product").isEmpty)
        try await setup.device.engine.sync()
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test(
        "an edit of an object whose delete page was lost: the update-error that follows (its rollback empty) keeps the refusal marked deleted on the server, and retry settles it (found by a black-box probe: retry looped on not found)"
    )
    func updateErrorAfterLostDeletePage() async throws {
        let setup = try await Setup()
        await setup.server.put("Product", user: "ann", id: "s1", ["a": "1"])
        try await setup.device.engine.sync()
        await setup.server.delete("Product", user: "ann", id: "s1")
        setup.faults.inject(.dropAnswer, on: .pull)
        await #expect(throws: SyncError.self) { try await setup.device.engine.sync() }
        _ = try setup.products.update("s1", with: ["a": "2"])
        #expect(try await setup.device.engine.sync().refused >= 1)
        let error = try #require(try setup.device.store.refusedChanges(model: "Product").first { $0.objectID == "s1" })
        #expect(error.kind == .update && error.serverDeleted, "\(error)")
        try setup.device.store.resolve("Product", "s1", .retry)
        #expect(try await setup.device.engine.sync().refused == 0, "settled, not refused again and again")
        #expect(try setup.device.store.refusedChanges(model: "Product").isEmpty)
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test("a delete sent again in a sync's second push (its first push's answer lost) is done by the end of that sync (found by the crash campaign)")
    func deleteInSecondPush() async throws {
        let setup = try await Setup()
        await setup.server.put("Product", user: "ann", id: "s1", ["a": "1"])
        try await setup.device.engine.sync()
        try setup.products.delete("s1")
        // The same sync pulls, sends the delete again, and pulls once more.
        setup.faults.inject(.dropAnswer, on: .push)
        try await setup.device.engine.sync()
        #expect(try setup.device.store.changeFates(model: "Product").isEmpty)
        #expect(await setup.server.objects("Product", user: "ann")["s1"] == nil)
        await setup.stop()
    }

    @Test(
        "an edit made while a create waits for its link goes in the sync whose pull brings the link, not a sync later (found by a black-box probe)"
    )
    func editWhileAwaitingLink() async throws {
        let setup = try await Setup()
        try await setup.device.engine.sync()
        try setup.products.create(["object": "tmp1", "name": "Made here", "price": "5"])
        setup.faults.inject(.dropAnswer, on: .pull)
        await #expect(throws: SyncError.self) { try await setup.device.engine.sync() }
        try setup.products.update("tmp1", with: ["price": "6"])
        let report = try await setup.device.engine.sync()
        #expect(report.refused == 0, "\(report)")
        let id = try #require(report.serverIDs["Product"]?["tmp1"])
        #expect(await setup.server.objects("Product", user: "ann")[id]?["price"] == "6", "the edit went in the same sync")
        #expect(try setup.device.store.changeFates(model: "Product").isEmpty)
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test("a logout is local (RhoConnect has no logout call), and says the server was not told (found by a black-box probe)")
    func logoutIsLocal() async throws {
        let setup = try await Setup()
        try await setup.device.engine.sync()
        let untold = try await setup.device.engine.logOut()
        #expect(untold?.code == .notSupported && untold?.message.contains("no logout call") == true, "\(String(describing: untold))")
        #expect(await !setup.device.engine.isLoggedIn)
        await setup.stop()
    }

    @Test(
        "the client a drift check or a search by condition registers for its read is reset after it: it keeps no copy of the user's data on the server, and the device's client keeps its own (found by a black-box probe)"
    )
    func readingClientsKeepNoCopy() async throws {
        let setup = try await Setup()
        try await setup.device.engine.sync()
        let device = try #require(await setup.server.clients.keys.first)
        let deviceDocuments = await setup.server.documents(ofClient: device)
        #expect(deviceDocuments["Product", default: 0] > 0)
        _ = try await setup.device.engine.verify("Product")
        _ = try await setup.device.engine.search("Product", where: Field("name") == "Widget")
        _ = try await setup.device.engine.search("Product", where: Field("price") > 1)
        let clients = await setup.server.clients
        #expect(clients.count == 4, "the device's and one per read: \(clients)")
        for id in clients.keys where id != device {
            let documents = await setup.server.documents(ofClient: id)
            #expect(documents.values.allSatisfy { $0 == 0 }, "client \(id) holds \(documents)")
        }
        #expect(await setup.server.documents(ofClient: device) == deviceDocuments)
        await setup.stop()
    }

    @Test("delete-error: retry")
    func deleteErrors() async throws {
        let setup = try await Setup()
        try await setup.device.engine.sync()
        try setup.products.delete("11")
        #expect(try await setup.device.engine.sync().refused == 1)
        let error = try #require(try setup.device.store.refusedChanges(model: "Product").first)
        #expect(error.kind == .delete && error.message == "error delete" && error.actions == [.retry])
        await setup.server.clearRules()
        try setup.device.store.resolve("Product", "11", .retry)
        #expect(try await setup.device.engine.sync().refused == 0)
        #expect(await setup.server.objects("Product", user: "ann")["11"] == nil)
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test("a refused delete's error goes when the server deletes the object (its delete listing every attribute) (found by a black-box probe)")
    func refusedDeleteThenServerDelete() async throws {
        let setup = try await Setup()
        try await setup.device.engine.sync()
        try setup.products.delete("11")
        #expect(try await setup.device.engine.sync().refused == 1)
        await setup.server.clearRules()
        await setup.server.delete("Product", user: "ann", id: "11")
        try await setup.device.engine.sync()
        #expect(try setup.device.store.refusedChanges(model: "Product").isEmpty)
        #expect(try setup.device.store.changeFates(model: "Product").isEmpty)
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test("errors are delivered once; a source-error is reported and the page still applied")
    func sourceErrorAndOnce() async throws {
        let setup = try await Setup()
        await setup.server.addRule(Fixture.Rule(source: "Product", operation: "query", message: "Error during query"))
        try await setup.device.engine.sync()
        #expect(setup.device.log.notifications(.error, model: "Product").contains { $0.message == "query-error: Error during query" })
        #expect(try setup.products.count() == 12)
        await setup.server.clearRules()
        try setup.products.create(["object": "bad", "name": "wrongname"])
        await setup.server.addRule(Fixture.Rule(source: "Product", operation: "create", message: "no"))
        #expect(try await setup.device.engine.sync().refused == 1)
        #expect(try await setup.device.engine.sync().refused == 0, "not delivered again")
        #expect(try setup.device.store.refusedChanges(model: "Product").count == 1)
        await setup.stop()
    }

    // MARK: - Tokens

    @Test("a page whose answer was lost is resent for the old token; nothing is lost or doubled")
    func resend() async throws {
        var setup = try await Setup()
        setup.faults.inject(.dropAnswer, on: .pull, after: 1)
        await #expect(throws: SyncError.self) { try await setup.device.engine.sync() }
        #expect(try setup.products.count() == 5, "the first page only")
        // The app is killed and started again: the stored token goes with the next query.
        setup.device = try await setup.device.reopened(backend: setup.faults, models: [Self.product])
        try await setup.device.engine.sync()
        let tokens = await setup.queryTokens()
        #expect(tokens[2] == tokens[1], "after the restart, the stored token of page 1 was sent again: \(tokens)")
        let answers = await setup.server.requests.filter { $0.path == "/app/v1/Product" }.count
        #expect(answers == 5, "page 1, page 2 (lost), page 2 again, page 3, the end")
        #expect(try setup.products.count() == 12)
        #expect(Set(setup.device.log.objects("Product").created).count == setup.device.log.objects("Product").created.count)
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test(
        "the first page of a later sync, whose answer was lost, is resent too: the last token goes with the next query (found by the crash campaign)")
    func resendFirstPageOfALaterSync() async throws {
        var setup = try await Setup()
        try await setup.device.engine.sync()
        await setup.server.put("Product", user: "ann", id: "new", ["name": "New"])
        try setup.products.create(["object": "here", "name": "Made here"])
        // The push lands; the query answer carrying the new object and the create's link is
        // lost (the app is killed as it arrives), and the app starts again.
        setup.faults.inject(.dropAnswer, on: .pull)
        _ = try? await setup.device.engine.sync()
        setup.device = try await setup.device.reopened(backend: setup.faults, models: [Self.product])
        try await setup.device.engine.sync()
        #expect(try setup.products.find("new")?.attributes == ["name": "New"])
        #expect(try setup.device.store.changeFates(model: "Product") == [:], "the create's link arrived")
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test(
        "the first page of a model's first sync, whose answer was lost, is resent: a query with no stored token still sends one (found by a black-box probe)"
    )
    func resendFirstPageOfFirstSync() async throws {
        var setup = try await Setup()
        setup.faults.inject(.dropAnswer, on: .pull)
        // The engine asks again in the same sync, and the app may be killed and started again:
        // both find the page the server is still holding.
        _ = try? await setup.device.engine.sync()
        setup.device = try await setup.device.reopened(backend: setup.faults, models: [Self.product])
        try await setup.device.engine.sync()
        #expect(try setup.products.count() == 12, "no page dropped")
        let tokens = await setup.queryTokens()
        #expect(tokens.allSatisfy { $0 != nil }, "every query carries a token: \(tokens)")
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test("the server drops a pending page for a query without a token, and resends it for any other: the adapter always sends one")
    func noTokenDropsThePage() async throws {
        let setup = try await Setup()
        let backend = RhoConnectBackend.forTests(setup.server)
        let session = try await backend.prepare(try await backend.logIn(Credentials(user: "ann", password: "secret")))
        let request = PullRequest(model: Self.product, cursor: nil, pageSize: 5, session: session, configuration: ModelSyncConfiguration())
        let first = try await backend.pull(request)
        #expect(first.upserts.count == 5 && first.nextCursor != nil)
        // Asked again with no stored token (the first answer lost before its token was
        // stored): the adapter's query carries the token of no page, and the server resends it.
        let again = try await backend.pull(request)
        #expect(again.upserts.map(\.id) == first.upserts.map(\.id) && again.nextCursor == first.nextCursor)
        // A query without a token (what the adapter never sends) makes the server forget the
        // page, already counted as the client's, and move on.
        let clientID = try #require(session.clientID)
        var components = URLComponents(url: setup.server.url.appendingPathComponent("app/v1/Product"), resolvingAgainstBaseURL: false)!
        components.queryItems = [URLQueryItem(name: "p_size", value: "5"), URLQueryItem(name: "version", value: "3")]
        var raw = URLRequest(url: components.url!)
        raw.setValue(clientID, forHTTPHeaderField: "X-RhoConnect-CLIENT-ID")
        raw.setValue(try #require(session.data["cookie"]?.stringValue), forHTTPHeaderField: "Cookie")
        _ = try await URLSession.shared.data(for: raw)
        let second = try await backend.pull(request)
        #expect(Set(second.upserts.map(\.id)).isDisjoint(with: first.upserts.map(\.id)), "the first page was dropped")
        await setup.stop()
    }

    // MARK: - Session and client

    @Test(
        "a client reset tells the server to forget the client and drops its id: the next sync registers a new client and pulls everything (found by a black-box probe)"
    )
    func clientResetDropsTheClientID() async throws {
        let setup = try await Setup()
        try await setup.device.engine.sync()
        let before = await setup.server.clients
        let old = try #require(before.keys.first)
        try setup.products.create(["object": "here", "name": "Made here"])
        try await setup.device.engine.clientReset()
        #expect(try setup.products.count() == 0 && setup.device.store.changeFates(model: "Product").isEmpty)
        #expect(await setup.server.requests.contains { $0.method == "POST" && $0.path == "/rc/v1/clients/\(old)/reset" })
        try await setup.device.engine.sync()
        let after = await setup.server.clients
        #expect(after.count == before.count + 1, "a new client: \(after)")
        #expect(try setup.products.count() == 12)
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test("a 401 logs out; logging in again keeps the client and syncs on")
    func unauthorized() async throws {
        let setup = try await Setup()
        try await setup.device.engine.sync()
        let clients = await setup.server.clients
        await setup.server.expireSessions()
        try await setup.server.runScript("edits")
        let error = await #expect(throws: SyncError.self) { try await setup.device.engine.sync() }
        #expect(error?.code == .unauthorized && error?.rhoConnectCode == 9)
        #expect(await !setup.device.engine.isLoggedIn)
        try await setup.device.engine.logIn(Credentials(user: "ann", password: "secret"))
        try await setup.device.engine.sync()
        #expect(await setup.server.clients == clients, "the same client: the server still knows what it has")
        #expect(try setup.products.find("3") == nil, "the removal made meanwhile arrived")
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test("wrong credentials: a clear error and no session")
    func wrongPassword() async throws {
        let setup = try await Setup()
        let error = await #expect(throws: SyncError.self) {
            try await setup.device.engine.logIn(Credentials(user: "ann", password: "nope"))
        }
        #expect(error?.code == .unauthorized && error?.message.contains("Unable to authenticate 'ann'") == true)
        await setup.stop()
    }

    @Test("an unknown client is reset: a new client, everything synced again, local changes kept")
    func unknownClient() async throws {
        let setup = try await Setup()
        try await setup.device.engine.sync()
        let before = await setup.server.clients
        try setup.products.create(["object": "offline", "name": "Offline"])
        await setup.server.forgetClients()
        try await setup.server.runScript("edits")
        let report = try await setup.device.engine.sync()
        #expect(report.clientWasReset)
        #expect(await setup.server.clients.keys.first != before.keys.first)
        #expect(await setup.server.objects("Product", user: "ann").values.contains { $0["name"] == "Offline" })
        #expect(try setup.products.find("3") == nil)
        try await setup.device.engine.sync()
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test(
        "an unknown client does not send again a create the server took whose link was lost: the full pull brings the server's object, and the create waits as unlinked for the app (found by a black-box probe: it was made twice)"
    )
    func unknownClientKeepsATakenCreate() async throws {
        var setup = try await Setup()
        try await setup.device.engine.sync()
        try setup.products.create(["object": "offline", "name": "Offline"])
        // The push is taken; the page carrying its link is lost, and the server forgets the client.
        setup.faults.inject(.dropAnswer, on: .pull)
        await #expect(throws: SyncError.self) { try await setup.device.engine.sync() }
        setup.device = try await setup.device.reopened(backend: setup.faults, models: [Self.product])
        await setup.server.forgetClients()
        let report = try await setup.device.engine.sync()
        #expect(report.clientWasReset)
        #expect(await setup.server.objects("Product", user: "ann").values.filter { $0["name"] == "Offline" }.count == 1, "made once")
        let unlinked = try #require(try setup.device.store.refusedChanges(model: "Product").first)
        #expect(unlinked.objectID == "offline" && unlinked.code == "noLink", "\(unlinked)")
        try setup.device.store.resolve("Product", "offline", .delete)
        try await setup.device.engine.sync()
        #expect(await setup.server.objects("Product", user: "ann").values.filter { $0["name"] == "Offline" }.count == 1)
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test("schema-changed stops the sync and is acknowledged")
    func schemaChanged() async throws {
        let setup = try await Setup()
        try await setup.device.engine.sync()
        await setup.server.setSchemaVersion("Product", "2")
        #expect(try await setup.device.engine.sync().schemaChanged)
        #expect(setup.device.log.notifications(.schemaChanged, model: "Product").count == 1)
        #expect(try await !setup.device.engine.sync().schemaChanged, "acknowledged by the next query")
        await setup.stop()
    }

    // MARK: - Bulk, search, blobs

    @Test(
        "a bulk sync after an update the server refuses: the refusal is stored and the value written here kept, not replaced by the bulk file's copy (found by a black-box probe)"
    )
    func bulkKeepsARefusedUpdate() async throws {
        let setup = try await Setup()
        try await setup.device.engine.sync()
        let products = try setup.products
        try products.update("4", with: ["name": "wrongname"])
        let report = try await setup.device.engine.sync(mode: .bulk)
        #expect(report.refused == 1, "\(report)")
        #expect(await setup.server.requests.contains { $0.path.hasSuffix(".data.rzip") }, "the bulk file was read")
        let error = try #require(try setup.device.store.refusedChanges(model: "Product").first)
        #expect(error.objectID == "4" && error.kind == .update)
        #expect(try products.find("4")?["name"] == "wrongname")
        await setup.server.clearRules()
        try setup.device.store.resolve("Product", "4", .retry)
        #expect(try await setup.device.engine.sync(mode: .bulk).refused == 0)
        #expect(await setup.server.objects("Product", user: "ann")["4"]?["name"] == "wrongname")
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test("bulk sync: polls while the server builds the file, replaces the data, keeps local changes")
    func bulk() async throws {
        let setup = try await Setup(models: [Self.product, Self.catalog])
        try await setup.device.engine.sync()
        try setup.products.update("4", with: ["price": "4.50"])
        try setup.products.create(["object": "local-1", "name": "Local"])
        await setup.server.setBulkWaits(2)
        try await setup.server.runScript("edits")
        try await setup.device.engine.sync(mode: .bulk)
        let bulkRequests = await setup.server.requests.filter { $0.path == "/rc/v1/app/bulk_data" }
        #expect(bulkRequests.count == 4, "two waits, then a file, for Product; a file for Catalog")
        #expect(await setup.server.requests.contains { $0.path.hasSuffix(".data.rzip") })
        let products = try setup.products
        #expect(try products.find("3") == nil && products.find("13")?["name"] == "Nexus")
        #expect(try products.find("1")?["price"] == "149.99")
        #expect(await setup.server.objects("Product", user: "ann")["4"]?["price"] == "4.50", "the local update was pushed")
        // The local create was pushed, and its link came in the same sync: once, under the
        // server's id, not also under the local one beside the bulk file's copy.
        let serverID = try #require(await setup.server.objects("Product", user: "ann").first { $0.value["name"] == "Local" }?.key)
        #expect(serverID != "local-1")
        #expect(try products.findAll(Query(where: "name" == "Local")).map(\.id) == [serverID])
        #expect(try products.statistics().inFlight == 0)
        #expect(try setup.device.objects("Catalog").count == 2)
        try await setup.device.engine.sync()
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test("search: found objects are stored, and later syncs do not send them again")
    func search() async throws {
        let setup = try await Setup()
        let ids = try await setup.device.engine.search("Product", query: ["name": "widget"])
        #expect(Set(ids) == ["4", "5", "12"])
        #expect(try setup.products.count() == 3)
        let search = try #require(await setup.server.requests.first { $0.path == "/rc/v1/app/search" })
        #expect(search.query["search[name]"] == "widget")
        let report = try await setup.device.engine.sync()
        #expect(report.pulled == 9, "the other nine only")
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test(
        "objects a search by condition stores (read as another client, which the server's record of this device does not hold) meet the server's later deletes and removed attributes: the next sync is a full one (found by a black-box probe)"
    )
    func storedSearchMeetsLaterChanges() async throws {
        let setup = try await Setup()
        try await setup.device.engine.sync()
        await setup.server.put("Product", user: "ann", id: "s1", ["name": "Found", "color": "red"])
        await setup.server.put("Product", user: "ann", id: "s2", ["name": "Found", "color": "blue"])
        let found = try await setup.device.engine.search("Product", where: "name" == "Found", storing: true)
        #expect(Set(found.map(\.id)) == ["s1", "s2"])
        #expect(try setup.products.find("s1")?["color"] == "red")
        await setup.server.delete("Product", user: "ann", id: "s1")
        await setup.server.update("Product", user: "ann", id: "s2", ["color": nil])
        try await setup.device.engine.sync()
        #expect(try setup.products.find("s1") == nil, "the server's delete reached the stored object")
        #expect(try setup.products.find("s2")?.attributes == ["name": "Found"], "and its removed attribute")
        try await setup.expectMatchesServer()
        // A search that stores nothing owes nothing.
        _ = try await setup.device.engine.search("Product", where: "name" == "Nothing such", storing: true)
        let before = await setup.server.requests.count
        try await setup.device.engine.sync()
        #expect(await !setup.server.requests.dropFirst(before).contains { $0.path.hasSuffix("/reset") || $0.query["reset"] != nil })
        await setup.stop()
    }

    @Test("blobs: -rhoblob URLs are downloaded; local blobs are pushed as multipart and reach another device")
    func blobs() async throws {
        let setup = try await Setup(models: [Self.product, Self.photo])
        try await setup.device.engine.sync(models: ["Photo"])
        let photos = try setup.device.model("Photo")
        let seed = try #require(try photos.find("ph1"))
        #expect(seed["caption"] == "A seed photo" && seed["image-rhoblob"] == nil)
        let reference = try #require(seed["image"]?.stringValue)
        #expect(try setup.device.store.blobs.data(for: reference) == Data("seed photo bytes".utf8))
        let blobRequest = try #require(await setup.server.requests.first { $0.path == "/blobs/seed.txt" })
        #expect(blobRequest.query["client_id"] != nil && blobRequest.cookie != nil)

        let bytes = Data("new photo".utf8)
        let local = try setup.device.store.blobs.put(bytes)
        try photos.create(["object": "ph-new", "caption": "Taken here", "image": .string(local)])
        try await setup.device.engine.sync(models: ["Photo"])
        let push = try #require(await setup.server.requests.last { $0.path == "/app/v1/Photo" && $0.method == "POST" })
        #expect(push.contentType?.hasPrefix("multipart/form-data; boundary=") == true)
        let stored = try #require(await setup.server.objects("Photo", user: "ann").values.first { $0["caption"] == "Taken here" })
        let url = try #require(stored["image"])
        #expect(url.contains("/blobs/"))

        // Another device of the same user gets the photo.
        let other = try SyncClient(backend: RhoConnectBackend.forTests(setup.server), models: [Self.photo])
        try await other.engine.logIn(Credentials(user: "ann", password: "secret"))
        try await other.engine.sync()
        let copy = try #require(try other.model("Photo").findAll().first { $0["caption"] == "Taken here" })
        #expect(try other.store.blobs.data(for: copy["image"]?.stringValue ?? "") == bytes)
        await setup.stop()
    }

    @Test(
        "a -rhoblob value no HTTP request can fetch (mailto:, blob:, file:) is kept as its value with an error line, and the model's pulls go on (found by a black-box probe: each sync failed as a network error, for ever)"
    )
    func blobValueNotHTTP() async throws {
        let setup = try await Setup(models: [Self.product, Self.photo])
        for (id, value) in [("ph-mail", "mailto:a@b"), ("ph-ref", "blob:abc"), ("ph-file", "file:///etc/hostname")] {
            await setup.server.put("Photo", user: "ann", id: id, ["caption": "odd", "image-rhoblob": value])
        }
        try await setup.device.engine.sync(models: ["Photo"])
        let photos = try setup.device.model("Photo")
        #expect(try photos.find("ph-mail")?["image"] == "mailto:a@b")
        #expect(try photos.find("ph-file")?["image"] == "file:///etc/hostname")
        #expect(try photos.find("ph1")?["caption"] == "A seed photo", "the rest of the page arrived")
        #expect(setup.device.log.notifications().contains { $0.status == .error && $0.message?.contains("ph-mail") == true })
        await setup.server.update("Photo", user: "ann", id: "ph-mail", ["caption": "later"])
        try await setup.device.engine.sync(models: ["Photo"])
        #expect(try photos.find("ph-mail")?["caption"] == "later")
        await setup.stop()
    }

    @Test(
        "a full sync stopped after the page that refused an update (its rollback copy empty: the client was just reset): the object is not taken as deleted on the server, and retry updates it (found by a black-box probe: retry made it again, a duplicate)"
    )
    func refusalInAnInterruptedFullSync() async throws {
        let setup = try await Setup(pageSize: 1)
        try await setup.device.engine.sync()
        let before = await setup.server.objects("Product", user: "ann").count
        await setup.server.addRule(Fixture.Rule(source: "Product", operation: "update", ids: ["4"], message: "not now"))
        try setup.products.update("4", with: ["name": "Renamed"])
        setup.faults.inject(.fail(SyncError(.network, "the connection was reset")), on: .pull, after: 1)
        await #expect(throws: SyncError.self) { try await setup.device.engine.sync(mode: .full) }
        let refusal = try #require(try setup.device.store.refusedChanges(model: "Product").first)
        #expect(refusal.objectID == "4" && !refusal.serverDeleted, "\(refusal)")
        await setup.server.clearRules()
        try setup.device.store.resolve("Product", "4", .retry)
        try await setup.device.engine.sync()
        #expect(await setup.server.objects("Product", user: "ann").count == before, "no object made again")
        #expect(await setup.server.objects("Product", user: "ann")["4"]?["name"] == "Renamed")
        await setup.stop()
    }

    @Test(
        "an update of a blob refused: the server's copy holds its blob, downloaded, and rollback puts that back (found by a black-box probe: image-rhoblob and its URL were written as a plain attribute)"
    )
    func rollbackOfABlob() async throws {
        let setup = try await Setup(models: [Self.product, Self.photo])
        try await setup.device.engine.sync(models: ["Photo"])
        let photos = try setup.device.model("Photo")
        let before = try #require(try photos.find("ph1"))
        await setup.server.addRule(Fixture.Rule(source: "Photo", operation: "update", ids: ["ph1"], message: "read only"))
        try photos.update("ph1", with: ["image": .string(try setup.device.store.blobs.put(Data("replacement".utf8)))])
        #expect(try await setup.device.engine.sync(models: ["Photo"]).refused == 1)
        let copy = try #require(try setup.device.store.refusedChanges(model: "Photo").first?.serverCopy)
        #expect(copy["image-rhoblob"] == nil && copy["image"]?.stringValue?.hasPrefix("http") == false, "\(copy)")
        try setup.device.store.resolve("Photo", "ph1", .rollback)
        let after = try #require(try photos.find("ph1"))
        #expect(Set(after.attributes.keys) == Set(before.attributes.keys), "\(after.attributes)")
        #expect(try setup.device.store.blobs.data(for: after["image"]?.stringValue ?? "") == Data("seed photo bytes".utf8))
        await setup.stop()
    }

    @Test(
        "an attribute that comes as name-rhoblob makes the model's blob attribute: a local change of it goes as a file, never as this store's reference (found by a black-box probe)"
    )
    func undeclaredBlobAttribute() async throws {
        let setup = try await Setup(models: [Self.product, ModelDefinition(name: "Photo")])
        try await setup.device.engine.sync(models: ["Photo"])
        #expect(setup.device.store.models.first { $0.name == "Photo" }?.blobAttributes == ["image"])
        let photos = try setup.device.model("Photo")
        let bytes = Data("a new image".utf8)
        let local = try setup.device.store.blobs.put(bytes)
        try photos.update("ph1", with: ["image": .string(local)])
        #expect(try await setup.device.engine.sync(models: ["Photo"]).refused == 0)
        let push = try #require(await setup.server.requests.last { $0.path == "/app/v1/Photo" && $0.method == "POST" })
        #expect(push.contentType?.hasPrefix("multipart/form-data; boundary=") == true)
        let stored = try #require(await setup.server.objects("Photo", user: "ann")["ph1"])
        #expect(stored["image"]?.contains("/blobs/") == true && stored["image"]?.hasPrefix("blob:") == false, "\(stored)")
        await setup.stop()
    }

    // MARK: - Legacy routes

    @Test("the legacy /application routes sync too")
    func legacyRoutes() async throws {
        let setup = try await Setup(routes: .legacy)
        try await setup.device.engine.sync()
        try setup.products.update("1", with: ["price": "1"])
        try await setup.device.engine.sync()
        let paths = Set(await setup.server.requests.map(\.path))
        #expect(paths.isSubset(of: ["/application/clientlogin", "/application/clientcreate", "/application"]), "\(paths)")
        try await setup.expectMatchesServer()
        await setup.stop()
    }

    @Test("no password or session cookie appears in an error, a notification or a log line of syncs that log in, fail to, and fail mid-page")
    func secretsStaySecret() async throws {
        var fixture = try Fixture.named("products")
        fixture.users = ["ann": "pw-Rc58!q"]
        let server = try await RhoConnectServer.start(fixture)
        defer { Task { await server.stop() } }
        let capture = LogCapture()
        let client = try SyncClient(
            backend: RhoConnectBackend.forTests(server), models: [Self.product], pageSize: 5,
            retry: RetryPolicy(maxAttempts: 2, baseDelay: .milliseconds(1)), logger: capture.logger)
        await client.record()
        var texts: [String] = []
        func attempt(_ body: () async throws -> Void) async {
            do { try await body() } catch { texts.append("\(error)") }
        }
        await attempt { try await client.engine.logIn(Credentials(user: "ann", password: "wrong-Jw40")) }
        await attempt { try await client.engine.logIn(Credentials(user: "ann", password: "pw-Rc58!q")) }
        // The second page fails, past the retry: a sync that fails mid-page.
        await server.sabotageNext(
            "GET", "/app/v1/Product", status: 200,
            body: Data(#"[{"version":3},{"token":"t1"},{"count":0},{"progress_count":0},{"total_count":12},{}]"#.utf8))
        await server.sabotageNext("GET", "/app/v1/Product", status: 500, body: Data("boom".utf8))
        await server.sabotageNext("GET", "/app/v1/Product", status: 500, body: Data("boom".utf8))
        await attempt { try await client.engine.sync() }
        await server.expireSessions()
        await attempt { try await client.engine.sync() }
        #expect(texts.count == 3, "\(texts)")
        #expect(!capture.lines.isEmpty, "the failures were logged")
        let cookies = Set(
            await server.requests.compactMap(\.cookie).flatMap { $0.split(separator: ";") }.map {
                $0.trimmingCharacters(in: .whitespaces)
            }.filter { !$0.isEmpty })
        #expect(!cookies.isEmpty)
        let everything = texts + capture.lines + client.log.all.map { "\($0)" }
        for secret in cookies.union(["pw-Rc58!q", "wrong-Jw40"]) {
            #expect(!everything.contains { $0.contains(secret) }, "\(secret) leaked")
        }
    }
}
