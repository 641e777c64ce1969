import Foundation
import LoopbackSupport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import ParseTestServer
import Satchel
import SatchelParse
import SatchelSync
import SatchelSyncTesting
import Testing

/// The Parse adapter against the loopback Parse Server: each bullet of the wire contract, as
/// the server sees it (its request log and its own data), not only as the adapter reports it.
// One test at a time: each starts a loopback server, whose socket pool holds a Dispatch thread
// in epoll_wait while it runs. Every such test at once, beside the other suites, reached
// Dispatch's limit of threads in full runs: URLSession's queues got none, and clients timed out.
@Suite("Parse adapter", .serialized)
struct ParseBackendTests {
    static let customer = ModelDefinition(name: "Customer")
    static let order = ModelDefinition(name: "Order", associations: ["customer": "Customer", "items": "Product"])
    static let product = ModelDefinition(name: "Product")

    /// A started server and a device logged in as ann, through a fault injector.
    struct Setup {
        let server: ParseServer
        var device: SyncClient
        let faults: FaultyBackend

        init(
            _ fixture: ParseFixture = ParseFixture(), models: [ModelDefinition] = [ParseBackendTests.product], pageSize: Int = 5,
            backend: ((ParseServer) -> ParseBackend)? = nil, retry: RetryPolicy = RetryPolicy(maxAttempts: 1)
        ) async throws {
            server = try await ParseServer.start(fixture)
            faults = FaultyBackend(backend?(server) ?? ParseBackend.forTests(server))
            device = try SyncClient(backend: faults, models: models, pageSize: pageSize, retry: retry)
            await device.record()
            try await device.engine.logIn(Credentials(user: "ann", password: "secret"))
        }

        func model(_ name: String) throws -> Model { try device.model(name) }

        /// The requests to `path` (under the mount) the server received.
        func requests(_ method: String, _ path: String) async -> [ParseServer.Request] {
            await server.requests.filter { $0.method == method && $0.path == "/parse/" + path }
        }

        /// The server's object, as it keeps it.
        func stored(_ className: String, _ id: String) async throws -> JSONObject? {
            try await server.objects(className)[id].map { try JSONObject(parsing: $0) }
        }

        /// The bodies of the batch requests the server received, in order.
        func batchRequests() async throws -> [JSONObject] {
            try await requests("POST", "batch").flatMap { request in
                try (JSONValue(parsing: request.body)["requests"]?.arrayValue ?? []).compactMap(\.objectValue)
            }
        }

        /// Asserts the store holds the server's objects of `className` as a device reads them,
        /// with nothing pending, and is healthy.
        /// Objects `ignoring` (kept here by a refused change) are left out.
        func expectMatchesServer(_ className: String, ignoring: Set<String> = [], sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let remote = try await server.objects(className).mapValues { ParseWire.local(try JSONObject(parsing: $0)) }
            let local = try device.objects(className).filter { !ignoring.contains($0.key) }
            #expect(local == remote, sourceLocation: sourceLocation)
            #expect(try device.store.pendingChanges().filter { !ignoring.contains($0.objectID) }.isEmpty, sourceLocation: sourceLocation)
            #expect(try device.store.verify().problems == [], sourceLocation: sourceLocation)
        }

        func stop() async { await server.stop() }
    }

    static func json(_ object: JSONObject) -> Data { Data(object.jsonBytes) }

    @Test("a first sync sends the app's headers, orders by (updatedAt, objectId), and keeps createdAt and updatedAt as sent")
    func firstSync() async throws {
        let setup = try await Setup()
        defer { Task { await setup.stop() } }
        for i in 1...12 { _ = await setup.server.put("Product", Self.json(["name": .string("P\(i)"), "price": .int(Int64(i))]), id: nil) }
        let report = try await setup.device.engine.sync(models: ["Product"])
        #expect(report.pulled == 12)
        let queries = await setup.requests("GET", "classes/Product")
        let pages = queries.filter { $0.query["keys"] != "objectId" }
        #expect(pages.count == 4, "12 objects in pages of 5, then an empty page")
        #expect(pages.allSatisfy { $0.query["order"] == "updatedAt,objectId" && $0.query["skip"] == nil && $0.query["limit"] == "5" })
        #expect(pages.first?.query["where"] == nil)
        #expect(pages.dropFirst().allSatisfy { $0.query["where"]?.contains("\"$or\"") == true })
        #expect(queries.contains { $0.query["keys"] == "objectId" }, "the ids are listed for deletions")
        for request in await setup.server.requests {
            #expect(request.headers["x-parse-application-id"] == setup.server.appID)
            #expect(request.headers["x-parse-rest-api-key"] == setup.server.restKey)
            if request.path != "/parse/login" { #expect(request.headers["x-parse-session-token"]?.hasPrefix("r:") == true) }
        }
        for (id, data) in await setup.server.objects("Product") {
            let stored = try JSONObject(parsing: data)
            let local = try #require(try setup.model("Product").find(id))
            #expect(local["createdAt"] == stored["createdAt"] && local["updatedAt"] == stored["updatedAt"])
        }
        try await setup.expectMatchesServer("Product")
    }

    @Test("objects sharing one updatedAt across pages, under a server that clamps limit, are neither lost nor repeated")
    func tiesUnderClampedLimit() async throws {
        let setup = try await Setup(pageSize: 10)
        defer { Task { await setup.stop() } }
        await setup.server.freezeClock("2026-01-02T03:04:05.678Z")
        for i in 1...23 { _ = await setup.server.put("Product", Self.json(["n": .int(Int64(i))]), id: nil) }
        await setup.server.setMaxLimit(4)
        let report = try await setup.device.engine.sync(models: ["Product"])
        #expect(report.pulled == 23)
        #expect(Set(setup.device.log.objects("Product").created).count == 23)
        #expect(setup.device.log.objects("Product").created.count == 23, "each object once")
        let pages = await setup.requests("GET", "classes/Product").filter { $0.query["keys"] != "objectId" }
        #expect(pages.count == 7, "6 clamped pages of at most 4, then an empty one")
        // A later write is seen.
        await setup.server.freezeClock(nil)
        _ = await setup.server.put("Product", Self.json(["n": 24]), id: nil)
        #expect(try await setup.device.engine.sync(models: ["Product"]).pulled == 1)
        try await setup.expectMatchesServer("Product")
    }

    @Test("a new Order pointing at a new Customer and new Products is pushed in one sync: parents first, pointers to the server's ids")
    func parentsFirst() async throws {
        let setup = try await Setup(models: [Self.customer, Self.order, Self.product])
        defer { Task { await setup.stop() } }
        try setup.model("Customer").create(["object": "c-local", "name": "Ann"])
        try setup.model("Product").create(["object": "p-local", "name": "Lamp"])
        try setup.model("Order").create(["object": "o-local", "customer": "c-local", "items": ["p-local"], "total": 12])
        let report = try await setup.device.engine.sync()
        #expect(report.refused == 0 && report.accepted == 3)
        let customerID = try #require(report.serverIDs["Customer"]?["c-local"])
        let productID = try #require(report.serverIDs["Product"]?["p-local"])
        let orderID = try #require(report.serverIDs["Order"]?["o-local"])
        let order = try #require(try await setup.stored("Order", orderID))
        #expect(order["customer"] == ["__type": "Pointer", "className": "Customer", "objectId": .string(customerID)])
        #expect(order["items"] == [["__type": "Pointer", "className": "Product", "objectId": .string(productID)]])
        // The order's create went after the customer's and the product's (each create its own request).
        let creates = await setup.server.requests.filter { $0.method == "POST" && $0.path.hasPrefix("/parse/classes/") }.map(\.path)
        let orderCreate = try #require(creates.firstIndex(of: "/parse/classes/Order"))
        #expect(try #require(creates.firstIndex(of: "/parse/classes/Customer")) < orderCreate)
        #expect(try #require(creates.firstIndex(of: "/parse/classes/Product")) < orderCreate)
        #expect(try setup.model("Order").find(orderID)?["customer"] == .string(customerID))
        #expect(try setup.model("Order").find(orderID)?["items"] == [.string(productID)])
        try await setup.expectMatchesServer("Order")
        try await setup.expectMatchesServer("Customer")
    }

    @Test(
        "new objects pointing at themselves or at each other are pushed in one sync: one created without its pointers, which follow in a batch PUT (found by a black-box probe: they stayed pending in silence)"
    )
    func pointerCycles() async throws {
        let node = ModelDefinition(name: "Node", associations: ["next": "Node"])
        let setup = try await Setup(models: [node])
        defer { Task { await setup.stop() } }
        try setup.model("Node").create(["object": "me", "name": "Me", "next": "me"])
        try setup.model("Node").create(["object": "x", "name": "X", "next": "y"])
        try setup.model("Node").create(["object": "y", "name": "Y", "next": "x"])
        let report = try await setup.device.engine.sync()
        #expect(report.refused == 0, "\(report)")
        let ids = try #require(report.serverIDs["Node"])
        func pointer(_ local: String) -> JSONValue { ["__type": "Pointer", "className": "Node", "objectId": .string(ids[local] ?? "?")] }
        for (local, target) in [("me", "me"), ("x", "y"), ("y", "x")] {
            #expect(try await setup.stored("Node", ids[local] ?? "?")?["next"] == pointer(target), "\(local)")
        }
        #expect(try setup.device.store.changeFates(model: "Node").isEmpty)
        try await setup.expectMatchesServer("Node")
    }

    @Test("a bulk sync against Parse, which has no bulk snapshot, says it pulls incrementally (a black-box probe: nothing said)")
    func bulkSaid() async throws {
        let setup = try await Setup(models: [ModelDefinition(name: "Product")])
        defer { Task { await setup.stop() } }
        _ = await setup.server.put("Product", Self.json(["name": "A"]), id: nil)
        let report = try await setup.device.engine.sync(mode: .bulk)
        #expect(report.pulled == 1)
        #expect(setup.device.log.notifications().contains { $0.message?.contains("no bulk snapshot") == true }, "\(setup.device.log.notifications())")
    }

    @Test(
        "an update or delete of an object this user may read but not change (its ACL) is refused with the server's copy, not taken for one the server deleted (a black-box probe: a rollback dropped it, a retry made it twice)"
    )
    func readOnlyObject() async throws {
        let setup = try await Setup(models: [ModelDefinition(name: "Product")])
        defer { Task { await setup.stop() } }
        let readOnly: JSONObject = ["*": ["read": true]]
        let a = await setup.server.put("Product", Self.json(["name": "A", "ACL": .object(readOnly)]), id: nil)
        let b = await setup.server.put("Product", Self.json(["name": "B", "ACL": .object(readOnly)]), id: nil)
        try await setup.device.engine.sync()
        let products = try setup.model("Product")
        try products.update(a, with: ["name": "A2"])
        try products.delete(b)
        #expect(try await setup.device.engine.sync().refused == 2)
        let refusals = Dictionary(uniqueKeysWithValues: try setup.device.store.refusedChanges(model: "Product").map { ($0.objectID, $0) })
        #expect(refusals[a]?.code == "101" && refusals[a]?.serverDeleted == false && refusals[a]?.serverCopy?["name"] == "A", "\(refusals)")
        #expect(refusals[b]?.kind == .delete && refusals[b]?.serverDeleted == false, "\(refusals)")
        try setup.device.store.resolve("Product", a, .rollback)
        #expect(try products.find(a)?["name"] == "A")
        try await setup.device.engine.sync()
        #expect(await setup.server.objects("Product").count == 2, "nothing made twice")
    }

    @Test("a field the server retypes from Pointer to String is no association any more: edits go as strings (a black-box probe: refused with 111)")
    func pointerRetyped() async throws {
        let setup = try await Setup(models: [Self.customer, ModelDefinition(name: "Thing")])
        defer { Task { await setup.stop() } }
        let customer = await setup.server.put("Customer", Self.json(["name": "Ann"]), id: nil)
        let pointer: JSONObject = ["__type": "Pointer", "className": "Customer", "objectId": .string(customer)]
        let id = await setup.server.put("Thing", Self.json(["owner": .object(pointer)]), id: nil)
        try await setup.device.engine.sync()
        #expect(setup.device.store.models.first { $0.name == "Thing" }?.associations == ["owner": "Customer"])
        await setup.server.dropField("Thing", "owner")
        await setup.server.update("Thing", id, Self.json(["owner": "Carol (free text)"]))
        try await setup.device.engine.sync()
        #expect(setup.device.store.models.first { $0.name == "Thing" }?.associations == [:])
        try setup.model("Thing").update(id, with: ["owner": "Dave", "n": 2])
        let report = try await setup.device.engine.sync()
        #expect(report.refused == 0, "\(report)")
        let stored = try #require(try await setup.stored("Thing", id))
        #expect(stored["owner"] == "Dave" && stored["n"] == 2, "\(stored)")
    }

    @Test(
        "an object the server deleted while it was edited here, retried, is made again under a new objectId: the synced objects pointing at it point at the new one on the server too (found by a black-box probe: the rewrite stayed here)"
    )
    func referencesFollowARetriedObject() async throws {
        let setup = try await Setup(models: [Self.customer, ModelDefinition(name: "Thing")])
        defer { Task { await setup.stop() } }
        let customer = await setup.server.put("Customer", Self.json(["name": "Ann"]), id: nil)
        let pointer: JSONObject = ["__type": "Pointer", "className": "Customer", "objectId": .string(customer)]
        let thing = await setup.server.put("Thing", Self.json(["owner": .object(pointer), "n": 1]), id: nil)
        try await setup.device.engine.sync()
        await setup.server.delete("Customer", customer)
        try setup.model("Customer").update(customer, with: ["name": "Ann B"])
        #expect(try await setup.device.engine.sync().refused == 1)
        try setup.device.store.resolve("Customer", customer, .retry)
        let report = try await setup.device.engine.sync()
        let made = try #require(report.serverIDs["Customer"]?[customer])
        #expect(try setup.model("Thing").find(thing)?["owner"] == .string(made))
        let stored = try #require(try await setup.stored("Thing", thing))
        #expect(stored["owner"]?["objectId"] == .string(made), "\(stored)")
        try await setup.expectMatchesServer("Thing")
    }

    @Test("every __type round-trips: pulled as the contract says, pushed back in the type the server gave it")
    func typeRoundTrip() async throws {
        let setup = try await Setup(models: [Self.customer, ModelDefinition(name: "Thing")])
        defer { Task { await setup.stop() } }
        let customerID = await setup.server.put("Customer", Self.json(["name": "Ann"]), id: nil)
        let upload = try await Self.uploadFile(setup.server, name: "a.txt", bytes: Data("hello".utf8))
        let thing: JSONObject = [
            "due": ["__type": "Date", "iso": "2026-03-04T05:06:07.089Z"],
            "owner": ["__type": "Pointer", "className": "Customer", "objectId": .string(customerID)],
            "file": ["__type": "File", "name": .string(upload.name), "url": .string(upload.url)],
            "raw": ["__type": "Bytes", "base64": "aGVsbG8="],
            "where": ["__type": "GeoPoint", "latitude": 40.0, "longitude": -30.0],
            "area": ["__type": "Polygon", "coordinates": [[0, 0], [0, 1], [1, 1]]],
            "fans": ["__type": "Relation", "className": "Customer"],
            "ACL": ["*": ["read": true, "write": true]],
            "n": 1,
        ]
        let id = await setup.server.put("Thing", Self.json(thing), id: nil)
        try await setup.device.engine.sync()
        let things = try setup.model("Thing")
        let local = try #require(try things.find(id))
        #expect(local["due"] == "2026-03-04T05:06:07.089Z")
        #expect(local["owner"] == .string(customerID))
        #expect(local["raw"] == thing["raw"] && local["where"] == thing["where"] && local["area"] == thing["area"])
        #expect(local["fans"] == thing["fans"] && local["ACL"] == thing["ACL"])
        let definition = try #require(setup.device.store.models.first { $0.name == "Thing" })
        #expect(definition.associations == ["owner": "Customer"])
        #expect(definition.blobAttributes == ["file"])
        let reference = try #require(local["file"]?.stringValue)
        #expect(try setup.device.store.blobs.data(for: reference) == Data("hello".utf8), "the file's bytes were downloaded")

        // Changed here: each goes back in its type; untouched ones stay as they were there.
        let other = await setup.server.put("Customer", Self.json(["name": "Bob"]), id: nil)
        // A day alone goes as its midnight in UTC (a black-box probe: it went verbatim).
        try things.update(id, with: ["due": "2027-01-01", "owner": .string(other), "n": 2, "raw": .null])
        let pushed = try await setup.device.engine.sync()
        let errors = try setup.device.store.refusedChanges()
        let fates = try setup.device.store.changeFates(model: "Thing")
        #expect(pushed.accepted == 1 && pushed.refused == 0, "\(errors) \(pushed) \(fates) \(setup.device.log.notifications())")
        let stored = try #require(try await setup.stored("Thing", id))
        #expect(stored["due"] == ["__type": "Date", "iso": "2027-01-01T00:00:00.000Z"])
        #expect(stored["owner"] == ["__type": "Pointer", "className": "Customer", "objectId": .string(other)])
        #expect(stored["n"] == 2 && stored["raw"] == nil)
        #expect(stored["where"] == thing["where"] && stored["fans"] == thing["fans"] && stored["file"]?["name"] == .string(upload.name))
        let update = try #require(try await setup.batchRequests().last { $0["method"] == "PUT" })
        #expect(update["body"]?["raw"] == ["__op": "Delete"], "a removed attribute is a Delete op")
        #expect(update["body"]?["createdAt"] == nil && update["body"]?["updatedAt"] == nil)

        // A new object with a file made here: the bytes are uploaded, the File points at them.
        let blob = try setup.device.store.blobs.put(Data("local bytes".utf8))
        // A time with an offset goes in UTC.
        try things.create(["object": "t-local", "due": "2028-02-02T02:00:00+02:00", "file": .string(blob)])
        let report = try await setup.device.engine.sync(models: ["Thing"])
        let newID = try #require(report.serverIDs["Thing"]?["t-local"])
        let created = try #require(try await setup.stored("Thing", newID))
        #expect(created["due"] == ["__type": "Date", "iso": "2028-02-02T00:00:00.000Z"])
        let file = try #require(created["file"]?.objectValue)
        #expect(file["__type"] == "File")
        let name = try #require(file["name"]?.stringValue)
        #expect(await setup.server.fileNames.contains(name))
        let url = try #require(file["url"]?.stringValue.flatMap(URL.init(string:)))
        let bytes = try await URLSession.shared.data(from: url).0
        #expect(bytes == Data("local bytes".utf8))
    }

    @Test(
        "files on another host (a CDN) are downloaded without the app's headers or the session token; one it no longer has (404) is kept as its URL with an error line, and the model's later changes still arrive (black-box probes: all three credentials were sent; every later sync failed)"
    )
    func filesElsewhere() async throws {
        let cdn = try await HostileServer.start(["/files/a.txt": .json("hello"), "/files/denied.txt": .status(403, "AccessDenied")])
        var fixture = ParseFixture()
        fixture.filesLocation = cdn.url.absoluteString + "/files/"
        let setup = try await Setup(fixture, models: [ModelDefinition(name: "Thing")])
        defer {
            Task {
                await setup.stop()
                await cdn.stop()
            }
        }
        let gone = await setup.server.put("Thing", Self.json(["file": ["__type": "File", "name": "gone.txt"], "n": 1]), id: nil)
        // A file store's 403 (S3 answers it for a missing file) is as permanent as a 404 (found
        // by a black-box probe: it failed every sync, said as a refused application id).
        let denied = await setup.server.put("Thing", Self.json(["file": ["__type": "File", "name": "denied.txt"], "n": 1]), id: nil)
        let kept = await setup.server.put("Thing", Self.json(["file": ["__type": "File", "name": "a.txt"], "n": 1]), id: nil)
        try await setup.device.engine.sync()
        let things = try setup.model("Thing")
        let reference = try #require(try things.find(kept)?["file"]?.stringValue)
        #expect(try setup.device.store.blobs.data(for: reference) == Data("hello".utf8))
        #expect(cdn.requestsReceived == 3)
        #expect(try things.find(denied)?["file"] == .string(cdn.url.absoluteString + "/files/denied.txt"))
        #expect(!setup.device.log.notifications().contains { $0.message?.contains("application id") == true })
        #expect(cdn.requestsWithCredentials == 0, "the CDN got X-Parse-Application-Id, the REST key or the session token")
        #expect(try things.find(gone)?["file"] == .string(cdn.url.absoluteString + "/files/gone.txt"), "kept as its URL")
        #expect(setup.device.log.notifications().contains { $0.status == .error && $0.message?.contains("HTTP 404") == true })
        await setup.server.update("Thing", gone, Self.json(["n": 2]))
        try await setup.device.engine.sync()
        #expect(try things.find(gone)?["n"] == 2)
    }

    @Test(
        "a value that is no file in a File attribute, or no date in a Date one, is refused here and not sent as a File or Date naming nothing; later syncs go on (found by a black-box probe: the fake File failed every later sync)"
    )
    func valuesTheServersTypesCannotHold() async throws {
        let setup = try await Setup(models: [ModelDefinition(name: "Doc")])
        defer { Task { await setup.stop() } }
        let upload = try await Self.uploadFile(setup.server, name: "a.txt", bytes: Data("hello".utf8))
        let file: JSONValue = ["__type": "File", "name": .string(upload.name), "url": .string(upload.url)]
        let id = await setup.server.put(
            "Doc", Self.json(["att": file, "when": ["__type": "Date", "iso": "2020-01-01T00:00:00.000Z"], "n": 1]), id: nil)
        try await setup.device.engine.sync()
        let docs = try setup.model("Doc")
        let before = try #require(try await setup.stored("Doc", id))

        try docs.update(id, with: ["att": "just a string"])
        try docs.create(["object": "d2", "when": "not a date", "n": 2])
        try docs.create(["object": "d3", "att": "blob:0000000000000000000000000000000000000000000000000000000000000000-3", "n": 3])
        try docs.create(["object": "d4", "when": "2026-01-31T09:30:00Z", "att": .string(upload.url), "n": 4])
        let report = try await setup.device.engine.sync()
        #expect(report.refused == 3 && report.accepted == 1, "\(report)")
        let refusals = try setup.device.store.refusedChanges()
        #expect(refusals.allSatisfy { $0.code == "mistyped" }, "\(refusals)")
        #expect(refusals.contains { $0.message.contains("not a file") } && refusals.contains { $0.message.contains("not a date") })
        #expect(try await setup.stored("Doc", id) == before, "the server's object unchanged")
        let stored = await setup.server.objects("Doc")
        #expect(stored.count == 2, "only d4 was created")
        #expect(try await setup.batchRequests().allSatisfy { !$0.description.contains("just a string") && !$0.description.contains("not a date") })

        // Rolled back, the model syncs on.
        for refusal in refusals {
            try setup.device.store.resolve("Doc", refusal.objectID, refusal.kind == .create ? .delete : .rollback)
        }
        #expect(try docs.find(id)?["att"] != "just a string")
        await setup.server.update("Doc", id, Self.json(["n": 5]))
        try await setup.device.engine.sync()
        #expect(try docs.find(id)?["n"] == 5)

        // A File whose url is no URL (a server other than Parse's own) is kept as it is, not
        // downloaded: a download would fail every sync of the model.
        let later = "2030-01-01T00:00:00.000Z"
        let odd: JSONObject = [
            "objectId": .string(id), "createdAt": .string(later), "updatedAt": .string(later), "n": 6,
            "att": ["__type": "File", "name": "n", "url": "just a string"],
        ]
        await setup.server.sabotageNext("GET", "/parse/classes/Doc", body: Self.json(["results": [.object(odd)]]))
        try await setup.device.engine.sync()
        #expect(try docs.find(id)?["att"] == "just a string")
        #expect(try docs.find(id)?["n"] == 6)
    }

    @Test(
        "an update of nothing but createdAt or updatedAt is refused, not sent as an empty PUT that only moves updatedAt; rollback restores it (found by a black-box probe)"
    )
    func updateOfServerFields() async throws {
        let setup = try await Setup()
        defer { Task { await setup.stop() } }
        let id = await setup.server.put("Product", Self.json(["name": "P"]), id: nil)
        try await setup.device.engine.sync()
        let products = try setup.model("Product")
        let before = try #require(try products.find(id))
        let stored = try await setup.stored("Product", id)
        try products.update(id, with: ["updatedAt": "2000-01-01T00:00:00.000Z"])
        let report = try await setup.device.engine.sync()
        #expect(report.refused == 1 && report.accepted == 0, "\(report)")
        #expect(try await setup.batchRequests().isEmpty, "nothing was sent")
        #expect(try await setup.stored("Product", id) == stored)
        let error = try #require(try setup.device.store.refusedChanges(model: "Product").first)
        #expect(error.code == "readOnly" && error.message.hasPrefix("updatedAt: kept by Parse"), "\(error.message)")
        try setup.device.store.resolve("Product", id, .rollback)
        #expect(try products.find(id) == before)
        // A create carrying an attribute objectId is refused, not sent without it (found by a
        // black-box probe: the next pull then took the value away).
        try products.create(["object": "local", "objectId": "my-ref", "name": "Q"])
        #expect(try await setup.device.engine.sync().refused == 1)
        let refused = try #require(try setup.device.store.refusedChanges(model: "Product").first { $0.objectID == "local" })
        #expect(refused.code == "readOnly" && refused.message.hasPrefix("objectId"), "\(refused.message)")
        #expect(try products.find("local")?["objectId"] == "my-ref")
        // So is an update carrying one beside other attributes (a black-box probe: sent
        // without it, and the next pull took the value away unsaid).
        try products.update(id, with: ["objectId": "mine", "name": "R"])
        #expect(try await setup.device.engine.sync().refused == 1)
        let update = try #require(try setup.device.store.refusedChanges(model: "Product").first { $0.objectID == id })
        #expect(update.code == "readOnly" && update.message.hasPrefix("objectId"), "\(update.message)")
        #expect(try products.find(id)?["objectId"] == "mine" && products.find(id)?["name"] == "R")
        #expect(try await setup.stored("Product", id)?["name"] == stored?["name"], "nothing of it was sent")
    }

    @Test(
        "a backup restored after a sync pushed its pending create: the next sync finds the object that push made instead of making it twice (found by a black-box probe)"
    )
    func restoredCreateNotMadeTwice() async throws {
        let setup = try await Setup(.idempotent)
        defer { Task { await setup.stop() } }
        try await setup.device.engine.sync()
        try setup.model("Product").create(["object": "local-1", "name": "Once"])
        let backup = setup.device.storePath + ".backup"
        try setup.device.store.backup(to: backup)
        try await setup.device.engine.sync()
        #expect(await setup.server.objects("Product").count == 1)
        try setup.device.store.close()
        try Store.restore(from: backup, to: setup.device.storePath)
        let restored = try SyncClient(backend: ParseBackend.forTests(setup.server), models: [Self.product], storePath: setup.device.storePath)
        try await restored.engine.sync()
        let names = try await setup.server.objects("Product").values.compactMap { try JSONObject(parsing: $0)["name"]?.stringValue }
        #expect(names == ["Once"], "made once")
        #expect(try restored.model("Product").findAll().map { $0["name"] } == ["Once"])
        #expect(try restored.store.pendingChanges().isEmpty)
    }

    @Test(
        "a value Parse would read as its own (an object with __op or __type, at any depth) or a name with a dot (a path to Parse) is refused here, not sent and changed by the next pull (found by a black-box probe)"
    )
    func valuesParseWouldRead() async throws {
        let setup = try await Setup()
        defer { Task { await setup.stop() } }
        let products = try setup.model("Product")
        let id = await setup.server.put("Product", Self.json(["name": "P", "op": 5]), id: nil)
        try await setup.device.engine.sync()
        let stored = try #require(try await setup.stored("Product", id))
        let cases: [(id: String, attributes: JSONObject, refused: String)] = [
            ("increment", ["name": "I", "op": ["__op": "Increment", "amount": 5]], "op"),
            ("unset", ["name": "U", "gone": ["__op": "Delete"]], "gone"),
            ("date", ["name": "D", "when": ["__type": "Date", "iso": "2020-01-01T00:00:00.000Z"]], "when"),
            ("deep", ["name": "N", "list": [1, ["inner": ["__op": "Delete"]]]], "list"),
            ("pointer", ["name": "Q", "ref": ["__type": "Pointer", "className": "Product", "objectId": "x"]], "ref"),
            ("dotted", ["name": "T", "a.b": 2], "a.b"),
            ("pointers", ["name": "R", "refs": [["__type": "Pointer", "className": "Tag", "objectId": "t1"]]], "refs"),
            ("objects", ["name": "O", "objs": [["__type": "Object", "className": "Tag", "objectId": "t2", "name": "z"]]], "objs"),
        ]
        for item in cases {
            var attributes = item.attributes
            attributes["object"] = .string(item.id)
            try products.create(attributes)
        }
        try products.update(id, with: ["op": ["__op": "Increment", "amount": 100]])
        let report = try await setup.device.engine.sync()
        #expect(report.refused == cases.count + 1 && report.accepted == 0, "\(report)")
        #expect(await setup.server.objects("Product").count == 1, "no create was sent")
        #expect(try await setup.stored("Product", id) == stored, "the update was not sent")
        let refusals = try setup.device.store.refusedChanges(model: "Product")
        for item in cases + [(id, ["op": 5], "op")] {
            let refusal = try #require(refusals.first { $0.objectID == item.id }, "\(item.id)")
            #expect(refusal.code == "reserved" && refusal.message.hasPrefix(item.refused + ": "), "\(refusal.message)")
        }
        // Each stays here as written.
        for item in cases { #expect(try products.find(item.id)?.attributes == item.attributes) }
        #expect(try products.find(id)?["op"] == ["__op": "Increment", "amount": 100])
        // A plain value of the same names goes, and so do the types that come back as they went
        // (a GeoPoint) and wrappers inside a value.
        try setup.device.store.resolve("Product", id, .rollback)
        let point: JSONValue = ["__type": "GeoPoint", "latitude": 40.0, "longitude": -30.0]
        let nested: JSONValue = ["at": ["__type": "Date", "iso": "2020-01-01T00:00:00.000Z"]]
        let mixed: JSONValue = [["__type": "Pointer", "className": "Tag", "objectId": "t1"], 3]
        try products.update(id, with: ["op": 6, "where": point, "meta": nested, "mixed": mixed])
        #expect(try await setup.device.engine.sync().accepted == 1)
        #expect(try await setup.stored("Product", id)?["op"] == 6)
        #expect(try products.find(id)?["where"] == point && products.find(id)?["meta"] == nested, "as written, after the pull")
        #expect(try products.find(id)?["mixed"] == mixed, "as written, after the pull")
    }

    @Test(
        "search of what Parse's where cannot say (a member of an array of pointers, a Date's prefix, a path into arrays) finds exactly what find finds here, never a 400 or an empty answer (found by a black-box probe)"
    )
    func searchesParseCannotSay() async throws {
        let setup = try await Setup(models: [Self.product, Self.order])
        defer { Task { await setup.stop() } }
        let p1 = await setup.server.put("Product", Self.json(["name": "P1"]), id: nil)
        let p2 = await setup.server.put("Product", Self.json(["name": "P2"]), id: nil)
        func pointer(_ id: String) -> JSONValue { ["__type": "Pointer", "className": "Product", "objectId": .string(id)] }
        let o1 = await setup.server.put(
            "Order",
            Self.json([
                "items": [pointer(p1), pointer(p2)], "when": ["__type": "Date", "iso": "2025-05-02T10:00:00.000Z"],
                "lines": [["p": "y", "n": 1]],
            ]), id: nil)
        _ = await setup.server.put(
            "Order",
            Self.json(["items": [pointer(p1)], "when": ["__type": "Date", "iso": "2024-01-01T00:00:00.000Z"], "lines": [["p": "z"]]]), id: nil)
        try await setup.device.engine.sync()
        let orders = try setup.model("Order")
        let conditions: [Condition] = [
            Field("items").contains(.string(p2)), Field("when").beginsWith("2025-05"), Field("lines[].p") == "y",
            Field("when").beginsWith("2025") && Field("items").contains(.string(p1)),
        ]
        for condition in conditions {
            let here = try orders.findAll(Query(where: condition)).map(\.id)
            #expect(here == [o1], "\(condition)")
            let found = try await setup.device.engine.search("Order", where: condition)
            #expect(found.map(\.id) == here, "\(condition)")
        }
        let wheres = await setup.requests("GET", "classes/Order").compactMap { $0.query["where"] }
        #expect(wheres.allSatisfy { !$0.contains("$regex") && !$0.contains("[]") }, "\(wheres)")
    }

    @Test(
        "search of negations (!=, not) over values the server holds in arrays finds what find finds, and a dotted path meeting an array is refused as find refuses it (found by a black-box probe: MongoDB's element matching dropped objects)"
    )
    func searchNegationsOverArrays() async throws {
        let setup = try await Setup(models: [Self.product])
        defer { Task { await setup.stop() } }
        for value: JSONValue in [1, [1, 2], ["ab", "c"], "x", ["p": "x"]] { _ = await setup.server.put("Product", Self.json(["v": value]), id: nil) }
        try await setup.device.engine.sync()
        let products = try setup.model("Product")
        let conditions: [Condition] = [
            !(Field("v") == 1), Field("v") != 1, !Field("v").isIn([1, "x"]), !Field("v").beginsWith("a"), !(Field("v") == "ab"),
            Field("v") == 1 || !(Field("v") < 2),
        ]
        for condition in conditions {
            let here = try products.findAll(Query(where: condition)).map(\.id).sorted()
            let found = try await setup.device.engine.search("Product", where: condition)
            #expect(found.map(\.id).sorted() == here, "\(condition)")
        }
        _ = await setup.server.put("Product", Self.json(["items": [["p": "x"]]]), id: nil)
        do {
            let found = try await setup.device.engine.search("Product", where: Field("items.p") == "x")
            Issue.record("answered: \(found)")
        } catch {
            #expect("\(error)".contains("write 'items[].p'"), "\(error)")
        }
    }

    @Test("a field the server turns from Date into a plain value goes back plain: the type remembered is the last one the server sent")
    func wireTypeFollowsTheServer() async throws {
        let setup = try await Setup(models: [ModelDefinition(name: "Event")])
        defer { Task { await setup.stop() } }
        let id = await setup.server.put("Event", Self.json(["when": ["__type": "Date", "iso": "2020-01-01T00:00:00.000Z"], "n": 1]), id: nil)
        try await setup.device.engine.sync()
        let events = try setup.model("Event")
        #expect(try events.find(id)?["when"] == "2020-01-01T00:00:00.000Z")

        // The field's type changes on the server (dropped from the schema, then written as a
        // string); a later local edit must not wrap the string as a Date, which the server refuses.
        await setup.server.dropField("Event", "when")
        await setup.server.update("Event", id, Self.json(["when": "soon"]))
        try await setup.device.engine.sync()
        #expect(try events.find(id)?["when"] == "soon")
        try events.update(id, with: ["when": "later"])
        let pushed = try await setup.device.engine.sync()
        let refusals = try setup.device.store.refusedChanges()
        #expect(pushed.accepted == 1 && pushed.refused == 0, "\(refusals)")
        let update = try #require(try await setup.batchRequests().last { $0["method"] == "PUT" })
        #expect(update["body"]?["when"] == "later", "sent as the plain string the server now holds")
        #expect(try await setup.stored("Event", id)?["when"] == "later")

        // And back: a Date again is pushed as a Date.
        await setup.server.dropField("Event", "when")
        await setup.server.update("Event", id, Self.json(["when": ["__type": "Date", "iso": "2021-02-03T00:00:00.000Z"]]))
        try await setup.device.engine.sync()
        try events.update(id, with: ["when": "2022-01-01T00:00:00.000Z"])
        #expect(try await setup.device.engine.sync().accepted == 1)
        #expect(try await setup.stored("Event", id)?["when"] == ["__type": "Date", "iso": "2022-01-01T00:00:00.000Z"])
    }

    @Test("a field named object (Satchel's id attribute) reads as ~object, and an edit of it goes back as object")
    func aFieldNamedObject() async throws {
        let setup = try await Setup(models: [ModelDefinition(name: "Event")])
        defer { Task { await setup.stop() } }
        let id = await setup.server.put("Event", Self.json(["object": "zzz", "n": 1]), id: nil)
        let only = await setup.server.put("Event", Self.json(["object": 5]), id: nil)
        try await setup.device.engine.sync()
        let events = try setup.model("Event")
        #expect(try events.find(id)?["~object"] == "zzz" && events.find(id)?["n"] == 1)
        #expect(try events.find(only)?["~object"] == 5, "an object holding only that field is stored too")

        try events.update(id, with: ["~object": "yyy"])
        #expect(try await setup.device.engine.sync().accepted == 1)
        let stored = try #require(try await setup.stored("Event", id))
        #expect(stored["object"] == "yyy" && stored["~object"] == nil && stored["n"] == 1, "\(stored)")
    }

    @Test("include: pointed-to objects come whole and are stored in their own models (CRParse's decomposition)")
    func includeDecomposes() async throws {
        let setup = try await Setup(
            models: [Self.customer, ModelDefinition(name: "Order")],
            backend: { server in
                var configuration = ParseBackend.forTests(server).configuration
                configuration.includes = ["Order": ["customer"]]
                return ParseBackend(configuration: configuration)
            })
        defer { Task { await setup.stop() } }
        let customerID = await setup.server.put("Customer", Self.json(["name": "Ann", "city": "Oslo"]), id: nil)
        let orderID = await setup.server.put(
            "Order", Self.json(["customer": ["__type": "Pointer", "className": "Customer", "objectId": .string(customerID)], "total": 5]), id: nil)
        try await setup.device.engine.sync(models: ["Order"])
        #expect(try setup.model("Order").find(orderID)?["customer"] == .string(customerID))
        let customer = try #require(try setup.model("Customer").find(customerID))
        #expect(customer["name"] == "Ann" && customer["city"] == "Oslo")
        let request = try #require(await setup.requests("GET", "classes/Order").first)
        #expect(request.query["include"] == "customer")
    }

    @Test(
        "an included object with only some fields, or the same one twice in an object, is merged into what is stored, never cuts it (found by a black-box probe: the full copy lost its attributes)"
    )
    func partialIncludesMerge() async throws {
        let setup = try await Setup(models: [Self.customer, ModelDefinition(name: "Order")])
        defer { Task { await setup.stop() } }
        let ann = await setup.server.put("Customer", Self.json(["name": "Ann", "city": "Oslo"]), id: nil)
        try await setup.device.engine.sync(models: ["Customer"])
        let before = try #require(try setup.model("Customer").find(ann))
        #expect(before["city"] == "Oslo" && before["updatedAt"] != nil)
        func nested(_ id: String, _ fields: JSONObject) -> JSONValue {
            var object: JSONObject = ["__type": "Object", "className": "Customer", "objectId": .string(id)]
            for (name, value) in fields { object[name] = value }
            return .object(object)
        }
        let first = await setup.server.put("Order", Self.json(["customer": nested(ann, ["name": "Ann"]), "total": 5]), id: nil)
        let second = await setup.server.put(
            "Order",
            Self.json([
                "customer": nested("c-bo", ["name": "Bo", "age": 7, "updatedAt": "2026-01-01T00:00:00.000Z"]),
                "helpers": [nested("c-bo", ["name": "Bo"])],
            ]), id: nil)
        try await setup.device.engine.sync(models: ["Order"])
        #expect(try setup.model("Order").find(first)?["customer"] == .string(ann))
        #expect(try setup.model("Order").find(second)?["helpers"] == ["c-bo"])
        #expect(try setup.model("Customer").find(ann)?.attributes == before.attributes, "the partial include took nothing away")
        let bo = try #require(try setup.model("Customer").find("c-bo"))
        #expect(bo["age"] == 7 && bo["name"] == "Bo" && bo["updatedAt"] != nil, "\(bo.attributes)")
    }

    @Test(
        "a model's configuration: its filter is and-ed into the where, onlyAttributes are keys (with createdAt and updatedAt, which are kept: found by a black-box probe, they were dropped), ignored ones excludeKeys, a fetch limit takes the first in the fetch order"
    )
    func modelConfiguration() async throws {
        let setup = try await Setup(pageSize: 3)
        defer { Task { await setup.stop() } }
        for i in 1...9 {
            _ = await setup.server.put(
                "Product", Self.json(["n": .int(Int64(i)), "brand": i % 3 == 0 ? "Acme" : "Zenith", "note": "x", "secret": "s"]), id: nil)
        }
        try await setup.device.engine.configure(
            "Product",
            ModelSyncConfiguration(
                serverFilter: ["brand": "Zenith"], onlyAttributes: ["n", "brand", "note"], ignoredAttributes: ["note"], fetchLimit: 4,
                fetchOrder: [.descending(Field("n"))]))
        try await setup.device.engine.sync(models: ["Product"])
        let local = try setup.model("Product").findAll()
        let pulls = await setup.requests("GET", "classes/Product").filter { $0.query["keys"] != "objectId" }
        let first = try #require(pulls.first)
        #expect(first.query["order"] == "-n,objectId" && first.query["limit"] == "4")
        #expect(first.query["keys"] == "n,brand,note,createdAt,updatedAt" && first.query["excludeKeys"] == "note")
        #expect(first.query["where"] == #"{"brand":"Zenith"}"#)
        #expect(local.allSatisfy { $0["secret"] == nil && $0["note"] == nil && $0["brand"] == "Zenith" })
        #expect(local.allSatisfy { $0["createdAt"]?.stringValue != nil && $0["updatedAt"]?.stringValue != nil }, "DESIGN §5: kept as attributes")
        #expect(Set(local.compactMap { $0["n"]?.intValue }) == [8, 7, 5, 4])
        // Later pulls: the filter and-ed with the keyset, in (updatedAt, objectId) order.
        let id = await setup.server.put("Product", Self.json(["n": 10, "brand": "Zenith"]), id: nil)
        try await setup.device.engine.sync(models: ["Product"])
        let delta = try #require(await setup.requests("GET", "classes/Product").filter { $0.query["keys"] != "objectId" }.last)
        #expect(delta.query["order"] == "updatedAt,objectId" && delta.query["where"]?.hasPrefix(#"{"$and":[{"brand":"Zenith"},{"$or":"#) == true)
        #expect(try setup.model("Product").find(id)?["n"] == 10)
        let changed = try #require(try setup.model("Product").findAll().first { $0["n"] == 8 })
        await setup.server.update("Product", changed.id, Self.json(["note": "y"]))
        try await setup.device.engine.sync(models: ["Product"])
        let server = try JSONValue(parsing: try #require(await setup.server.objects("Product")[changed.id]))
        #expect(try setup.model("Product").find(changed.id)?["updatedAt"] == server["updatedAt"], "the server's new updatedAt, not the old one")
        #expect(changed["updatedAt"] != server["updatedAt"])
        let listings = await setup.requests("GET", "classes/Product").filter { $0.query["keys"] == "objectId" }
        #expect(
            !listings.isEmpty && listings.allSatisfy { $0.query["where"]?.contains(#"{"brand":"Zenith"}"#) == true },
            "the id listing follows the filter")
    }

    @Test("a cloud function's object graph (CRParse's fetch path) is stored with importGraph and read back with find(including:)")
    func cloudFunctionGraph() async throws {
        let setup = try await Setup(try ParseFixture.named("shop"), models: [])
        defer { Task { await setup.stop() } }
        let backend = ParseBackend.forTests(setup.server)
        let session = try await backend.logIn(Credentials(user: "ann", password: "secret"))
        let graph = try await backend.call(function: "orderGraph", session: session)
        let summary = try setup.device.store.importGraph(graph, model: "Order")
        #expect(summary.roots == 1)
        let order = try #require(try setup.model("Order").find("Ordr000001", including: ["customer.favoriteProduct", "items"]))
        #expect(order["customer"]?["object"] == "Cust000001")
        #expect(order["customer"]?["favoriteProduct"]?["object"] != nil, "three levels deep")
        #expect(order["items"]?.arrayValue?.count == 2)
        let definition = try #require(setup.device.store.models.first(where: { $0.name == "Order" }))
        #expect(definition.associations["customer"] == "Customer" && definition.associations["items"] == "Product")
        await #expect(throws: SyncError.self) { try await backend.call(function: "nope", session: session) }
    }

    @Test("sync --full: server-deleted objects go, a create the server refused (never pushed) stays")
    func fullSyncListsIDs() async throws {
        let setup = try await Setup()
        defer { Task { await setup.stop() } }
        var ids: [String] = []
        for i in 1...6 { ids.append(await setup.server.put("Product", Self.json(["n": .int(Int64(i))]), id: nil)) }
        try await setup.device.engine.sync(models: ["Product"])
        await setup.server.delete("Product", ids[0])
        await setup.server.delete("Product", ids[1])
        await setup.server.addRule(ParseFixture.Rule(className: "Product", operation: "create", matching: Self.json(["n": 99]), message: "no"))
        try setup.model("Product").create(["object": "mine", "n": 99])
        let report = try await setup.device.engine.sync(models: ["Product"], mode: .full)
        #expect(report.refused == 1)
        #expect(try setup.model("Product").find(ids[0]) == nil && setup.model("Product").find(ids[1]) == nil)
        #expect(try setup.model("Product").find("mine")?["n"] == 99, "the unpushed create stays")
        #expect(Set(setup.device.log.objects("Product").deleted) == [ids[0], ids[1]])
        let listings = await setup.requests("GET", "classes/Product").filter { $0.query["keys"] == "objectId" }
        #expect(listings.last?.query["order"] == "objectId")
        let error = try #require(try setup.device.store.refusedChanges(model: "Product").first)
        #expect(error.code == "142" && error.message == "no")
    }

    @Test("a revoked session (209) fails the sync with one line saying to log in again; nothing is lost; logging in resumes")
    func revokedSession() async throws {
        let setup = try await Setup()
        defer { Task { await setup.stop() } }
        let id = await setup.server.put("Product", Self.json(["n": 1]), id: nil)
        try await setup.device.engine.sync(models: ["Product"])
        try setup.model("Product").update(id, with: ["n": 2])
        await setup.server.expireSessions()
        do {
            try await setup.device.engine.sync(models: ["Product"])
            Issue.record("the sync went through a revoked session")
        } catch let error as SyncError {
            #expect(error.code == .unauthorized)
            #expect(error.message.contains("log in again") && !error.message.contains("\n"))
        }
        #expect(try setup.model("Product").find(id)?["n"] == 2)
        #expect(try setup.device.store.changeFates(model: "Product")[id] != nil, "the change is kept, to be sent again")
        await #expect(throws: SyncError.self) { try await setup.device.engine.sync(models: ["Product"]) }
        try await setup.device.engine.logIn(Credentials(user: "ann", password: "secret"))
        try await setup.device.engine.sync(models: ["Product"])
        #expect(try await setup.stored("Product", id)?["n"] == 2)
        try await setup.expectMatchesServer("Product")
    }

    @Test("a 209 on some of a push's creates drops the session: the next sync asks to log in again (a black-box probe: it sent the token again)")
    func sessionRefusedMidCreates() async throws {
        let setup = try await Setup()
        defer { Task { await setup.stop() } }
        try await setup.device.engine.sync(models: ["Product"])
        await setup.server.addRule(
            ParseFixture.Rule(className: "Product", operation: "create", matching: Self.json(["n": 2]), code: 209, message: "Invalid session token"))
        try setup.model("Product").create(["n": 1])
        try setup.model("Product").create(["n": 2])
        await #expect { try await setup.device.engine.sync(models: ["Product"]) } throws: { ($0 as? SyncError)?.code == .unauthorized }
        await #expect { try await setup.device.engine.sync(models: ["Product"]) } throws: { ($0 as? SyncError)?.code == .notLoggedIn }
        await setup.server.clearRules()
        try await setup.device.engine.logIn(Credentials(user: "ann", password: "secret"))
        try await setup.device.engine.sync(models: ["Product"])
        #expect(await setup.server.objects("Product").count == 2, "each create once")
        try await setup.expectMatchesServer("Product")
    }

    @Test(
        "a code 1 on one change keeps it pending, counted as postponed with an error line; the next sync sends it (a black-box probe: nothing said, the sync complete)"
    )
    func postponedChange() async throws {
        let setup = try await Setup()
        defer { Task { await setup.stop() } }
        let a = await setup.server.put("Product", Self.json(["n": 1]), id: nil)
        let b = await setup.server.put("Product", Self.json(["n": 1]), id: nil)
        try await setup.device.engine.sync(models: ["Product"])
        await setup.server.addRule(ParseFixture.Rule(className: "Product", operation: "update", ids: [b], code: 1, message: "Internal server error."))
        try setup.model("Product").update(a, with: ["n": 2])
        try setup.model("Product").update(b, with: ["n": 2])
        let report = try await setup.device.engine.sync(models: ["Product"])
        #expect(report.accepted == 1 && report.postponed == 1 && report.refused == 0)
        #expect(try setup.device.store.pendingChanges().map(\.objectID) == [b])
        let line = setup.device.log.notifications().last { $0.status == .error }
        #expect(line?.message?.contains("update \(b): Parse error 1: Internal server error.") == true, "\(String(describing: line))")
        await setup.server.clearRules()
        #expect(try await setup.device.engine.sync(models: ["Product"]).postponed == 0)
        try await setup.expectMatchesServer("Product")
    }

    @Test("a 101 on a delete counts as done; a 142 on an update is a refused change with Parse's code, message and the server's copy")
    func perRequestErrors() async throws {
        let setup = try await Setup()
        defer { Task { await setup.stop() } }
        let a = await setup.server.put("Product", Self.json(["n": 1]), id: nil)
        let b = await setup.server.put("Product", Self.json(["n": 2]), id: nil)
        try await setup.device.engine.sync(models: ["Product"])
        await setup.server.delete("Product", a)
        try setup.model("Product").delete(a)
        await setup.server.addRule(ParseFixture.Rule(className: "Product", operation: "update", ids: [b], code: 142, message: "n must stay"))
        try setup.model("Product").update(b, with: ["n": 3])
        let report = try await setup.device.engine.sync(models: ["Product"])
        #expect(report.refused == 1 && report.accepted == 1)
        let error = try #require(try setup.device.store.refusedChanges(model: "Product").first)
        #expect(error.objectID == b && error.kind == .update && error.code == "142" && error.message == "n must stay")
        // `satchel errors` prints the code as the server sent it: Parse's is a number (a
        // black-box probe found "142").
        #expect(error.json["code"] == 142)
        #expect(error.serverCopy?["n"] == 2)
        try setup.device.store.resolve("Product", b, .rollback)
        #expect(try setup.model("Product").find(b)?["n"] == 2)
        try await setup.device.engine.sync(models: ["Product"])
        try await setup.expectMatchesServer("Product")
    }

    @Test("an update of an object deleted on the server is a refused change with Parse's own code and message, 101 (found by a black-box probe: 404)")
    func updateOfADeletedObject() async throws {
        let setup = try await Setup()
        defer { Task { await setup.stop() } }
        let a = await setup.server.put("Product", Self.json(["n": 1]), id: nil)
        try await setup.device.engine.sync(models: ["Product"])
        try setup.model("Product").update(a, with: ["n": 2])
        // Deleted there after this sync's pull, before its push: the push meets it gone.
        setup.faults.inject(.before({ await setup.server.delete("Product", a) }), on: .push)
        let report = try await setup.device.engine.sync(models: ["Product"])
        #expect(report.refused == 1)
        let error = try #require(try setup.device.store.refusedChanges(model: "Product").first)
        #expect(error.objectID == a && error.kind == .update && error.serverDeleted)
        #expect(error.code == "101" && error.message == "Object not found.", "\(error)")
    }

    /// An adapter for `server` with `protection`.
    static func protected(_ protection: ParseBackend.CreateProtection) -> (ParseServer) -> ParseBackend {
        { server in
            var configuration = ParseBackend.forTests(server).configuration
            configuration.createProtection = protection
            return ParseBackend(configuration: configuration)
        }
    }

    @Test("a create writes only what the app wrote: no field of Satchel's own, so a class whose permissions refuse new fields takes it")
    func createWritesOnlyTheAppsFields() async throws {
        var fixture = ParseFixture()
        fixture.lockedSchemas = ["Product"]
        fixture.classes["Product"] = [Self.json(["name": "Seed", "price": 1])]
        let setup = try await Setup(fixture)
        defer { Task { await setup.stop() } }
        try setup.model("Product").create(["object": "n1", "name": "Lamp", "price": 12])
        let report = try await setup.device.engine.sync(models: ["Product"])
        #expect(report.refused == 0 && report.accepted == 1, "\((try? setup.device.store.refusedChanges()) ?? [])")
        let id = try #require(report.serverIDs["Product"]?["n1"])
        let stored = try #require(try await setup.stored("Product", id))
        #expect(Set(stored.keys) == ["objectId", "createdAt", "updatedAt", "name", "price"])
        #expect(await setup.server.schemaFields("Product") == ["name", "price"], "no field was added to the class")
        let post = try #require(await setup.requests("POST", "classes/Product").first)
        #expect(try JSONObject(parsing: post.body) == ["name": "Lamp", "price": 12])
        // A field the class lacks is refused as Parse refuses it: a refused change naming the permission.
        try setup.model("Product").create(["object": "n2", "name": "Desk", "colour": "red"])
        try await setup.device.engine.sync(models: ["Product"])
        let error = try #require(try setup.device.store.refusedChanges(model: "Product").first)
        #expect(error.objectID == "n2" && error.code == "119" && error.message.contains("addField"))
        try await setup.expectMatchesServer("Product", ignoring: ["n2"])
    }

    @Test(
        "every write carries X-Parse-Request-Id; a create whose answer was lost carries the same one after a restart, and the server's 159 links it")
    func requestIDsAcrossRestarts() async throws {
        var setup = try await Setup(.idempotent)
        let server = setup.server
        defer { Task { await server.stop() } }
        let kept = await setup.server.put("Product", Self.json(["name": "Kept", "n": 1]), id: nil)
        let gone = await setup.server.put("Product", Self.json(["name": "Gone"]), id: nil)
        try await setup.device.engine.sync(models: ["Product"])
        try setup.model("Product").create(["object": "n1", "name": "Once", "price": 3])
        try setup.model("Product").update(kept, with: ["n": 2])
        try setup.model("Product").delete(gone)
        await setup.server.loseNextAnswer("POST", "/parse/classes/Product")
        await #expect(throws: SyncError.self) { try await setup.device.engine.sync(models: ["Product"]) }
        #expect(await setup.server.objects("Product").count == 2, "the create was made; its answer was lost")

        setup.device = try await setup.device.reopened(backend: setup.faults, models: [Self.product])
        let report = try await setup.device.engine.sync(models: ["Product"])
        #expect(report.refused == 0)
        let creates = await setup.requests("POST", "classes/Product")
        #expect(creates.count == 2)
        let ids = creates.compactMap { $0.headers["x-parse-request-id"] }
        #expect(ids.count == 2 && ids[0] == ids[1] && UUID(uuidString: ids[0]) != nil, "the same change, the same request id: \(ids)")
        #expect(await setup.server.duplicateRequests == 1)
        for batch in await setup.requests("POST", "batch") { #expect(batch.headers["x-parse-request-id"] != nil) }
        let objects = await setup.server.objects("Product")
        #expect(objects.count == 2, "made once")
        let made = try #require(report.serverIDs["Product"]?["n1"])
        #expect(objects[made] != nil && objects[gone] == nil)
        #expect(try setup.model("Product").find("n1") == nil && setup.model("Product").find(made)?["name"] == "Once")
        #expect(try setup.device.store.changeFates(model: "Product").isEmpty)
        try await setup.expectMatchesServer("Product")
    }

    /// Creates `object` here while the server refuses creates (142), syncs, then resolves the
    /// refusal with `recreate` and syncs again with the refusals lifted; returns that sync's
    /// report. Parse, with idempotency on, recorded the refused request's id.
    static func refusedThenRecreated(_ setup: Setup, _ object: JSONObject) async throws -> SyncReport {
        await setup.server.addRule(ParseFixture.Rule(className: "Product", operation: "create", code: 142, message: "not now"))
        try setup.model("Product").create(object)
        try await setup.device.engine.sync(models: ["Product"])
        #expect(try setup.device.store.refusedChanges(model: "Product").first?.code == "142")
        await setup.server.clearRules()
        try setup.device.store.resolve("Product", object[Object.idAttribute]?.stringValue ?? "", .recreate)
        return try await setup.device.engine.sync(models: ["Product"])
    }

    /// Creates `object` here and syncs while the server loses the create's answer (having made
    /// the object): the sync fails, the create in flight.
    static func loseCreateAnswer(_ setup: Setup, _ object: JSONObject) async throws {
        try setup.model("Product").create(object)
        await setup.server.loseNextAnswer("POST", "/parse/classes/Product")
        await #expect(throws: SyncError.self) { try await setup.device.engine.sync(models: ["Product"]) }
    }

    @Test(
        "a create whose answer was lost, then deleted here: the delete goes to the object the create made (its request id answered 159), not to the local id (found by a black-box probe: a 101 counted as done, and the object came back)"
    )
    func deleteAfterLostCreate() async throws {
        var setup = try await Setup(.idempotent)
        let server = setup.server
        defer { Task { await server.stop() } }
        try await Self.loseCreateAnswer(setup, ["object": "n1", "name": "Gone again", "price": 3])
        #expect(await setup.server.objects("Product").count == 1, "the create was made; its answer was lost")
        setup.device = try await setup.device.reopened(backend: setup.faults, models: [Self.product])
        try setup.model("Product").delete("n1")
        let report = try await setup.device.engine.sync(models: ["Product"])
        #expect(report.refused == 0)
        #expect(await setup.server.objects("Product").isEmpty, "the object the lost create made is deleted")
        #expect(try setup.model("Product").count() == 0, "and does not come back")
        #expect(try await setup.batchRequests().allSatisfy { $0["path"]?.stringValue?.hasSuffix("/n1") == false }, "no request names the local id")
        #expect(try setup.device.store.changeFates(model: "Product").isEmpty)
    }

    @Test(
        "two creates of the same values whose answers were lost, edited here since: each is found to have made its own object, and each takes its own edits (found by a black-box probe: both were linked to one, and one's edits lost)"
    )
    func twinLostCreatesEditedSince() async throws {
        var setup = try await Setup(.idempotent)
        let server = setup.server
        defer { Task { await server.stop() } }
        try setup.model("Product").create(["object": "s1", "name": "Seat", "row": "A"])
        try setup.model("Product").create(["object": "s2", "name": "Seat", "row": "A"])
        await setup.server.loseNextAnswer("POST", "/parse/classes/Product")
        await setup.server.loseNextAnswer("POST", "/parse/classes/Product")
        await #expect(throws: SyncError.self) { try await setup.device.engine.sync(models: ["Product"]) }
        #expect(await setup.server.objects("Product").count == 2, "both made, their answers lost")
        setup.device = try await setup.device.reopened(backend: setup.faults, models: [Self.product])
        try setup.model("Product").update("s1", with: ["guest": "Ann"])
        try setup.model("Product").update("s2", with: ["guest": "Bob"])
        let report = try await setup.device.engine.sync(models: ["Product"])
        #expect(report.refused == 0)
        let guests = await setup.server.objects("Product").values.compactMap { try? JSONObject(parsing: $0)["guest"] }
        #expect(guests.sorted { "\($0)" < "\($1)" } == ["Ann", "Bob"], "\(guests)")
        #expect(try setup.model("Product").count() == 2)
        try await setup.expectMatchesServer("Product")
    }

    @Test(
        "a 159 links a create only to an object holding exactly what it sent: another device's object with the same values and more is not it (found by a black-box probe: it was linked, and the local copy overwritten)"
    )
    func duplicateRequestNotLinkedToAnother() async throws {
        let setup = try await Setup(.idempotent)
        defer { Task { await setup.stop() } }
        let other = await setup.server.put("Product", Self.json(["name": "Milk", "tag": "made by another device"]), id: nil)
        try await setup.device.engine.sync(models: ["Product"])
        let report = try await Self.refusedThenRecreated(setup, ["object": "n1", "name": "Milk"])
        let made = try #require(report.serverIDs["Product"]?["n1"])
        #expect(made != other)
        #expect(await setup.server.objects("Product").count == 2)
        #expect(try setup.model("Product").find(other)?["tag"] == "made by another device")
        try await setup.expectMatchesServer("Product")
    }

    @Test(
        "a create whose answer was lost, sent again by the same sync's retry, is made once: the 159 to its own request id links it (a black-box probe: it was made again under another request id)"
    )
    func lostCreateAnswerRetriedInTheSameSync() async throws {
        let setup = try await Setup(.idempotent, retry: RetryPolicy(maxAttempts: 2, baseDelay: .milliseconds(1), jitter: 0))
        defer { Task { await setup.stop() } }
        try setup.model("Product").create(["object": "n1", "name": "Once", "price": 3])
        await setup.server.loseNextAnswer("POST", "/parse/classes/Product")
        let report = try await setup.device.engine.sync(models: ["Product"])
        #expect(report.refused == 0)
        #expect(await setup.server.objects("Product").count == 1, "made once")
        #expect(try setup.model("Product").count() == 1)
        #expect(await setup.server.duplicateRequests == 1)
        try await setup.expectMatchesServer("Product")
    }

    @Test(
        "a create whose answer was lost, edited here, linked again by a sync whose update's answer was lost too: the next sync finds the object by what either sent, made once (a black-box probe: a second object)"
    )
    func lostCreateThenLostUpdate() async throws {
        var setup = try await Setup(.idempotent)
        let server = setup.server
        defer { Task { await server.stop() } }
        try await Self.loseCreateAnswer(setup, ["object": "n1", "name": "Once", "price": 3])
        try setup.model("Product").update("n1", with: ["price": 4])
        // The create asked again (159, linked), then the edit's batch: carried out, its answer lost.
        await setup.server.loseNextAnswer("POST", "/parse/batch")
        await #expect(throws: SyncError.self) { try await setup.device.engine.sync(models: ["Product"]) }
        setup.device = try await setup.device.reopened(backend: setup.faults, models: [Self.product])
        let report = try await setup.device.engine.sync(models: ["Product"])
        #expect(report.refused == 0)
        let objects = await setup.server.objects("Product")
        #expect(objects.count == 1, "made once: \(objects)")
        #expect(try setup.model("Product").count() == 1)
        #expect(try setup.model("Product").findAll().first?["price"] == 4)
        try await setup.expectMatchesServer("Product")
    }

    @Test(
        "a new object under a local id an earlier create used, with the same attributes, is made anew: its request id is the earlier create's, and that 159 is not its own (a black-box probe: it was linked to the earlier object, and the store lost one)"
    )
    func reusedLocalIDMadeAnew() async throws {
        let setup = try await Setup(.idempotent)
        defer { Task { await setup.stop() } }
        try setup.model("Product").create(["object": "b", "name": "B"])
        let first = try #require(try await setup.device.engine.sync(models: ["Product"]).serverIDs["Product"]?["b"])
        try setup.model("Product").create(["object": "b", "name": "B"])
        let report = try await setup.device.engine.sync(models: ["Product"])
        #expect(report.refused == 0)
        let second = try #require(report.serverIDs["Product"]?["b"])
        #expect(second != first)
        #expect(await setup.server.objects("Product").count == 2)
        #expect(try setup.model("Product").count() == 2)
        try await setup.expectMatchesServer("Product")
    }

    @Test(
        "with a client-id field, a create never sent is made anew, whatever value of it or local id it has (a black-box probe: a copy of an object, and a create under a reused local id, each overwrote the earlier object)"
    )
    func clientIDFieldNewCreatesMadeAnew() async throws {
        let setup = try await Setup(backend: Self.protected(.clientIDField("deviceRef")))
        defer { Task { await setup.stop() } }
        try setup.model("Product").create(["object": "n1", "name": "Original"])
        let original = try #require(try await setup.device.engine.sync(models: ["Product"]).serverIDs["Product"]?["n1"])
        try setup.model("Product").create(["object": "c", "name": "Copy", "deviceRef": "n1"])
        try setup.model("Product").create(["object": "n1", "name": "Again"])
        let report = try await setup.device.engine.sync(models: ["Product"])
        #expect(report.refused == 0)
        let objects = await setup.server.objects("Product")
        #expect(objects.count == 3)
        #expect(try await setup.stored("Product", original)?["name"] == "Original")
        #expect(try setup.model("Product").count() == 3)
        try await setup.expectMatchesServer("Product")
    }

    @Test("without the server's idempotency option, request ids protect nothing: a lost create answer makes a second object (as the docs say)")
    func requestIDsNeedTheServersOption() async throws {
        let setup = try await Setup()
        defer { Task { await setup.stop() } }
        try setup.model("Product").create(["object": "n1", "name": "Twice"])
        await setup.server.loseNextAnswer("POST", "/parse/classes/Product")
        await #expect(throws: SyncError.self) { try await setup.device.engine.sync(models: ["Product"]) }
        try await setup.device.engine.sync(models: ["Product"])
        #expect(await setup.server.objects("Product").count == 2)
    }

    @Test(
        "a 159 for a create no object holds (Parse recorded the id of a request it then refused) sends it once more under another request id: made once"
    )
    func duplicateRequestWithoutObject() async throws {
        let setup = try await Setup(.idempotent)
        defer { Task { await setup.stop() } }
        let report = try await Self.refusedThenRecreated(setup, ["object": "n1", "name": "Later"])
        #expect(report.refused == 0 && report.accepted == 1)
        #expect(await setup.server.duplicateRequests == 1)
        let ids = await setup.requests("POST", "classes/Product").compactMap { $0.headers["x-parse-request-id"] }
        #expect(ids.count == 3 && ids[0] == ids[1] && ids[2] != ids[0], "\(ids)")
        #expect(await setup.server.objects("Product").count == 1)
        try await setup.expectMatchesServer("Product")
    }

    @Test("custom object ids: the local id is the objectId; a create sent again after a lost answer becomes an update, edits included")
    func customObjectIDs() async throws {
        var fixture = ParseFixture()
        fixture.allowCustomObjectID = true
        let setup = try await Setup(fixture, backend: Self.protected(.customObjectIDs))
        defer { Task { await setup.stop() } }
        try setup.model("Product").create(["object": "n1", "name": "Once", "note": "gone soon"])
        setup.faults.inject(.dropAnswer, on: .push)
        await #expect(throws: SyncError.self) { try await setup.device.engine.sync(models: ["Product"]) }
        // An edit, and a removal (found by a black-box probe: the server kept `note`).
        try setup.model("Product").update("n1", with: ["price": 3, "note": .null])
        let report = try await setup.device.engine.sync(models: ["Product"])
        #expect(report.refused == 0 && report.serverIDs["Product"] == nil, "no rename")
        let objects = await setup.server.objects("Product")
        #expect(Array(objects.keys) == ["n1"])
        let stored = try #require(try await setup.stored("Product", "n1"))
        #expect(stored["price"] == 3 && stored["name"] == "Once")
        #expect(Set(stored.keys) == ["objectId", "createdAt", "updatedAt", "name", "price"])
        try await setup.expectMatchesServer("Product")
    }

    @Test("custom object ids on a server that does not allow them: a refused change with Parse's 105, nothing made")
    func customObjectIDsRefused() async throws {
        let setup = try await Setup(backend: Self.protected(.customObjectIDs))
        defer { Task { await setup.stop() } }
        try setup.model("Product").create(["object": "n1", "name": "Once"])
        try await setup.device.engine.sync(models: ["Product"])
        let error = try #require(try setup.device.store.refusedChanges(model: "Product").first)
        #expect(error.code == "105" && error.message.contains("objectId"))
        #expect(await setup.server.objects("Product").isEmpty)
    }

    @Test(
        "a client-id field, when the app asks for one, is an ordinary attribute on the server and in the store; it finds a create whose answer was lost"
    )
    func clientIDField() async throws {
        let setup = try await Setup(backend: Self.protected(.clientIDField("deviceRef")))
        defer { Task { await setup.stop() } }
        try setup.model("Product").create(["object": "n1", "name": "Once", "note": "gone soon"])
        try setup.model("Product").create(["object": "n2", "name": "Own", "deviceRef": "app-chosen"])
        setup.faults.inject(.dropAnswer, on: .push)
        await #expect(throws: SyncError.self) { try await setup.device.engine.sync(models: ["Product"]) }
        try setup.model("Product").update("n1", with: ["price": 3, "note": .null])
        let report = try await setup.device.engine.sync(models: ["Product"])
        #expect(report.refused == 0)
        let objects = await setup.server.objects("Product")
        #expect(objects.count == 2)
        let id = try #require(report.serverIDs["Product"]?["n1"])
        let stored = try #require(try await setup.stored("Product", id))
        #expect(stored["deviceRef"] == "n1" && stored["price"] == 3 && stored["note"] == nil, "\(stored)")
        #expect(try setup.model("Product").find(id)?["deviceRef"] == "n1", "visible here as there")
        let own = try #require(report.serverIDs["Product"]?["n2"])
        #expect(try await setup.stored("Product", own)?["deviceRef"] == "app-chosen")
        try await setup.expectMatchesServer("Product")
    }

    @Test("a pull from the start carries the class's count: every progress notification's total is exact; a delta pull says none")
    func totals() async throws {
        var fixture = ParseFixture()
        fixture.classes["Product"] = (1...12).map { Self.json(["n": .int(Int64($0))]) }
        let setup = try await Setup(fixture)
        defer { Task { await setup.stop() } }
        try await setup.device.engine.sync(models: ["Product"])
        let first = setup.device.log.notifications(.inProgress, model: "Product")
        #expect(first.count == 3 && first.allSatisfy { $0.totalCount == 12 }, "\(first)")
        let counted = await setup.requests("GET", "classes/Product").filter { $0.query["count"] != nil }
        #expect(counted.count == 1 && counted[0].query["where"] == nil, "only the first page counts, over the filter alone")
        setup.device.log.clear()
        _ = await setup.server.put("Product", Self.json(["n": 13]), id: nil)
        try await setup.device.engine.sync(models: ["Product"])
        let delta = setup.device.log.notifications(.inProgress, model: "Product")
        #expect(!delta.isEmpty && delta.allSatisfy { $0.totalCount == nil }, "\(delta)")
    }

    @Test("429 and code 1 are retried with backoff")
    func retries() async throws {
        let setup = try await Setup(retry: RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(100), jitter: 0))
        defer { Task { await setup.stop() } }
        _ = await setup.server.put("Product", Self.json(["n": 1]), id: nil)
        await setup.server.sabotageNext("GET", "/parse/classes/Product", status: 429, body: Data(#"{"code":100,"error":"Too many requests."}"#.utf8))
        await setup.server.sabotageNext(
            "GET", "/parse/classes/Product", status: 500, body: Data(#"{"code":1,"message":"Internal server error."}"#.utf8))
        #expect(try await setup.device.engine.sync(models: ["Product"]).pulled == 1)
        #expect(setup.device.delays.all.count == 2)
    }

    @Test(
        "malformed answers are protocol violations and leave the store as it was",
        arguments: [
            ("GET", "/parse/classes/Product", #"{"results":[{"objectId":"x","updatedAt":"2026-"#),
            ("GET", "/parse/classes/Product", #"{"results":{"objectId":"x"}}"#),
            ("GET", "/parse/classes/Product", #"{"results":[{"name":"no id"}]}"#),
            ("GET", "/parse/classes/Product", #"[1,2]"#),
            // An updatedAt that is not a Parse date would become the pull's cursor (a black-box probe:
            // "yesterday" was accepted, and no later change was ever pulled).
            ("GET", "/parse/classes/Product", #"{"results":[{"objectId":"zz","updatedAt":"yesterday"}]}"#),
            ("GET", "/parse/classes/Product", #"{"results":[{"objectId":"zz","updatedAt":"2026-01-01T00:00:00Z"}]}"#),
            ("POST", "/parse/batch", #"[{"success":{"objectId":"a1","createdAt":"2026-01-01T00:00:00.000Z"}}]"#),
            ("POST", "/parse/batch", #"[{"neither":1},{"success":{}}]"#),
            ("POST", "/parse/classes/Product", #"{"createdAt":"2026-01-01T00:00:00.000Z"}"#),
            ("POST", "/parse/classes/Product", #"{"objectId":"#),
        ])
    func malformed(_ method: String, _ path: String, _ body: String) async throws {
        // Creates go in batches only without request ids.
        let setup = try await Setup(backend: path.hasSuffix("batch") ? Self.protected(.none) : nil)
        defer { Task { await setup.stop() } }
        let id = await setup.server.put("Product", Self.json(["n": 1]), id: nil)
        try await setup.device.engine.sync(models: ["Product"])
        if method == "POST" {
            try setup.model("Product").create(["object": "l1", "n": 5])
            // Two requests in one batch; a create of its own is one request.
            if path.hasSuffix("batch") { try setup.model("Product").create(["object": "l2", "n": 6]) }
        }
        let before = try setup.device.objects("Product")
        await setup.server.update("Product", id, Self.json(["n": 2]))
        await setup.server.sabotageNext(method, path, body: Data(body.utf8))
        do {
            try await setup.device.engine.sync(models: ["Product"])
            Issue.record("a malformed answer was accepted")
        } catch let error as SyncError {
            #expect(error.code == .protocolViolation, "\(error)")
        }
        #expect(try setup.device.objects("Product") == before)
        #expect(try setup.device.store.verify().problems == [])
    }

    @Test(
        "an answer of ten million values, or of 100,000 levels, is refused within the answer limits; the store is as it was",
        arguments: ["values", "nesting"])
    func hugeTrees(_ kind: String) async throws {
        let setup = try await Setup()
        defer { Task { await setup.stop() } }
        let id = await setup.server.put("Product", Self.json(["n": 1]), id: nil)
        try await setup.device.engine.sync(models: ["Product"])
        let before = try setup.device.objects("Product")
        await setup.server.update("Product", id, Self.json(["n": 2]))
        let body =
            kind == "values"
            ? #"{"results":["# + String(repeating: "0,", count: 9_999_999) + "0]}"
            : String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        await setup.server.sabotageNext("GET", "/parse/classes/Product", body: Data(body.utf8))
        let error = await #expect(throws: SyncError.self) { try await setup.device.engine.sync(models: ["Product"]) }
        #expect(error?.code == .protocolViolation, "\(String(describing: error))")
        #expect(error?.message.contains(kind == "values" ? "more than 2000000 values" : "nesting deeper") == true)
        #expect(try setup.device.objects("Product") == before)
        #expect(try setup.device.store.verify().problems == [])
    }

    @Test(
        "an object as deep as a store holds goes and comes back within a page's levels; one deeper than a store holds fails the pull, the store as it was"
    )
    func deepestObject() async throws {
        let setup = try await Setup()
        defer { Task { await setup.stop() } }
        var deep = JSONValue.int(1)
        for _ in 0..<(JSONValue.maxDepth - 1) { deep = .array([deep]) }
        try setup.model("Product").create(["object": "d1", "deep": deep])
        // Pushed, then pulled back in a page, then pulled whole: every sync reads it (a
        // black-box probe: the page's own levels put it past the limit, and every later pull failed).
        #expect(try await setup.device.engine.sync(models: ["Product"]).accepted == 1)
        try await setup.device.engine.sync(models: ["Product"])
        let report = try await setup.device.engine.sync(models: ["Product"], mode: .full)
        #expect(report.pulled == 1)
        let objects = try setup.device.objects("Product")
        #expect(objects.count == 1 && objects.first?.value["deep"] == deep)
        // The server's own copy holds it whole.
        let stored = try await setup.stored("Product", try #require(objects.first?.key))
        #expect(stored?["deep"] == deep)
        // A server object deeper than a store holds is refused with the page, nothing written.
        let before = try setup.device.objects("Product")
        let id = try #require(objects.first?.key)
        await setup.server.update("Product", id, Self.json(["deep": .array([deep])]))
        // Said as the server's doing, naming the model and the object (a black-box probe: a
        // `storage` error naming neither).
        let error = await #expect(throws: SyncError.self) { try await setup.device.engine.sync(models: ["Product"]) }
        #expect(
            error?.code == .protocolViolation && error?.message.contains("pull of Product") == true && error?.message.contains(id) == true
                && error?.message.contains("deeper than") == true, "\(String(describing: error))")
        #expect(try setup.device.objects("Product") == before)
        // A search storing what it found says so the same way.
        let searched = await #expect(throws: SyncError.self) { try await setup.device.engine.search("Product", where: .all, storing: true) }
        #expect(
            searched?.code == .protocolViolation && searched?.message.contains("search of Product") == true
                && searched?.message.contains(id) == true, "\(String(describing: searched))")
        #expect(try setup.device.objects("Product") == before)
        #expect(try setup.device.store.verify().problems == [])
    }

    @Test("no password or session token appears in a log line, an error or a notification of a sync that logs in and fails in each way")
    func secretsStaySecret() async throws {
        var fixture = ParseFixture()
        fixture.users = ["ann": "pw-Zq81x!"]
        let server = try await ParseServer.start(fixture)
        defer { Task { await server.stop() } }
        _ = await server.put("Product", Self.json(["n": 1]), id: nil)
        let capture = LogCapture()
        let client = try SyncClient(
            backend: ParseBackend.forTests(server), models: [Self.product], retry: RetryPolicy(maxAttempts: 2, baseDelay: .milliseconds(1)),
            logger: capture.logger)
        await client.record()
        var texts: [String] = []
        func attempt(_ body: () async throws -> Void) async {
            do { try await body() } catch { texts.append("\(error)") }
        }
        await attempt { try await client.engine.logIn(Credentials(user: "ann", password: "wrong-Hh27")) }
        await attempt { try await client.engine.logIn(Credentials(user: "ann", password: "pw-Zq81x!")) }
        await attempt { try await client.engine.sync() }
        await server.sabotageNext("GET", "/parse/classes/Product", status: 500, body: Data(#"{"code":1,"message":"Internal server error."}"#.utf8))
        await server.sabotageNext("GET", "/parse/classes/Product", status: 500, body: Data(#"{"code":1,"message":"Internal server error."}"#.utf8))
        await attempt { try await client.engine.sync() }
        await server.expireSessions()
        await attempt { try await client.engine.sync() }
        await attempt { try await client.engine.sync() }
        #expect(texts.count == 4, "\(texts)")
        #expect(!capture.lines.isEmpty, "the failures were logged")
        #expect(
            capture.lines.contains { $0.contains("retrying") && $0.contains("status=500") && $0.contains("path=/parse/classes/Product") },
            "\(capture.lines)")
        let tokens = Set(await server.requests.compactMap { $0.headers["x-parse-session-token"] })
        #expect(!tokens.isEmpty)
        let everything = texts + capture.lines + client.log.all.map { "\($0)" }
        for secret in tokens.union(["pw-Zq81x!", "wrong-Hh27"]) {
            #expect(!everything.contains { $0.contains(secret) }, "\(secret) leaked")
        }
    }

    /// Uploads a file to the server as another client would.
    static func uploadFile(_ server: ParseServer, name: String, bytes: Data) async throws -> (name: String, url: String) {
        var request = URLRequest(url: server.url.appendingPathComponent("files/\(name)"))
        request.httpMethod = "POST"
        request.httpBody = bytes
        request.setValue(server.appID, forHTTPHeaderField: "X-Parse-Application-Id")
        if let key = server.restKey { request.setValue(key, forHTTPHeaderField: "X-Parse-REST-API-Key") }
        request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
        let (data, _) = try await URLSession.shared.data(for: request)
        let answer = try JSONValue(parsing: data)
        let name = try #require(answer["name"]?.stringValue)
        let url = try #require(answer["url"]?.stringValue)
        return (name, url)
    }
}

extension ParseFixture {
    /// The default fixture with the server's idempotency option on (request ids honoured).
    static var idempotent: ParseFixture {
        var fixture = ParseFixture()
        fixture.idempotency = ParseFixture.Idempotency()
        return fixture
    }
}
