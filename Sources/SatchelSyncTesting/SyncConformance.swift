public import Satchel
import SatchelSync
import Synchronization
public import Testing

/// The adapter conformance kit: scenarios that drive a backend through the ``SyncEngine`` and
/// check what lands, in the store and on the server. Every adapter runs all of them:
///
/// ```swift
/// @Test(arguments: SyncConformance.scenarios)
/// func conformance(_ scenario: SyncConformance.Scenario) async throws {
///     try await scenario.run(on: MyServerHarness())
/// }
/// ```
///
/// Faults (failed calls, lost answers, repeated pages, stops, restarts) are injected at the
/// adapter's boundary by ``FaultyBackend``, so they apply to any server.
public enum SyncConformance {
    /// One scenario.
    public struct Scenario: Sendable, CustomTestStringConvertible {
        public let name: String
        let body: @Sendable (any ConformanceServer) async throws -> Void

        public var testDescription: String { name }

        /// Runs the scenario on a fresh server of `harness`.
        public func run(on harness: any ConformanceHarness) async throws {
            let server = try await harness.makeServer()
            do {
                try await body(server)
            } catch {
                try? await server.shutdown()
                throw error
            }
            try await server.shutdown()
        }
    }

    // MARK: - Models and devices

    static let product = ModelDefinition(name: "Product")
    static let customer = ModelDefinition(name: "Customer")
    static let order = ModelDefinition(name: "Order", associations: ["customer": "Customer"])
    /// A model that never syncs.
    static let setting = ModelDefinition(name: "Setting", partition: .local)
    static let models = [product, customer, order, setting]

    /// The models' attribute types, for servers whose values are strings.
    public static let schemas: [String: [String: AttributeType]] = [
        "Product": ["name": .string, "price": .integer, "brand": .string],
        "Customer": ["name": .string],
        "Order": ["customer": .string, "total": .integer],
    ]

    /// The kit's models for `server`: fixed-schema with typed attributes when its values are
    /// strings.
    static func models(for server: any ConformanceServer) -> [ModelDefinition] {
        guard server.valuesAreStrings else { return models }
        return models.map { model in
            guard let schema = schemas[model.name] else { return model }
            var typed = model
            typed.kind = .fixedSchema(schema)
            return typed
        }
    }

    /// A device logged in to `server`, through a ``FaultyBackend``.
    struct Device {
        var client: SyncClient
        let faults: FaultyBackend
        let server: any ConformanceServer

        var engine: SyncEngine { client.engine }
        var log: EventLog { client.log }
        var store: Store { client.store }

        func products() throws -> Model { try client.model("Product") }

        /// Closes the store and opens it again, as after the app was killed.
        mutating func restart() async throws {
            client = try await client.reopened(backend: faults, models: SyncConformance.models(for: server))
        }

        func expectConverged(
            _ models: [String] = ["Product"], user: Credentials? = nil, sourceLocation: SourceLocation = #_sourceLocation
        ) async throws {
            try await client.expectConverged(with: server, models: models, user: user, sourceLocation: sourceLocation)
        }
    }

    static func device(_ server: any ConformanceServer, retry: RetryPolicy = RetryPolicy(maxAttempts: 1)) async throws -> Device {
        let faults = FaultyBackend(server.backend)
        let client = try SyncClient(backend: faults, models: models(for: server), pageSize: 5, retry: retry)
        await client.record()
        try await client.engine.logIn(server.credentials)
        return Device(client: client, faults: faults, server: server)
    }

    /// Puts `count` products on the server (`p1`…): name, price, brand.
    @discardableResult
    static func seed(_ server: any ConformanceServer, _ count: Int) async throws -> [String] {
        var ids: [String] = []
        for i in 1...count {
            let attributes: JSONObject = ["name": .string("Product \(i)"), "price": .int(Int64(i)), "brand": i % 2 == 0 ? "Acme" : "Zenith"]
            ids.append(try await server.put("Product", attributes, id: "p\(i)"))
        }
        return ids
    }

    /// The server's objects of `model` whose `attribute` is `value`.
    static func serverObjects(_ server: any ConformanceServer, _ model: String, where attribute: String, is value: JSONValue) async throws
        -> [String: JSONObject]
    {
        try await server.objects(model).filter { $0.value[attribute] == value }
    }

    /// `object` without the attributes the server sets on every object.
    static func plain(_ object: JSONObject?, _ server: any ConformanceServer) -> JSONObject? {
        object?.filter { name, _ in !server.serverAttributes.contains(name) }
    }

    static func expectThrows(
        _ code: SyncError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void
    ) async {
        do {
            try await body()
            Issue.record("expected a \(code) error", sourceLocation: sourceLocation)
        } catch let error as SyncError {
            #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("expected a SyncError \(code), got \(error)", sourceLocation: sourceLocation)
        }
    }

    // MARK: - Scenarios

    /// Every scenario.
    public static let scenarios: [Scenario] = [
        Scenario(name: "pulls the server's objects in pages", body: pullsInPages),
        Scenario(name: "applies server updates, attribute removals and deletes", body: appliesServerChanges),
        Scenario(name: "pushes creates, updates and deletes under the null rule", body: pushesLocalChanges),
        Scenario(name: "links created ids and rewrites references, parents first", body: linksIDsAndReferences),
        Scenario(name: "merges or refuses concurrent edits", body: concurrentEdits),
        Scenario(name: "edits of different attributes on both sides merge in one sync", body: disjointEditsMerge),
        Scenario(name: "a resolver decides true conflicts", body: resolverDecides),
        Scenario(name: "create error: delete, while other changes go through", body: createErrorDelete),
        Scenario(name: "create error: recreate", body: createErrorRecreate),
        Scenario(name: "update error: rollback, then retry", body: updateErrorRollbackRetry),
        Scenario(name: "delete error: retry", body: deleteErrorRetry),
        Scenario(name: "a server delete of a changed object is reported", body: serverDeleteOfChangedObject),
        Scenario(name: "resumes after a failed page and a restart", body: resumesAfterFault),
        Scenario(name: "a lost push answer makes no duplicate", body: lostPushAnswer),
        Scenario(name: "a repeated page is applied once", body: repeatedPage),
        Scenario(name: "retries 5xx with backoff, honouring Retry-After", body: retriesServerErrors),
        Scenario(name: "a 401 drops the session; logging in resumes", body: unauthorizedMidSync),
        Scenario(name: "stop() ends a sync at a page boundary", body: stopMidSync),
        Scenario(name: "an unknown client is reset and synced again", body: unknownClient),
        Scenario(name: "client reset and full reset", body: resets),
        Scenario(name: "a full resync re-pulls everything", body: fullResync),
        Scenario(name: "a bulk sync replaces data, keeping local changes", body: bulkSync),
        Scenario(name: "a second device converges", body: secondDevice),
        Scenario(name: "re-login keeps deltas", body: reLoginKeepsDeltas),
        Scenario(name: "removal is absence on the server", body: removalIsAbsence),
        Scenario(name: "a push writes on the server exactly the attributes the app wrote", body: writesOnlyTheAppsAttributes),
        Scenario(name: "a search by condition answers exactly the server's matching objects", body: searchByCondition),
        Scenario(name: "the drift check sees what differs, and what local changes explain", body: driftCheck),
        Scenario(name: "another user: the user partition is wiped, local models kept", body: anotherUser),
    ]

    static func pullsInPages(_ server: any ConformanceServer) async throws {
        let ids = try await seed(server, 23)
        let device = try await device(server)
        let report = try await device.engine.sync(models: ["Product"])
        #expect(report.pulled == 23)
        let progress = device.log.notifications(.inProgress, model: "Product")
        #expect(progress.count >= 5, "23 objects in pages of 5")
        #expect(progress.map(\.processedCount) == progress.map(\.processedCount).sorted())
        #expect(progress.last?.processedCount == 23)
        #expect(device.log.notifications(.ok, model: "Product").count == 1)
        #expect(device.log.notifications(.complete).count == 1)
        #expect(device.log.completions.count == 1)
        #expect(try await device.engine.initialSyncComplete("Product"))
        #expect(Set(device.log.objects("Product").created) == Set(ids))
        #expect(await !device.engine.isSyncing)
        try await device.expectConverged()
    }

    static func appliesServerChanges(_ server: any ConformanceServer) async throws {
        let ids = try await seed(server, 10)
        let device = try await device(server)
        try await device.engine.sync(models: ["Product"])
        device.log.clear()
        try await server.update("Product", ids[0], ["price": 100])
        try await server.update("Product", ids[1], ["brand": .null])
        try await server.delete("Product", ids[2])
        try await server.delete("Product", ids[3])
        let added = try await server.put("Product", ["name": "Product 11", "price": 11], id: "p11")
        try await device.engine.sync(models: ["Product"])
        let objects = device.log.objects("Product")
        #expect(Set(objects.deleted) == [ids[2], ids[3]])
        #expect(Set(objects.updated).isSuperset(of: [ids[0], ids[1]]))
        #expect(objects.created == [added])
        #expect(try device.products().find(ids[1])?["brand"] == nil)
        #expect(try device.products().find(ids[0])?["price"] == 100)
        try await device.expectConverged()
    }

    static func pushesLocalChanges(_ server: any ConformanceServer) async throws {
        let ids = try await seed(server, 3)
        let device = try await device(server)
        try await device.engine.sync(models: ["Product"])
        let products = try device.products()
        try products.create(["object": "n1", "name": "New", "price": 5])
        try products.update(ids[0], with: ["price": 7, "brand": .null])
        try products.delete(ids[1])
        // Every attribute gone (those the server sets too): the object is deleted (the null rule).
        var removal: JSONObject = ["name": .null, "price": .null, "brand": .null]
        for name in server.serverAttributes { removal[name] = .null }
        #expect(try products.update(ids[2], with: removal) == nil)
        let report = try await device.engine.sync(models: ["Product"])
        #expect(report.accepted == 4)
        #expect(report.refused == 0)
        let remote = try await server.objects("Product")
        #expect(plain(remote[ids[0]], server) == ["name": "Product 1", "price": 7])
        #expect(remote[ids[1]] == nil && remote[ids[2]] == nil)
        #expect(try await serverObjects(server, "Product", where: "name", is: "New").count == 1)
        try await device.expectConverged()

        // A removal made on the server removes the attribute here.
        try await server.update("Product", ids[0], ["name": .null])
        try await device.engine.sync(models: ["Product"])
        #expect(plain(try products.find(ids[0])?.attributes, server) == ["price": 7])
        try await device.expectConverged()
    }

    static func linksIDsAndReferences(_ server: any ConformanceServer) async throws {
        let device = try await device(server)
        try device.client.model("Customer").create(["object": "c-local", "name": "Ann"])
        try device.client.model("Order").create(["object": "o-local", "customer": "c-local", "total": 12])
        let report = try await device.engine.sync()
        #expect(report.accepted == 2)
        let customerIndex = try #require(report.models.firstIndex(of: "Customer"))
        let orderIndex = try #require(report.models.firstIndex(of: "Order"))
        #expect(customerIndex < orderIndex, "parents sync first")
        let customers = try await server.objects("Customer")
        let orders = try await server.objects("Order")
        #expect(customers.count == 1 && orders.count == 1)
        let customerID = try #require(customers.first?.key)
        #expect(customers[customerID]?["name"] == "Ann")
        #expect(orders.first?.value["customer"] == .string(customerID), "the server's order refers to the server's customer")
        #expect(try device.client.model("Customer").find(customerID)?["name"] == "Ann")
        #expect(try device.client.model("Order").findAll().first?["customer"] == .string(customerID))
        if customerID != "c-local" {
            #expect(try device.client.model("Customer").find("c-local") == nil)
            // A rename, not a create: the notification links the two ids.
            #expect(device.log.objects("Customer").renamed == ["c-local": customerID])
            #expect(!device.log.objects("Customer").created.contains(customerID))
            #expect(report.serverIDs["Customer"] == ["c-local": customerID], "the report says which id the server gave")
        } else {
            #expect(report.serverIDs.isEmpty)
        }
        try await device.engine.sync()
        try await device.expectConverged(["Customer", "Order"])
    }

    static func concurrentEdits(_ server: any ConformanceServer) async throws {
        let ids = try await seed(server, 1)
        let device = try await device(server)
        let products = try device.products()
        try await device.engine.sync(models: ["Product"])
        // Both sides change the price: a true conflict (the server also changes the name).
        try await server.update("Product", ids[0], ["name": "Server name", "price": 7])
        try products.update(ids[0], with: ["price": 99])
        let report = try await device.engine.sync(models: ["Product"])
        if server.detectsConflicts {
            #expect(report.refused == 1 && report.merged == 0)
            let errors = try device.store.refusedChanges(model: "Product")
            let error = try #require(errors.first)
            #expect(errors.count == 1)
            #expect(error.kind == .update && error.objectID == ids[0])
            #expect(error.serverCopy?["name"] == "Server name")
            #expect(error.actions == [.retry, .rollback])
            // The local value stays until the conflict is resolved; the others follow the server.
            #expect(try products.find(ids[0])?["price"] == 99)
            #expect(try products.find(ids[0])?["name"] == "Server name")
            try device.store.resolve("Product", ids[0], .retry)
            try await device.engine.sync(models: ["Product"])
            #expect(try await server.objects("Product")[ids[0]]?["price"] == 99)
            try await device.expectConverged()

            // Again, rolled back this time.
            try await server.update("Product", ids[0], ["price": 1])
            try products.update(ids[0], with: ["price": 50])
            #expect(try await device.engine.sync(models: ["Product"]).refused == 1)
            try device.store.resolve("Product", ids[0], .rollback)
            #expect(try products.find(ids[0])?["price"] == 1)
            try await device.engine.sync(models: ["Product"])
        } else {
            #expect(report.refused == 0)
        }
        let remote = try await server.objects("Product")[ids[0]]
        #expect(remote?["name"] == "Server name")
        #expect(remote?["price"] == (server.detectsConflicts ? 1 : 99))
        try await device.expectConverged()
    }

    /// The device changes the price while the server changes the name of the same object: not
    /// a conflict. A server that checks versions refuses the push; the engine merges the two
    /// attribute by attribute and sends the price again in the same sync, and nothing is left to
    /// resolve. A server that does not check merges by itself (an update carries only the
    /// changed attributes).
    static func disjointEditsMerge(_ server: any ConformanceServer) async throws {
        let ids = try await seed(server, 2)
        let device = try await device(server)
        let products = try device.products()
        try await device.engine.sync(models: ["Product"])
        try await server.update("Product", ids[0], ["name": "Server name"])
        try products.update(ids[0], with: ["price": 99])
        try products.update(ids[1], with: ["brand": .null])  // and another object, unconflicted
        let report = try await device.engine.sync(models: ["Product"])
        #expect(report.refused == 0 && report.merged == (server.detectsConflicts ? 1 : 0))
        #expect(try device.store.refusedChanges(model: "Product").isEmpty)
        let remote = try #require(try await server.objects("Product")[ids[0]])
        #expect(remote["name"] == "Server name", "the server's change stays there")
        #expect(remote["price"] == 99, "the device's change reached the server in this sync")
        #expect(try products.find(ids[0])?["name"] == "Server name" && products.find(ids[0])?["price"] == 99)
        #expect(try await server.objects("Product")[ids[1]]?["brand"] == nil)
        if server.detectsConflicts {
            let lines = device.log.notifications(.inProgress, model: "Product").compactMap(\.message)
            #expect(lines.contains { $0.contains("conflicts: merged \(ids[0])") }, "\(lines)")
        }
        try await device.expectConverged()
    }

    /// A true conflict (the price changed on both sides) goes to the model's resolver where the
    /// server detects it: kept local, then taken from the server, then merged by the app. A
    /// server that does not detect conflicts takes the last write, and the resolver is never
    /// asked.
    static func resolverDecides(_ server: any ConformanceServer) async throws {
        let ids = try await seed(server, 1)
        let id = ids[0]
        let device = try await device(server)
        let products = try device.products()
        try await device.engine.sync(models: ["Product"])
        /// What the resolver was asked, and what it answers.
        final class Resolver: Sendable {
            let asked = Mutex<[SyncConflict]>([])
            let answer = Mutex<SyncConflict.Answer>(.keepLocal)
        }
        let resolver = Resolver()
        await device.engine.setConflictResolver(for: "Product") { conflict in
            resolver.asked.withLock { $0.append(conflict) }
            return resolver.answer.withLock { $0 }
        }
        let detects = server.detectsConflicts

        // Kept local: the device's price goes to the server in this sync.
        try await server.update("Product", id, ["price": 5, "name": "Server name"])
        try products.update(id, with: ["price": 50])
        var report = try await device.engine.sync(models: ["Product"])
        #expect(report.refused == 0 && report.resolved == (detects ? 1 : 0))
        if detects {
            let conflict = try #require(resolver.asked.withLock { $0.first })
            #expect(conflict.objectID == id && conflict.conflicting == ["price"])
            #expect(conflict.server["price"] == 5 && conflict.localChanges["price"] == 50)
            #expect(conflict.base["price"] == 1, "the price before the device changed it")
            #expect(conflict.local["price"] == 50 && conflict.server["name"] == "Server name")
        } else {
            #expect(resolver.asked.withLock { $0.isEmpty }, "a server that takes every write reports no conflict")
        }
        #expect(try await server.objects("Product")[id]?["price"] == 50)
        #expect(try products.find(id)?["name"] == "Server name")
        try await device.expectConverged()

        // Taken from the server: the device's edit is dropped where the server detects the conflict.
        resolver.answer.withLock { $0 = .takeServer }
        try await server.update("Product", id, ["price": 2])
        try products.update(id, with: ["price": 60])
        report = try await device.engine.sync(models: ["Product"])
        #expect(report.refused == 0 && report.resolved == (detects ? 1 : 0))
        #expect(try await server.objects("Product")[id]?["price"] == (detects ? 2 : 60))
        #expect(try products.find(id)?["price"] == (detects ? 2 : 60))
        try await device.expectConverged()

        // Merged by the app: its attributes become the object, on both sides.
        resolver.answer.withLock { $0 = .merge(["name": "Merged", "price": 75]) }
        try await server.update("Product", id, ["price": 3])
        try products.update(id, with: ["price": 70])
        report = try await device.engine.sync(models: ["Product"])
        #expect(report.refused == 0)
        let remote = try #require(try await server.objects("Product")[id])
        #expect(remote["price"] == (detects ? 75 : 70))
        if detects {
            #expect(remote["name"] == "Merged")
            #expect(remote["brand"] == nil, "an attribute the merge left out is removed on the server")
            #expect(plain(try products.find(id)?.attributes, server) == ["name": "Merged", "price": 75])
        }
        try await device.expectConverged()
    }

    static func createErrorDelete(_ server: any ConformanceServer) async throws {
        let device = try await device(server)
        let products = try device.products()
        try await server.refuse(.create, model: "Product", id: "bad1", carrying: ["name": "Bad"])
        try products.create(["object": "bad1", "name": "Bad"])
        try products.create(["object": "good1", "name": "Good"])
        let report = try await device.engine.sync(models: ["Product"])
        #expect(report.refused == 1)
        #expect(report.accepted == 1)
        let errors = try device.store.refusedChanges(model: "Product")
        #expect(errors.map(\.objectID) == ["bad1"])
        #expect(errors.first?.kind == .create)
        #expect(errors.first?.actions == [.delete, .recreate])
        #expect(device.log.notifications(.error, model: "Product").contains { $0.errorCode == .refusedChanges })
        #expect(try await serverObjects(server, "Product", where: "name", is: "Good").count == 1)
        #expect(try await serverObjects(server, "Product", where: "name", is: "Bad").isEmpty)
        #expect(try products.find("bad1")?["name"] == "Bad", "the refused object stays until resolved")
        guard case .refused? = try device.store.changeFates(model: "Product")["bad1"] else {
            Issue.record("the fate of the refused create is not 'refused'")
            return
        }
        // An unresolved error is not pushed again, and blocks nothing.
        try products.create(["object": "good2", "name": "Good 2"])
        #expect(try await device.engine.sync(models: ["Product"]).refused == 0)
        #expect(try await serverObjects(server, "Product", where: "name", is: "Good 2").count == 1)
        #expect(try device.store.refusedChanges(model: "Product").count == 1)

        try device.store.resolve("Product", "bad1", .delete)
        // The refused create is gone; an object the server holds under that id (its reason to
        // refuse) takes its place.
        #expect(try products.find("bad1")?["name"] == nil)
        #expect(try device.store.changeFates(model: "Product")["bad1"] == nil)
        try await server.allowAll()
        try await device.engine.sync(models: ["Product"])
        try await device.expectConverged()
    }

    static func createErrorRecreate(_ server: any ConformanceServer) async throws {
        let device = try await device(server)
        let products = try device.products()
        try await server.refuse(.create, model: "Product", id: "bad1", carrying: ["name": "Bad"])
        try products.create(["object": "bad1", "name": "Bad"])
        #expect(try await device.engine.sync(models: ["Product"]).refused == 1)
        try await server.allowAll()
        try device.store.resolve("Product", "bad1", .recreate)
        let report = try await device.engine.sync(models: ["Product"])
        #expect(report.refused == 0)
        #expect(try await serverObjects(server, "Product", where: "name", is: "Bad").count == 1)
        try await device.expectConverged()
    }

    static func updateErrorRollbackRetry(_ server: any ConformanceServer) async throws {
        let ids = try await seed(server, 1)
        let device = try await device(server)
        let products = try device.products()
        try await device.engine.sync(models: ["Product"])
        try await server.refuse(.update, model: "Product", id: ids[0])
        try products.update(ids[0], with: ["price": 2, "brand": "Local"])
        #expect(try await device.engine.sync(models: ["Product"]).refused == 1)
        let error = try #require(try device.store.refusedChanges(model: "Product").first)
        #expect(error.kind == .update && error.objectID == ids[0])
        #expect(error.attributes["price"] == 2)
        #expect(try products.find(ids[0])?["price"] == 2, "the local value stays until resolved")
        #expect(error.actions.contains(.retry))
        if error.actions.contains(.rollback) {
            try device.store.resolve("Product", ids[0], .rollback)
            #expect(plain(try products.find(ids[0])?.attributes, server) == plain(error.serverCopy, server))
            try await device.engine.sync(models: ["Product"])
            try await device.expectConverged()
            try products.update(ids[0], with: ["price": 3, "brand": "Local"])
            #expect(try await device.engine.sync(models: ["Product"]).refused == 1)
        }
        #expect(throws: SatchelError.self) { try device.store.resolve("Product", ids[0], .recreate) }
        try await server.allowAll()
        try device.store.resolve("Product", ids[0], .retry)
        #expect(try await device.engine.sync(models: ["Product"]).refused == 0)
        #expect(try await server.objects("Product")[ids[0]]?["brand"] == "Local")
        try await device.expectConverged()
    }

    static func deleteErrorRetry(_ server: any ConformanceServer) async throws {
        let ids = try await seed(server, 2)
        let device = try await device(server)
        let products = try device.products()
        try await device.engine.sync(models: ["Product"])
        try await server.refuse(.delete, model: "Product", id: ids[0])
        try products.delete(ids[0])
        #expect(try await device.engine.sync(models: ["Product"]).refused == 1)
        let error = try #require(try device.store.refusedChanges(model: "Product").first)
        // A rollback too, where the server sent its copy.
        #expect(error.kind == .delete && error.actions == (error.serverCopy == nil ? [.retry] : [.retry, .rollback]))
        #expect(try products.find(ids[0]) == nil, "a refused delete stays deleted here")
        #expect(try await server.objects("Product")[ids[0]] != nil)
        try await device.engine.sync(models: ["Product"])
        #expect(try products.find(ids[0]) == nil, "a pull does not bring it back")
        try await server.allowAll()
        try device.store.resolve("Product", ids[0], .retry)
        #expect(try await device.engine.sync(models: ["Product"]).refused == 0)
        #expect(try await server.objects("Product")[ids[0]] == nil)
        try await device.expectConverged()
    }

    static func serverDeleteOfChangedObject(_ server: any ConformanceServer) async throws {
        let ids = try await seed(server, 2)
        let device = try await device(server)
        let products = try device.products()
        try await device.engine.sync(models: ["Product"])
        try products.update(ids[0], with: ["price": 5])
        try products.update(ids[1], with: ["price": 6])
        try await server.delete("Product", ids[0])
        try await server.delete("Product", ids[1])
        let report = try await device.engine.sync(models: ["Product"])
        #expect(report.refused == 2)
        let errors = try device.store.refusedChanges(model: "Product")
        #expect(errors.map(\.objectID).sorted() == ids.sorted())
        #expect(errors.allSatisfy { $0.kind == .update && $0.serverDeleted })
        #expect(try products.find(ids[0])?["price"] == 5, "not silently deleted")
        try device.store.resolve("Product", ids[0], .rollback)
        #expect(try products.find(ids[0]) == nil)
        try device.store.resolve("Product", ids[1], .retry)
        #expect(try await device.engine.sync(models: ["Product"]).refused == 0)
        let recreated = try await serverObjects(server, "Product", where: "price", is: 6)
        #expect(recreated.count == 1, "retry creates the object again on the server")
        #expect(recreated.first?.value["name"] == "Product 2")
        try await device.expectConverged()
    }

    static func resumesAfterFault(_ server: any ConformanceServer) async throws {
        try await seed(server, 20)
        var device = try await device(server)
        try device.products().create(["object": "n1", "name": "Made offline"])
        device.faults.inject(.fail(SyncError(.network, "connection reset by peer")), on: .pull, after: 2)
        await expectThrows(.network) { try await device.engine.sync(models: ["Product"]) }
        #expect(try device.products().count() >= 11, "the two pages applied stay, with the local object")
        #expect(try await serverObjects(server, "Product", where: "name", is: "Made offline").count == 1, "the push before the pull landed")
        #expect(try device.store.verify().problems == [])
        #expect(device.log.notifications(.error).last?.errorCode == .network)

        try await device.restart()
        let report = try await device.engine.sync(models: ["Product"])
        #expect(report.pulled < 21, "the pull resumed from its cursor")
        #expect(try await serverObjects(server, "Product", where: "name", is: "Made offline").count == 1)
        try await device.expectConverged()
    }

    static func lostPushAnswer(_ server: any ConformanceServer) async throws {
        let ids = try await seed(server, 1)
        let device = try await device(server)
        try await device.engine.sync(models: ["Product"])
        try device.products().create(["object": "n1", "name": "Once"])
        try device.products().create(["object": "n2", "name": "Twice", "brand": "Removed here"])
        try device.products().create(["object": "n3", "name": "Thrice"])
        try device.products().update(ids[0], with: ["price": 42])
        device.faults.inject(.dropAnswer, on: .push)
        if server.backend.capabilities.pushResultsViaPull {
            // The sync's pull says what the server carried out: the create's link arrives, and
            // the update goes again after it.
            try await device.engine.sync(models: ["Product"])
        } else {
            await expectThrows(.network) { try await device.engine.sync(models: ["Product"]) }
            guard case .inFlight? = try device.store.changeFates(model: "Product")["n1"] else {
                Issue.record("the create is not in flight after its answer was lost")
                return
            }
        }
        // Changed here before the answer is known: an attribute removed, an object deleted
        // (found by black-box probes: the server kept the attribute, and the object).
        try device.products().update(try localID(device, name: "Twice"), with: ["brand": .null])
        try device.products().delete(try localID(device, name: "Thrice"))
        let report = try await device.engine.sync(models: ["Product"])
        let refusals = try device.store.refusedChanges()
        #expect(report.refused == 0, "\(refusals)")
        #expect(try await serverObjects(server, "Product", where: "name", is: "Once").count == 1, "sent twice, created once")
        #expect(try await server.objects("Product")[ids[0]]?["price"] == 42)
        let twice = try await serverObjects(server, "Product", where: "name", is: "Twice")
        #expect(twice.count == 1 && twice.values.allSatisfy { $0["brand"] == nil }, "\(twice)")
        #expect(try await serverObjects(server, "Product", where: "name", is: "Thrice").isEmpty)
        try await device.expectConverged()
    }

    /// The id the object named `name` has here (its server id once a pull brought its link).
    private static func localID(_ device: Device, name: String) throws -> String {
        guard let object = try device.products().findFirst(where: ["name": .string(name)]) else {
            throw SyncError(.protocolViolation, "no object named \(name) here")
        }
        return object.id
    }

    static func repeatedPage(_ server: any ConformanceServer) async throws {
        let ids = try await seed(server, 12)
        let device = try await device(server)
        device.faults.inject(.repeatPreviousPage, on: .pull, after: 1)
        try await device.engine.sync(models: ["Product"])
        #expect(device.faults.unusedFaults == 0, "a page was served twice")
        let created = device.log.objects("Product").created
        #expect(created.count == 12 && Set(created) == Set(ids), "each object created once")
        try await device.expectConverged()
    }

    static func retriesServerErrors(_ server: any ConformanceServer) async throws {
        try await seed(server, 7)
        let device = try await device(server, retry: RetryPolicy(maxAttempts: 4, baseDelay: .milliseconds(100), jitter: 0.2))
        let unavailable = SyncError(.server, "service unavailable", httpStatus: 503, retryAfter: .seconds(2))
        device.faults.inject(.fail(unavailable), on: .pull, after: 1)
        device.faults.inject(.fail(SyncError(.server, "bad gateway", httpStatus: 502)), on: .pull)
        try await device.engine.sync(models: ["Product"])
        let delays = device.client.delays.all
        #expect(delays.count == 2)
        #expect(delays.first.map { $0 >= .seconds(2) } == true, "Retry-After honoured: \(delays)")
        #expect(delays.last.map { $0 >= .milliseconds(160) && $0 <= .milliseconds(240) } == true, "backoff with jitter: \(delays)")
        #expect(
            device.log.notifications(.error).map { $0.message?.split(separator: ";").last.map { String($0.dropFirst()) } } == [
                "retrying in 2 s", "retrying in 0.2 s",
            ])
        // A 4xx is not retried.
        try await server.update("Product", "p1", ["price": 1000])
        device.faults.inject(.fail(SyncError(.server, "bad request", httpStatus: 400)), on: .pull)
        await expectThrows(.server) { try await device.engine.sync(models: ["Product"]) }
        #expect(device.client.delays.all.count == 2)
        try await device.engine.sync(models: ["Product"])
        try await device.expectConverged()
    }

    static func unauthorizedMidSync(_ server: any ConformanceServer) async throws {
        try await seed(server, 12)
        let device = try await device(server)
        device.faults.inject(.fail(SyncError(.unauthorized, "the session expired", httpStatus: 401)), on: .pull, after: 1)
        await expectThrows(.unauthorized) { try await device.engine.sync(models: ["Product"]) }
        #expect(await !device.engine.isLoggedIn)
        #expect(try device.products().count() == 5)
        await expectThrows(.notLoggedIn) { try await device.engine.sync(models: ["Product"]) }
        try await device.engine.logIn(server.credentials)
        try await device.engine.sync(models: ["Product"])
        try await device.expectConverged()
    }

    static func stopMidSync(_ server: any ConformanceServer) async throws {
        try await seed(server, 15)
        let device = try await device(server)
        let engine = device.engine
        device.faults.inject(.before({ engine.stop() }), on: .pull, after: 1)
        await expectThrows(.cancelled) { try await engine.sync(models: ["Product"]) }
        #expect(await !engine.isSyncing)
        #expect(try device.products().count() == 10, "two whole pages, no half page")
        #expect(try device.store.verify().problems == [])
        #expect(device.log.notifications(.error).last?.errorCode == .cancelled)
        #expect(device.log.completions.count == 1)
        try await engine.sync(models: ["Product"])
        try await device.expectConverged()
    }

    static func unknownClient(_ server: any ConformanceServer) async throws {
        let ids = try await seed(server, 6)
        let device = try await device(server)
        try await device.engine.sync(models: ["Product"])
        try device.products().create(["object": "n1", "name": "Made offline"])
        try device.products().update(ids[0], with: ["price": 77])
        try await server.delete("Product", ids[1])
        device.faults.inject(.fail(SyncError(.unknownClient, "unknown client", httpStatus: 404)), on: .prepare)
        let report = try await device.engine.sync(models: ["Product"])
        #expect(report.clientWasReset)
        #expect(device.log.notifications(.error).contains { $0.errorCode == .unknownClient })
        #expect(try await serverObjects(server, "Product", where: "name", is: "Made offline").count == 1, "nothing pushed is lost")
        #expect(try await server.objects("Product")[ids[0]]?["price"] == 77)
        #expect(try device.products().find(ids[1]) == nil)
        try await device.expectConverged()
    }

    static func resets(_ server: any ConformanceServer) async throws {
        try await seed(server, 5)
        let device = try await device(server)
        try await device.engine.sync(models: ["Product"])
        try await device.engine.clientReset()
        #expect(try device.products().count() == 0)
        #expect(await device.engine.isLoggedIn)
        #expect(try await !device.engine.initialSyncComplete("Product"))
        try await device.engine.sync(models: ["Product"])
        try await device.expectConverged()

        try device.products().create(["object": "n1", "name": "Never pushed"])
        try await device.engine.fullResetAndLogout()
        #expect(try device.products().count() == 0)
        #expect(try device.store.pendingChanges().isEmpty)
        #expect(await !device.engine.isLoggedIn)
        await expectThrows(.notLoggedIn) { try await device.engine.sync(models: ["Product"]) }
        try await device.engine.logIn(server.credentials)
        try await device.engine.sync(models: ["Product"])
        #expect(try await server.objects("Product").count == 5)
        try await device.expectConverged()
    }

    static func fullResync(_ server: any ConformanceServer) async throws {
        let ids = try await seed(server, 6)
        let device = try await device(server)
        try await device.engine.sync(models: ["Product"])
        try await server.update("Product", ids[0], ["price": 60])
        try await server.delete("Product", ids[1])
        let report = try await device.engine.sync(models: ["Product"], mode: .full)
        #expect(report.pulled >= 5, "everything again")
        #expect(try device.products().find(ids[1]) == nil)
        try await device.expectConverged()
    }

    static func bulkSync(_ server: any ConformanceServer) async throws {
        let ids = try await seed(server, 6)
        let device = try await device(server)
        try await device.engine.sync(models: ["Product"])
        try device.products().update(ids[0], with: ["price": 500])
        try await server.update("Product", ids[2], ["price": 300])
        try await server.delete("Product", ids[3])
        try await device.engine.sync(models: ["Product"], mode: .bulk)
        #expect(try device.products().find(ids[0])?["price"] == 500)
        #expect(try device.products().find(ids[2])?["price"] == 300)
        #expect(try device.products().find(ids[3]) == nil)
        try await device.expectConverged()
    }

    static func secondDevice(_ server: any ConformanceServer) async throws {
        try await seed(server, 3)
        let first = try await device(server)
        let second = try await device(server)
        try first.client.model("Customer").create(["object": "c1", "name": "Bo"])
        try first.client.model("Order").create(["object": "o1", "customer": "c1", "total": 3])
        try await first.engine.sync()
        try await second.engine.sync()
        try await second.expectConverged(["Product", "Customer", "Order"])
        #expect(try second.client.objects("Order") == first.client.objects("Order"))
        let order = try #require(try second.client.model("Order").findAll().first)
        try second.client.model("Order").update(order.id, with: ["total": 4])
        try await second.engine.sync()
        try await first.engine.sync()
        #expect(try first.client.model("Order").find(order.id)?["total"] == 4)
        try await first.expectConverged(["Product", "Customer", "Order"])
    }

    /// An app logs in at every launch with the credentials it saved: the server must go on
    /// sending this device deltas (deletes, removed attributes), not treat it as a new device.
    static func reLoginKeepsDeltas(_ server: any ConformanceServer) async throws {
        let ids = try await seed(server, 4)
        var device = try await device(server)
        try await device.engine.sync(models: ["Product"])
        let clients = try await server.clientCount()
        #expect(clients.map { $0 == 1 } ?? true, "one client registered by the first sync")

        try await device.engine.logIn(server.credentials)
        try await server.delete("Product", ids[0])
        try await server.update("Product", ids[1], ["brand": .null])
        try await device.engine.sync(models: ["Product"])
        #expect(try device.products().find(ids[0]) == nil, "the server's delete arrived")
        #expect(try device.products().find(ids[1]).map { !$0.attributes.contains("brand") } == true, "the server's removal arrived")
        #expect(device.log.notifications(.userChanged).isEmpty)
        try await device.expectConverged()

        // Killed, restarted, logged out and in again: still the same client.
        try await device.restart()
        try await device.engine.logOut()
        #expect(await !device.engine.isLoggedIn)
        try await device.engine.logIn(server.credentials)
        try await server.delete("Product", ids[2])
        try await server.update("Product", ids[3], ["name": .null])
        try await device.engine.sync(models: ["Product"])
        #expect(try device.products().find(ids[2]) == nil, "the server's delete arrived after a logout and a login")
        #expect(try device.products().find(ids[3]).map { !$0.attributes.contains("name") } == true)
        #expect(try await server.clientCount() == clients, "no second client for the same device and user")
        try await device.expectConverged()
    }

    /// A local removal must remove the attribute from the server's own copy, not leave a `null`
    /// there for every other client to read, also when it is sent again after a conflict.
    static func removalIsAbsence(_ server: any ConformanceServer) async throws {
        let ids = try await seed(server, 2)
        let device = try await device(server)
        let products = try device.products()
        try await device.engine.sync(models: ["Product"])
        try products.update(ids[0], with: ["brand": .null, "price": 70])
        #expect(try await device.engine.sync(models: ["Product"]).refused == 0)
        let stored = try #require(try await server.storedObject("Product", ids[0]))
        #expect(!stored.contains("brand"), "the server keeps \(stored)")
        #expect(stored.contains("name") && stored.contains("price"))
        #expect(plain(try await server.objects("Product")[ids[0]], server) == ["name": "Product 1", "price": 70])
        try await device.expectConverged()

        // Removed here while the server changed another attribute.
        try await server.update("Product", ids[1], ["name": "Server name"])
        try products.update(ids[1], with: ["brand": .null])
        let report = try await device.engine.sync(models: ["Product"])
        // Made from an older version, but of another attribute: merged and sent again at once.
        #expect(report.refused == 0 && report.merged == (server.detectsConflicts ? 1 : 0))
        let second = try #require(try await server.storedObject("Product", ids[1]))
        #expect(!second.contains("brand"), "the server keeps \(second)")
        #expect(plain(try await server.objects("Product")[ids[1]], server) == ["name": "Server name", "price": 2])
        try await device.expectConverged()
    }

    /// What a device pushes is what the app wrote: the server's own copy of a created and of an
    /// updated object holds the app's attributes and the server's own fields, and no field of
    /// Satchel's (a client id, a marker) that every other client of the server would see.
    static func writesOnlyTheAppsAttributes(_ server: any ConformanceServer) async throws {
        let ids = try await seed(server, 1)
        let device = try await device(server)
        let products = try device.products()
        try await device.engine.sync(models: ["Product"])
        try products.create(["object": "w1", "name": "Written", "price": 5, "brand": "Acme"])
        try products.update(ids[0], with: ["price": 9, "brand": .null])
        let report = try await device.engine.sync(models: ["Product"])
        #expect(report.refused == 0)
        let created = report.serverIDs["Product"]?["w1"] ?? "w1"
        let made = try #require(try await server.storedObject("Product", created))
        #expect(Set(made.keys).subtracting(server.storedServerFields) == ["name", "price", "brand"], "the server keeps \(made)")
        let updated = try #require(try await server.storedObject("Product", ids[0]))
        #expect(Set(updated.keys).subtracting(server.storedServerFields) == ["name", "price"], "the server keeps \(updated)")
        #expect(plain(try await server.objects("Product")[created], server) == ["name": "Written", "price": 5, "brand": "Acme"])
        try await device.expectConverged()
    }

    /// A search asks the server (in what its query language can say) and answers exactly the
    /// server's objects that match the whole condition, under Satchel's semantics; it stores them
    /// only when asked, and never moves the model's cursor.
    static func searchByCondition(_ server: any ConformanceServer) async throws {
        let ids = try await seed(server, 8)
        let device = try await device(server)
        let engine = device.engine
        func found(_ condition: Condition, sourceLocation: SourceLocation = #_sourceLocation) async throws -> Set<String> {
            Set(try await engine.search("Product", where: condition).map(\.id))
        }
        // ids[i] is "Product \(i + 1)", price i + 1, brand Acme when i + 1 is even.
        #expect(try await found("brand" == "Acme" && "price" >= 4) == [ids[3], ids[5], ids[7]])
        #expect(try await found("price" < 3 || "name" == "Product 8") == [ids[0], ids[1], ids[7]])
        #expect(try await found(!("brand" == "Acme")) == [ids[0], ids[2], ids[4], ids[6]])
        #expect(try await found(Field("name").beginsWith("Product 1")) == [ids[0]])
        #expect(try await found(Field("name").contains("uct 7")) == [ids[6]])
        #expect(try await found(Field("price").isIn([2, 5])) == [ids[1], ids[4]])
        #expect(try await found("brand" == "acme").isEmpty, "strings compare by their bytes, whatever the server's collation")
        #expect(try await found(.all) == Set(ids))
        #expect(try device.products().count() == 0, "nothing stored")
        let stored = try await engine.search("Product", where: "price" > 6, storing: true)
        #expect(Set(stored.map(\.id)) == [ids[6], ids[7]])
        #expect(Set(try device.products().findAll().map(\.id)) == [ids[6], ids[7]])
        #expect(try await !engine.initialSyncComplete("Product"), "the cursor did not move")
        #expect(try await engine.sync(models: ["Product"]).pulled == 8)
        try await device.expectConverged()
    }

    /// The drift check compares the store with the server's own copy, changing neither: what the
    /// server changed behind the device's back is drift; what the device changed and has not
    /// pushed is not.
    static func driftCheck(_ server: any ConformanceServer) async throws {
        let ids = try await seed(server, 4)
        let device = try await device(server)
        try await device.engine.sync(models: ["Product"])
        let clean = try await device.engine.verify("Product")
        #expect(clean.agrees && clean.objects == 4 && clean.unconfirmed == 0, "\(clean)")
        try await server.update("Product", ids[0], ["price": 100])
        try await server.delete("Product", ids[1])
        let added = try await server.put("Product", ["name": "Product 9", "price": 9], id: "p9")
        try device.products().update(ids[2], with: ["price": 33])
        try device.products().create(["object": "n1", "name": "New"])
        let report = try await device.engine.verify("Product")
        let drifts = Dictionary(uniqueKeysWithValues: report.drifts.map { ($0.id, $0) })
        #expect(drifts.count == 3, "\(report.drifts)")
        #expect(drifts[ids[0]]?.kind == .differs && drifts[ids[0]]?.attributes["price"] == DriftReport.Values(here: 1, there: 100))
        #expect(drifts[ids[1]]?.kind == .onlyHere)
        #expect(drifts[added]?.kind == .onlyThere && drifts[added]?.there?["name"] == "Product 9")
        #expect(report.unconfirmed == 2 && !report.agrees, "the update and the create are local changes, not drift")
        #expect(try device.products().find(ids[0])?["price"] == 1 && device.products().pendingChanges().count == 2, "the store is as it was")
        try await device.engine.sync(models: ["Product"])
        try await device.expectConverged()
    }

    /// Another user logs in on the same store: the first user's data must not stay (RhoConnect
    /// wipes it unless the app says otherwise), after a logout too; models that never sync stay.
    static func anotherUser(_ server: any ConformanceServer) async throws {
        try await seed(server, 3)
        let device = try await device(server)
        let settings = try device.client.model("Setting")
        try await device.engine.sync(models: ["Product"])
        try settings.create(["object": "s1", "theme": "dark"])
        try device.products().create(["object": "draft", "name": "Not pushed"])

        try await device.engine.logIn(server.otherCredentials)
        #expect(try device.products().count() == 0, "none of the first user's objects stays")
        #expect(try device.products().pendingChanges().isEmpty, "nor their changes")
        #expect(try settings.find("s1")?["theme"] == "dark", "a local model is kept")
        #expect(try await !device.engine.initialSyncComplete("Product"))
        #expect(device.log.notifications(.userChanged).count == 1, "the app is told")
        try await device.engine.sync()
        #expect(try await serverObjects(server, "Product", where: "name", is: "Not pushed").isEmpty, "not pushed as the other user's")
        try await device.expectConverged(["Product", "Customer", "Order"], user: server.otherCredentials)

        // Back to the first user, who logs out; the other logs in again.
        try await device.engine.logIn(server.credentials)
        try await device.engine.sync()
        try await device.expectConverged(["Product", "Customer", "Order"])
        try await device.engine.logOut()
        try await device.engine.logIn(server.otherCredentials)
        #expect(try device.products().count() == 0, "a logout does not hand the data to the next user")
        #expect(device.log.notifications(.userChanged).count == 3)
        #expect(try settings.count() == 1)
        try await device.engine.sync()
        try await device.expectConverged(["Product"], user: server.otherCredentials)
    }
}
