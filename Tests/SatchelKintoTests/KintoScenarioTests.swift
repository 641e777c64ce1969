import Foundation
import Satchel
import SatchelKinto
import SatchelSync
import SatchelSyncTesting
import SatchelTestSupport
import Synchronization
import Testing

/// A whole life against a real Kinto: a big first pull, server changes, local changes,
/// conflicts, a refused password, and a server that goes away mid-sync.
@Suite("Kinto scenario against a real Kinto server", .enabled(if: KintoServers.enabled, KintoServers.skipReason), .serialized)
struct KintoScenarioTests {
    static let product = ModelDefinition(name: "Product")

    /// A device syncing `bucket` on the server at `url`.
    static func device(_ url: URL, bucket: String, _ credentials: Credentials, pageSize: Int, wrap: (any SyncBackend) -> any SyncBackend = { $0 })
        async throws -> SyncClient
    {
        let backend = wrap(KintoBackend(configuration: .init(url: url, bucket: bucket, timeout: 30)))
        let client = try SyncClient(backend: backend, models: [product], pageSize: pageSize)
        await client.record()
        try await client.engine.logIn(credentials)
        return client
    }

    /// `count` products `p1`… with a name, a price and a brand.
    /// A device whose backend passes through a fault injector, in pages of 50.
    static func deviceThroughFaults(_ url: URL, bucket: String, _ user: Credentials) async throws -> (SyncClient, FaultyBackend) {
        var faulty: FaultyBackend?
        let device = try await Self.device(url, bucket: bucket, user, pageSize: 50) { backend in
            let wrapped = FaultyBackend(backend)
            faulty = wrapped
            return wrapped
        }
        return (device, try #require(faulty))
    }

    static func products(_ range: ClosedRange<Int>) -> [(String, JSONObject)] {
        range.map { i in ("p\(i)", ["name": .string("Product \(i)"), "price": .int(Int64(i)), "brand": i % 2 == 0 ? "Acme" : "Zenith"]) }
    }

    /// A new bucket named after `prefix` holding an empty `Product` collection, made by `user`,
    /// who administers it through the returned client.
    static func productCollection(_ url: URL, _ user: Credentials, bucket prefix: String) async throws -> (KintoAdmin, String) {
        let bucket = KintoServers.unique(prefix)
        let server = KintoAdmin(url, user)
        try await server.call("PUT", "buckets/\(bucket)", ["data": [:]])
        try await server.call("PUT", "buckets/\(bucket)/collections/Product", ["data": [:]])
        return (server, bucket)
    }

    /// A new user of the main server, with a bucket of its own named after `prefix` holding an
    /// empty `Product` collection.
    static func newUser(_ name: String, password: String, bucket prefix: String) async throws -> (
        url: URL, user: Credentials, server: KintoAdmin, bucket: String
    ) {
        let url = try KintoServers.main()
        let user = Credentials(user: KintoServers.unique(name), password: password)
        let (server, bucket) = try await productCollection(url, user, bucket: prefix)
        return (url, user, server, bucket)
    }

    /// A new account on the accounts server (Kinto's memory backend), with a bucket of its own
    /// named after `prefix` holding an empty `Product` collection.
    static func newAccount(_ name: String, bucket prefix: String) async throws -> (
        url: URL, user: Credentials, server: KintoAdmin, bucket: String
    ) {
        let url = try KintoServers.accounts()
        let name = KintoServers.unique(name)
        _ = try await KintoAdmin(url, Credentials(user: "", password: "")).raw("PUT", "accounts/\(name)", ["data": ["password": "pw"]])
        let user = Credentials(user: name, password: "pw")
        let (server, bucket) = try await productCollection(url, user, bucket: prefix)
        return (url, user, server, bucket)
    }

    static func expectSame(_ device: SyncClient, _ server: KintoAdmin, _ bucket: String, sourceLocation: SourceLocation = #_sourceLocation)
        async throws
    {
        let local = try device.objects("Product")
        let remote = try await server.objects(bucket, "Product")
        #expect(local.count == remote.count, sourceLocation: sourceLocation)
        #expect(local == remote, "the store and the server differ", sourceLocation: sourceLocation)
        #expect(try device.store.changeFates(model: "Product") == [:], sourceLocation: sourceLocation)
        #expect(try device.store.verify().problems == [], sourceLocation: sourceLocation)
    }

    @Test("20,000 records in pages, server edits and deletes, local changes, conflicts resolved both ways")
    func lifeOfACollection() async throws {
        let url = try KintoServers.main()
        let user = Credentials(user: KintoServers.unique("ann"), password: "ann-secret")
        let (server, bucket) = try await Self.productCollection(url, user, bucket: "app")
        // 20,000 records written straight into the server's database (Kinto's API writes about
        // 150 a second here); Kinto's trigger gives each its own increasing last_modified.
        try await KintoServers.sql(
            """
            INSERT INTO objects (id, parent_id, resource_name, data, deleted)
            SELECT 'p' || i, '/buckets/\(bucket)/collections/Product', 'record',
                   jsonb_build_object('name', 'Product ' || i, 'price', i, 'brand', CASE WHEN i % 2 = 0 THEN 'Acme' ELSE 'Zenith' END),
                   false
            FROM generate_series(1, 20000) AS i
            """)
        #expect(try await server.list(bucket, "Product").count == 20_000)

        // The first pull: 20,000 records in 40 pages.
        let device = try await Self.device(url, bucket: bucket, user, pageSize: 500)
        let first = try await device.engine.sync(models: ["Product"])
        #expect(first.pulled == 20_000)
        #expect(device.log.notifications(.inProgress, model: "Product").count >= 40, "pages of 500")
        #expect(try device.model("Product").count() == 20_000)
        #expect(try device.model("Product").find("p12345")?.attributes == ["name": "Product 12345", "price": 12345, "brand": "Zenith"])
        // Nothing changed: the collection answers 304.
        #expect(try await device.engine.sync(models: ["Product"]).pulled == 0)

        // Server-side edits, attribute removals, deletes and creates, then a delta.
        var edits: [(String, JSONObject)] = []
        for i in 1...100 { edits.append(("p\(i)", ["name": .string("Product \(i)"), "price": .int(Int64(1000 + i)), "brand": "Acme"])) }
        for i in 101...150 { edits.append(("p\(i)", ["name": .string("Product \(i)"), "price": .int(Int64(i))])) }
        for i in 20_001...20_010 { edits.append(("p\(i)", ["name": .string("New \(i)")])) }
        try await server.putMany(bucket, "Product", edits)
        for i in 151...180 { try await server.call("DELETE", server.records(bucket, "Product") + "/p\(i)") }
        device.log.clear()
        let delta = try await device.engine.sync(models: ["Product"])
        #expect(delta.pulled == 190)
        let changed = device.log.objects("Product")
        #expect(changed.deleted.count == 30 && changed.created.count == 10)
        #expect(try device.model("Product").find("p120")?["brand"] == nil, "a removed attribute is removed here")
        #expect(try device.model("Product").find("p160") == nil)
        try await Self.expectSame(device, server, bucket)

        // Local creates (one with an id Kinto would refuse as it is), updates, deletes.
        let products = try device.model("Product")
        for i in 1...30 { try products.create(["object": .string("local \(i)"), "name": .string("Local \(i)"), "id": .string("own-\(i)")]) }
        for i in 200..<240 { try products.update("p\(i)", with: ["price": .int(Int64(-i)), "brand": .null]) }
        for i in 300..<320 { try products.delete("p\(i)") }
        let pushed = try await device.engine.sync(models: ["Product"])
        #expect(pushed.accepted == 90 && pushed.refused == 0)
        let raw = try await server.call("GET", server.records(bucket, "Product") + "/" + KintoMapping.recordID("local 7"))
        #expect(raw["data"]?["~id"] == "own-7", "an attribute named id travels escaped")
        #expect(raw["data"]?["last_modified"]?.intValue != nil)
        let removed = try await server.call("GET", server.records(bucket, "Product") + "/p200")["data"]?.objectValue
        #expect(
            removed.map { !$0.contains("brand") && $0["price"] == -200 } == true,
            "a removed attribute is gone from the record: \(String(describing: removed))")
        try await Self.expectSame(device, server, bucket)

        // A concurrent edit of another attribute: Kinto's 412, merged and sent again in the same sync.
        try await server.call("PATCH", server.records(bucket, "Product") + "/p1", ["data": ["name": "Server name"]])
        try products.update("p1", with: ["price": 999])
        let merged = try await device.engine.sync(models: ["Product"])
        #expect(merged.refused == 0 && merged.merged == 1)
        #expect(try await server.objects(bucket, "Product")["p1"] == ["name": "Server name", "price": 999, "brand": "Acme"])
        // A concurrent edit of the same attribute: 412, kept, resolved by retry (the local change wins)...
        try await server.call("PATCH", server.records(bucket, "Product") + "/p1", ["data": ["price": 5]])
        try products.update("p1", with: ["price": 998])
        #expect(try await device.engine.sync(models: ["Product"]).refused == 1)
        let conflict = try #require(try device.store.refusedChanges(model: "Product").first)
        #expect(conflict.code == "412" && conflict.serverCopy?["price"] == 5 && conflict.actions == [.retry, .rollback])
        try device.store.resolve("Product", "p1", .retry)
        #expect(try await device.engine.sync(models: ["Product"]).refused == 0)
        #expect(try await server.objects(bucket, "Product")["p1"] == ["name": "Server name", "price": 998, "brand": "Acme"])
        // ... and by rollback (the server's record wins).
        try await server.call("PATCH", server.records(bucket, "Product") + "/p2", ["data": ["price": 2]])
        try products.update("p2", with: ["price": 50])
        #expect(try await device.engine.sync(models: ["Product"]).refused == 1)
        try device.store.resolve("Product", "p2", .rollback)
        #expect(try products.find("p2")?["price"] == 2)
        try await device.engine.sync(models: ["Product"])
        try await Self.expectSame(device, server, bucket)
    }

    @Test("a removal leaves no null in the record; device-only attributes stay here, ignored ones there; a concurrent edit is a 412")
    func removalsOnTheServer() async throws {
        let url = try KintoServers.main()
        let user = Credentials(user: KintoServers.unique("eve"), password: "pw")
        let (server, bucket) = try await Self.productCollection(url, user, bucket: "rm")
        try await server.putMany(
            bucket, "Product",
            [
                ("p1", ["name": "One", "brand": "Acme", "colour": "red"]), ("p2", ["name": "Two", "brand": "Acme", "secret": "server only"]),
            ])
        func record(_ id: String) async throws -> JSONObject {
            try #require(try await server.call("GET", server.records(bucket, "Product") + "/" + id)["data"]?.objectValue)
        }
        let device = try await Self.device(url, bucket: bucket, user, pageSize: 50)
        let products = try device.model("Product")
        try await device.engine.configure("Product", ModelSyncConfiguration(deviceOnlyAttributes: ["favourite"]))
        try await device.engine.sync(models: ["Product"])

        try products.update("p1", with: ["colour": .null, "favourite": true])
        #expect(try await device.engine.sync(models: ["Product"]).refused == 0)
        let p1 = try await record("p1")
        #expect(!p1.contains("colour"), "removed, not null: \(p1)")
        #expect(!p1.contains("favourite"), "a device-only attribute never leaves the device")
        #expect(p1["name"] == "One" && p1["brand"] == "Acme")
        #expect(try products.find("p1")?["favourite"] == true)

        // This device stops pulling `secret`: a removal here must not erase it there.
        try await device.engine.configure("Product", ModelSyncConfiguration(ignoredAttributes: ["secret"], deviceOnlyAttributes: ["favourite"]))
        try products.update("p2", with: ["brand": .null])
        #expect(try await device.engine.sync(models: ["Product"]).refused == 0)
        let p2 = try await record("p2")
        #expect(!p2.contains("brand") && p2["secret"] == "server only" && p2["name"] == "Two", "\(p2)")

        // A removal made from an older version while the server changed another attribute: the
        // 412 is merged, and the removal sent again at once.
        try await server.call("PATCH", server.records(bucket, "Product") + "/p1", ["data": ["name": "Server name"]])
        try products.update("p1", with: ["brand": .null])
        let merged = try await device.engine.sync(models: ["Product"])
        #expect(merged.refused == 0 && merged.merged == 1)
        var resolved = try await record("p1")
        #expect(!resolved.contains("brand") && resolved["name"] == "Server name", "\(resolved)")
        #expect(try products.find("p1")?.attributes == ["name": "Server name", "favourite": true])

        // A removal of an attribute the server changed meanwhile is refused with the server's record (412).
        try await server.call("PATCH", server.records(bucket, "Product") + "/p1", ["data": ["brand": "Server brand"]])
        try await device.engine.sync(models: ["Product"])
        try await server.call("PATCH", server.records(bucket, "Product") + "/p1", ["data": ["brand": "Newer brand"]])
        try products.update("p1", with: ["brand": .null])
        #expect(try await device.engine.sync(models: ["Product"]).refused == 1)
        let conflict = try #require(try device.store.refusedChanges(model: "Product").first)
        #expect(conflict.code == "412" && conflict.serverCopy?["brand"] == "Newer brand" && conflict.serverCopy?["name"] == "Server name")
        #expect(try await record("p1")["brand"] == "Newer brand", "nothing was written")
        try device.store.resolve("Product", "p1", .retry)
        #expect(try await device.engine.sync(models: ["Product"]).refused == 0)
        resolved = try await record("p1")
        #expect(!resolved.contains("brand") && resolved["name"] == "Server name", "\(resolved)")
        #expect(try products.find("p1")?.attributes == ["name": "Server name", "favourite": true])
    }

    @Test(
        "an update that removes attributes replaces an object-valued one whole, nested nulls kept, and removes one the server never had (found by a black-box probe)"
    )
    func removalBesideAnObject() async throws {
        let url = try KintoServers.main()
        let user = Credentials(user: KintoServers.unique("olga"), password: "pw")
        let (server, bucket) = try await Self.productCollection(url, user, bucket: "obj")
        try await server.putMany(bucket, "Product", [("p1", ["name": "One", "a": 1, "o": ["old": 1, "x": 2], "odd/~name": 3])])
        let device = try await Self.device(url, bucket: bucket, user, pageSize: 50)
        let products = try device.model("Product")
        try await device.engine.sync(models: ["Product"])
        try products.update("p1", with: ["a": .null, "o": ["new": 1, "k": .null], "odd/~name": .null])
        // Set and removed here before a push: the server never has it.
        try products.update("p1", with: ["tmp": 5])
        try products.update("p1", with: ["tmp": .null])
        #expect(try await device.engine.sync(models: ["Product"]).refused == 0)
        let record = try #require(try await server.call("GET", server.records(bucket, "Product") + "/p1")["data"]?.objectValue)
        #expect(record["o"] == ["new": 1, "k": .null], "replaced whole: \(record)")
        #expect(!record.contains("a") && !record.contains("tmp") && !record.contains("odd/~name") && record["name"] == "One", "\(record)")
        #expect(try products.find("p1")?.attributes == ["name": "One", "o": ["new": 1, "k": .null]])
        try await Self.expectSame(device, server, bucket)
    }

    @Test("a first sync that only pulls creates the bucket and the collection; a record deleted during the first pull is seen deleted")
    func firstPullOfANewBucket() async throws {
        let url = try KintoServers.main()
        let user = Credentials(user: KintoServers.unique("dee"), password: "pw")
        let bucket = KintoServers.unique("new")
        let device = try await Self.device(url, bucket: bucket, user, pageSize: 2)
        #expect(try await device.engine.sync(models: ["Product"]).pulled == 0)
        let server = KintoAdmin(url, user)
        #expect(try await server.call("GET", "buckets/\(bucket)/collections/Product")["data"]?["id"] == "Product")

        // Records, then a first pull on another device that pages while the server deletes one it
        // already sent and edits another: the delete is not missed.
        try await server.putMany(bucket, "Product", Self.products(1...6))
        let hook = BeforePull(wrapped: KintoBackend(configuration: .init(url: url, bucket: bucket, timeout: 30)))
        hook.arm(pull: 2) {
            try await server.call("DELETE", server.records(bucket, "Product") + "/p1")
            try await server.call("PATCH", server.records(bucket, "Product") + "/p2", ["data": ["price": 200]])
        }
        let second = try await Self.device(url, bucket: bucket, user, pageSize: 2) { _ in hook }
        try await second.engine.sync(models: ["Product"])
        try await second.engine.sync(models: ["Product"])
        #expect(try second.model("Product").find("p1") == nil)
        #expect(try second.model("Product").find("p2")?["price"] == 200)
        try await Self.expectSame(second, server, bucket)
    }

    @Test(
        "an empty collection's pull keeps the collection's timestamp (its ETag) as the cursor: the next pull asks from there, not from 0 (found by a black-box probe)"
    )
    func emptyCollectionCursor() async throws {
        let url = try KintoServers.main()
        let user = Credentials(user: KintoServers.unique("eve"), password: "pw")
        let bucket = KintoServers.unique("empty")
        let log = PullLog(wrapped: KintoBackend(configuration: .init(url: url, bucket: bucket, timeout: 30)))
        let device = try await Self.device(url, bucket: bucket, user, pageSize: 2) { _ in log }
        #expect(try await device.engine.sync(models: ["Product"]).pulled == 0)
        #expect(try await device.engine.sync(models: ["Product"]).pulled == 0)
        let cursors = log.cursors
        #expect(cursors.count >= 2 && cursors.first == .some(nil))
        #expect(cursors.last??["since"]?.intValue != nil, "\(cursors)")

        // A record put after that timestamp arrives.
        let server = KintoAdmin(url, user)
        try await server.putMany(bucket, "Product", Self.products(1...1))
        #expect(try await device.engine.sync(models: ["Product"]).pulled == 1)
        try await Self.expectSame(device, server, bucket)
    }

    @Test("each page of a pull carries the total Kinto tells on HEAD (Total-Objects), a server filter's too; a list answer tells none")
    func totals() async throws {
        let url = try KintoServers.main()
        let user = Credentials(user: KintoServers.unique("tom"), password: "pw")
        let (server, bucket) = try await Self.productCollection(url, user, bucket: "tot")
        try await server.putMany(bucket, "Product", Self.products(1...12))
        // What Kinto 26 answers: the total on HEAD, none on a list.
        #expect(try await server.raw("HEAD", server.records(bucket, "Product")).header("total-objects") == "12")
        let listed = try await server.raw("GET", server.records(bucket, "Product") + "?_since=0&_limit=5")
        #expect(listed.status == 200 && listed.header("total-objects") == nil && listed.header("total-records") == nil)

        let device = try await Self.device(url, bucket: bucket, user, pageSize: 5)
        try await device.engine.sync(models: ["Product"])
        let first = device.log.notifications(.inProgress, model: "Product")
        #expect(first.count == 3 && first.allSatisfy { $0.totalCount == 12 }, "\(first.map(\.totalCount))")

        // A delta after 3 creates and a delete: the server holds 14.
        try await server.putMany(bucket, "Product", Self.products(13...15))
        try await server.call("DELETE", server.records(bucket, "Product") + "/p1")
        device.log.clear()
        try await device.engine.sync(models: ["Product"])
        let delta = device.log.notifications(.inProgress, model: "Product")
        #expect(!delta.isEmpty && delta.allSatisfy { $0.totalCount == 14 }, "\(delta.map(\.totalCount))")

        // Through a server filter, the total is of the records it matches (p2, p4 … p14).
        let filtered = try await Self.device(url, bucket: bucket, user, pageSize: 5)
        try await filtered.engine.configure("Product", ModelSyncConfiguration(serverFilter: ["brand": "Acme"]))
        try await filtered.engine.sync(models: ["Product"])
        let acme = filtered.log.notifications(.inProgress, model: "Product")
        #expect(try filtered.model("Product").count() == 7)
        #expect(acme.count == 2 && acme.allSatisfy { $0.totalCount == 7 }, "\(acme.map(\.totalCount))")
    }

    /// A device of a new user of the main server whose model `Photo` has the blob attribute
    /// `image`, syncing a new bucket named after `prefix`; the user's admin client.
    static func photoClient(_ name: String, bucket prefix: String) async throws -> (SyncClient, KintoAdmin, String) {
        let url = try KintoServers.main()
        let user = Credentials(user: KintoServers.unique(name), password: "pw")
        let bucket = KintoServers.unique(prefix)
        let photo = ModelDefinition(name: "Photo", blobAttributes: ["image"])
        let client = try SyncClient(backend: KintoBackend(configuration: .init(url: url, bucket: bucket, timeout: 30)), models: [photo], pageSize: 10)
        await client.record()
        try await client.engine.logIn(user)
        return (client, KintoAdmin(url, user), bucket)
    }

    @Test(
        "a blob is the record's attachment: uploaded as <content hash>.bin with no field of its own, the version after it kept, kept through a removal, its file deleted with the record; two blob attributes are refused"
    )
    func attachments() async throws {
        let (client, server, bucket) = try await Self.photoClient("ivy", bucket: "att")
        let photos = try client.model("Photo")
        let bytes = Data((0..<40_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) })
        let reference = try client.store.blobs.put(bytes)
        try photos.create(["object": "ph1", "title": "Sunset", "note": "draft", "image": .string(reference)])
        #expect(try await client.engine.sync(models: ["Photo"]).accepted == 1)

        let path = server.records(bucket, "Photo") + "/ph1"
        func stored() async throws -> JSONObject { try #require(try await server.call("GET", path)["data"]?.objectValue) }
        let record = try await stored()
        let attachment = try #require(record["attachment"]?.objectValue, "\(record)")
        #expect(record["image"] == nil, "the blob travels as the attachment only")
        #expect(attachment["filename"] == .string(reference.dropFirst("blob:".count) + ".bin"))
        #expect(attachment["size"] == .int(Int64(bytes.count)) && attachment["mimetype"] == "application/octet-stream")
        let location = try #require(attachment["location"]?.stringValue)
        #expect(try KintoServers.attachmentFile(location) == bytes, "the plugin's file holds the bytes")

        // The version after the upload is the record's: the next update meets no 412. A removal
        // goes as a merge patch, which keeps the attachment (a PUT of the record would drop it).
        try photos.update("ph1", with: ["title": "Dusk", "note": .null])
        #expect(try await client.engine.sync(models: ["Photo"]).refused == 0)
        let updated = try await stored()
        #expect(updated["title"] == "Dusk" && updated["note"] == nil, "\(updated)")
        #expect(updated["attachment"]?["location"]?.stringValue == location, "the attachment stays")
        #expect(try photos.find("ph1")?["image"] == .string(reference), "the same bytes, the same reference here")

        // Deleted here: the record goes, and the plugin deletes its file.
        try photos.delete("ph1")
        #expect(try await client.engine.sync(models: ["Photo"]).accepted == 1)
        #expect(try await server.raw("GET", path).status == 404)
        #expect(try KintoServers.attachmentFile(location) == nil, "the file is gone from the server's disk")

        // Two blob attributes cannot map onto one attachment: a one-line error, nothing sent.
        _ = try client.store.register(ModelDefinition(name: "Album", blobAttributes: ["cover", "back"]))
        try client.model("Album").create(["object": "a1", "title": "Two sides"])
        let error = await #expect(throws: SyncError.self) { try await client.engine.sync(models: ["Album"]) }
        #expect(error?.code == .notSupported, "\(String(describing: error))")
        #expect(
            error.map { $0.message.contains("cover, back") && $0.message.contains("one attachment per record") && !$0.message.contains("\n") } == true
        )
        #expect(try await server.raw("GET", server.records(bucket, "Album")).status != 200, "nothing was created")
    }

    @Test(
        "a value in the blob attribute that is neither a blob nor a URL is a refused change (notABlob), not dropped: nothing is sent, the value stays here (found by a black-box probe)"
    )
    func plainValueInTheBlobAttribute() async throws {
        let (client, server, bucket) = try await Self.photoClient("jo", bucket: "plainblob")
        let photos = try client.model("Photo")
        try photos.create(["object": "ph1", "title": "Sunset"])
        try photos.create(["object": "ph2", "title": "Dawn", "image": "plain"])
        let report = try await client.engine.sync(models: ["Photo"])
        #expect(report.accepted == 1 && report.refused == 1, "\(report)")
        try photos.update("ph1", with: ["image": 7])
        #expect(try await client.engine.sync(models: ["Photo"]).refused == 1)

        let refusals = try client.store.refusedChanges(model: "Photo").sorted { $0.objectID < $1.objectID }
        #expect(refusals.map(\.objectID) == ["ph1", "ph2"] && refusals.allSatisfy { $0.code == "notABlob" }, "\(refusals)")
        #expect(refusals.first?.message.contains("image") == true)
        #expect(try photos.find("ph2")?["image"] == "plain" && photos.find("ph1")?["image"] == 7, "the values stay here")
        let stored = try await server.objects(bucket, "Photo")
        #expect(stored == ["ph1": ["title": "Sunset"]], "nothing of the refused changes was sent: \(stored)")
        // The update's refusal holds the server's copy, which a rollback takes (a black-box
        // probe: there was none, though the adapter's page says rollback).
        #expect(refusals.first?.serverCopy == ["title": "Sunset"], "\(refusals)")
        try client.store.resolve("Photo", "ph1", .rollback)
        #expect(try photos.find("ph1")?.attributes == ["title": "Sunset"])
        #expect(try await client.engine.sync(models: ["Photo"]).refused == 0, "nothing more to send")
        #expect(try client.store.refusedChanges(model: "Photo").map(\.objectID) == ["ph2"])
    }

    @Test("a wrong password is a clear 401 error and leaves the store as it was (accounts plugin)")
    func wrongPassword() async throws {
        let url = try KintoServers.accounts()
        let name = KintoServers.unique("bob")
        let anonymous = KintoAdmin(url, Credentials(user: "", password: ""))
        _ = try await anonymous.raw("PUT", "accounts/\(name)", ["data": ["password": "right-password"]])
        let user = Credentials(user: name, password: "right-password")
        let bucket = KintoServers.unique("acc")
        let device = try await Self.device(url, bucket: bucket, user, pageSize: 50)
        try device.model("Product").create(["object": "a1", "name": "First"])
        try await device.engine.sync(models: ["Product"])
        try device.model("Product").update("a1", with: ["name": "Changed offline"])
        let before = try device.objects("Product")

        // The password changes on the server (another device of the user did it).
        try await KintoAdmin(url, user).call("PATCH", "accounts/\(name)", ["data": ["password": "new-password"]])
        await expectUnauthorized { try await device.engine.sync(models: ["Product"]) }
        await expectUnauthorized { try await device.engine.logIn(Credentials(user: name, password: "wrong")) }
        #expect(try device.objects("Product") == before)
        let fate = try device.store.changeFates(model: "Product")["a1"]
        #expect(fate == .pending(.update) || fate == .inFlight(.update, awaitingLink: false), "the local change waits: \(String(describing: fate))")
        #expect(try device.store.verify().problems == [])

        // A fresh device with a wrong password gets nothing stored.
        let fresh = try SyncClient(backend: KintoBackend(url: url, bucket: bucket), models: [Self.product])
        await expectUnauthorized { try await fresh.engine.logIn(Credentials(user: name, password: "right-password")) }
        #expect(await !fresh.engine.isLoggedIn)

        try await device.engine.logIn(Credentials(user: name, password: "new-password"))
        #expect(try await device.engine.sync(models: ["Product"]).accepted == 1)
        #expect(
            try await KintoAdmin(url, Credentials(user: name, password: "new-password")).objects(bucket, "Product")["a1"]?["name"]
                == "Changed offline")
    }

    @Test(
        "a wrong password under basic auth (another user, refused every write with 403) fails the sync naming the bucket and leaves the change pending, not refused (found by a black-box probe)"
    )
    func wrongPasswordUnderBasicAuth() async throws {
        let (url, user, server, bucket) = try await Self.newUser("carol", password: "right-password", bucket: "pw")
        let device = try await Self.device(url, bucket: bucket, user, pageSize: 50)
        try device.model("Product").create(["object": "a1", "name": "First"])
        try await device.engine.sync(models: ["Product"])
        try device.model("Product").update("a1", with: ["name": "Changed offline"])
        let before = try device.objects("Product")

        // Basic auth takes any password: a wrong one is another user, who may not touch the bucket.
        try await device.engine.logIn(Credentials(user: user.user, password: "wrong-password"))
        let error = await #expect(throws: SyncError.self) { try await device.engine.sync(models: ["Product"]) }
        #expect(error?.code == .server && error?.httpStatus == 403, "\(String(describing: error))")
        #expect(error?.message.contains(bucket) == true && error?.message.contains("password") == true, "\(String(describing: error))")
        #expect(try device.objects("Product") == before)
        let fate = try device.store.changeFates(model: "Product")["a1"]
        #expect(fate == .pending(.update) || fate == .inFlight(.update, awaitingLink: false), "the change waits: \(String(describing: fate))")
        #expect(try await server.objects(bucket, "Product")["a1"]?["name"] == "First")

        try await device.engine.logIn(user)
        #expect(try await device.engine.sync(models: ["Product"]).accepted == 1)
        #expect(try await server.objects(bucket, "Product")["a1"]?["name"] == "Changed offline")
    }

    @Test("a URL that is Kinto's server root, not its API's (/v1), is refused at login naming the API root, before anything is written")
    func rootWithoutVersion() async throws {
        let api = try KintoServers.main()
        let serverRoot = api.deletingLastPathComponent()
        let backend = KintoBackend(configuration: .init(url: serverRoot, bucket: KintoServers.unique("root"), timeout: 30))
        let error = await #expect(throws: SyncError.self) { try await backend.logIn(Credentials(user: "dora", password: "secret")) }
        #expect(error?.code == .protocolViolation, "\(String(describing: error))")
        #expect(error?.message.contains("redirects to \(api.absoluteString)") == true, "\(String(describing: error))")
        // A URL below the API root is no wrong password either (a black-box probe: it said so).
        let below = KintoBackend(configuration: .init(url: api.appendingPathComponent("buckets"), bucket: KintoServers.unique("root"), timeout: 30))
        let refused = await #expect(throws: SyncError.self) { try await below.logIn(Credentials(user: "dora", password: "secret")) }
        #expect(refused?.code == .protocolViolation && refused?.message.contains("not Kinto's API root") == true, "\(String(describing: refused))")
    }

    @Test(
        "a record field named object, written by another client, is pulled as ~object and kept on the server through an edit that removes an attribute (found by a black-box probe)"
    )
    func aFieldNamedObject() async throws {
        let (url, user, server, bucket) = try await Self.newUser("erin", password: "secret", bucket: "objfield")
        try await server.call("PUT", "buckets/\(bucket)/collections/Product/records/g1", ["data": ["object": "zzz", "name": "n", "extra": "e"]])
        try await server.call("PUT", "buckets/\(bucket)/collections/Product/records/g3", ["data": ["object": 5]])
        let device = try await Self.device(url, bucket: bucket, user, pageSize: 50)
        try await device.engine.sync(models: ["Product"])
        #expect(try device.model("Product").find("g1")?.attributes == ["~object": "zzz", "name": "n", "extra": "e"])
        #expect(try device.model("Product").find("g3")?.attributes == ["~object": 5])
        try device.model("Product").update("g1", with: ["extra": .null])
        try await device.engine.sync(models: ["Product"])
        // The server's own copy, read raw (not through the mapping).
        func data(_ id: String) async throws -> JSONObject? {
            var data = try await server.call("GET", server.records(bucket, "Product") + "/" + id)["data"]?.objectValue
            data?["id"] = nil
            data?["last_modified"] = nil
            return data
        }
        #expect(try await data("g1") == ["object": "zzz", "name": "n"])
        #expect(try await data("g3") == ["object": 5])
    }

    @Test(
        "records another client wrote with names Satchel's mapping never makes: an x-- id that is no encoding takes its edits and deletes; a ~ field is not read over the plain one and stays through a removal; all-null records and records without a prefix's field leave verify and search working (found by a black-box probe)"
    )
    func foreignNames() async throws {
        let (url, user, server, bucket) = try await Self.newUser("gil", password: "secret", bucket: "foreign")
        let records = server.records(bucket, "Product")
        try await server.call("PUT", records + "/x--notb64", ["data": ["name": "caffe", "w": 1]])
        try await server.call("PUT", records + "/x--YQ", ["data": ["name": "cafe", "w": 1]])
        try await server.call("PUT", records + "/c1", ["data": ["z": "plain", "~z": "tilde", "~object": "t", "~~object": "tt", "k": 1]])
        try await server.call("PUT", records + "/n1", ["data": ["gone": .null]])
        try await server.call("PUT", records + "/m1", ["data": ["w": 2]])
        let device = try await Self.device(url, bucket: bucket, user, pageSize: 50)
        try await device.engine.sync(models: ["Product"])
        let products = try device.model("Product")
        #expect(try products.find("x--notb64")?.attributes == ["name": "caffe", "w": 1])
        #expect(try products.find("x--YQ")?.attributes == ["name": "cafe", "w": 1])
        #expect(try products.find("c1")?.attributes == ["z": "plain", "k": 1], "no field read over another")
        #expect(try products.find("n1") == nil && products.count() == 4)

        // verify and search read the all-null record as no object, and a prefix meets m1 (no name).
        let drift = try await device.engine.verify("Product")
        #expect(drift.agrees && drift.objects == 4, "\(drift.summary)")
        let found = try await device.engine.search("Product", where: Field("name").beginsWith("caf"))
        #expect(found.map(\.id).sorted() == ["x--YQ", "x--notb64"])

        // Edits and deletes go to the records they came from; the removal keeps the ~ fields.
        try products.update("x--notb64", with: ["w": 2])
        try products.delete("x--YQ")
        try products.update("c1", with: ["z": .null])
        let report = try await device.engine.sync(models: ["Product"])
        #expect(report.refused == 0, "\(report)")
        func data(_ id: String) async throws -> JSONObject? {
            guard try await server.raw("GET", records + "/" + id).status == 200 else { return nil }
            var data = try await server.call("GET", records + "/" + id)["data"]?.objectValue
            data?["id"] = nil
            data?["last_modified"] = nil
            return data
        }
        #expect(try await data("x--notb64") == ["name": "caffe", "w": 2])
        #expect(try await data("x--YQ") == nil, "deleted there")
        #expect(try await server.list(bucket, "Product").count == 4, "no record under a second encoding")
        #expect(try await data("c1") == ["~z": "tilde", "~object": "t", "~~object": "tt", "k": 1], "the ~ fields stay")
        #expect(try await device.engine.verify("Product").agrees)
    }

    @Test(
        "verify keeps ids that are canonically equivalent but spelled with other scalars apart, as the store and Kinto do (found by a black-box probe)"
    )
    func verifyKeepsEquivalentIDsApart() async throws {
        let (url, user, server, bucket) = try await Self.newUser("ida", password: "secret", bucket: "nfc")
        let composed = "caf\u{E9}"
        let decomposed = "cafe\u{301}"
        let device = try await Self.device(url, bucket: bucket, user, pageSize: 50)
        for (id, v) in [(composed, 1), (decomposed, 2), ("tea", 3)] {
            try device.model("Product").create(["object": .string(id), "v": .int(Int64(v))])
        }
        try await device.engine.sync(models: ["Product"])
        #expect(try await server.list(bucket, "Product").count == 3)
        let clean = try await device.engine.verify("Product")
        #expect(clean.agrees && clean.objects == 3, "\(clean.summary)")

        let records = server.records(bucket, "Product")
        try await server.call("DELETE", records + "/" + KintoMapping.recordID(composed))
        try await server.call("PATCH", records + "/" + KintoMapping.recordID(decomposed), ["data": ["v": 99]])
        let report = try await device.engine.verify("Product")
        let drifts = report.drifts.map { ($0.id.unicodeScalars.map(\.value), $0.kind) }
        #expect(report.objects == 3 && drifts.count == 2, "\(report.summary) \(report.drifts)")
        #expect(drifts.contains { $0.0 == composed.unicodeScalars.map(\.value) && $0.1 == .onlyHere })
        #expect(drifts.contains { $0.0 == decomposed.unicodeScalars.map(\.value) && $0.1 == .differs })
    }

    @Test(
        "a prefix search on Kinto's memory backend, whose like_ fails on a record without the field or with a number there, meets such records (found by black-box probes)"
    )
    func prefixSearchOnTheMemoryBackend() async throws {
        let (url, user, server, bucket) = try await Self.newAccount("hal", bucket: "prefix")
        // A number and an array in the field too (found by a black-box probe: the memory backend's like_ answered 500).
        for (id, data) in [("a1", ["name": "cafe"]), ("a2", ["w": 1]), ("a3", ["name": "tea"]), ("a4", ["name": 5]), ("a5", ["name": ["cafe"]])]
            as [(String, JSONObject)]
        {
            try await server.call("PUT", server.records(bucket, "Product") + "/" + id, ["data": .object(data)])
        }
        let device = try await Self.device(url, bucket: bucket, user, pageSize: 50)
        let found = try await device.engine.search("Product", where: Field("name").beginsWith("caf"))
        #expect(found.map(\.id) == ["a1"])
    }

    @Test(
        "an update this user may not make, of a record it may read: refused with the record as its server copy, which rollback takes, in a batch or alone as a JSON Patch (found by black-box probes)",
        arguments: [false, true])
    func forbiddenUpdateRollsBack(removing: Bool) async throws {
        let server = try await KintoHarness().makeServer()
        let id = try await server.put("Product", ["name": "Seed", "price": 1], id: nil)
        let client = try SyncClient(backend: server.backend, models: [Self.product], pageSize: 50)
        try await client.engine.logIn(server.credentials)
        try await client.engine.sync(models: ["Product"])
        try await server.refuse(.update, model: "Product", id: id)
        // A removal goes alone, as a JSON Patch (a black-box probe: its 403 kept no copy).
        try client.model("Product").update(id, with: removing ? ["price": .null] : ["price": 2])
        #expect(try await client.engine.sync(models: ["Product"]).refused == 1)
        let error = try #require(try client.store.refusedChanges(model: "Product").first)
        #expect(error.code == "403" && error.serverCopy?["price"] == 1 && error.actions.contains(.rollback), "\(error)")
        try client.store.resolve("Product", id, .rollback)
        #expect(try client.model("Product").find(id)?.attributes == ["name": "Seed", "price": 1])
        #expect(try await client.engine.sync(models: ["Product"]).refused == 0)
        #expect(try client.store.changeFates(model: "Product") == [:])
    }

    @Test(
        "a search that stores leaves an object changed here as it is, its version too: the next sync still meets the server's concurrent change (found by a black-box probe)"
    )
    func searchKeepsTheBaseOfALocalChange() async throws {
        let (url, user, server, bucket) = try await Self.newUser("sam", password: "secret", bucket: "searchbase")
        try await server.putMany(bucket, "Product", [("p1", ["name": "One", "b": "old"]), ("p2", ["name": "Two"])])
        let device = try await Self.device(url, bucket: bucket, user, pageSize: 50)
        try await device.engine.sync(models: ["Product"])
        try await server.call("PATCH", server.records(bucket, "Product") + "/p1", ["data": ["b": "server"]])
        try await server.call("PATCH", server.records(bucket, "Product") + "/p2", ["data": ["name": "Two on the server"]])
        try device.model("Product").update("p1", with: ["b": "device"])
        let found = try await device.engine.search("Product", where: .all, storing: true)
        #expect(Set(found.map(\.id)) == ["p1", "p2"])
        #expect(try device.model("Product").find("p1")?["b"] == "device" && device.model("Product").find("p2")?["name"] == "Two on the server")
        let report = try await device.engine.sync(models: ["Product"])
        #expect(report.refused == 1, "the concurrent change of b is met: \(report)")
        #expect(try await server.call("GET", server.records(bucket, "Product") + "/p1")["data"]?["b"] == "server", "not overwritten")
    }

    @Test("a create whose id a record of nulls only holds on the server is written over it, not retried for ever (found by a black-box probe)")
    func createOverANullRecord() async throws {
        let (url, user, server, bucket) = try await Self.newUser("nil", password: "secret", bucket: "nullrecord")
        try await server.call("PUT", server.records(bucket, "Product") + "/c1", ["data": ["x": .null]])
        let device = try await Self.device(url, bucket: bucket, user, pageSize: 50)
        try await device.engine.sync(models: ["Product"])
        #expect(try device.model("Product").find("c1") == nil, "a record of nulls is no object")
        try device.model("Product").create(["object": "c1", "v": 1])
        let pushed = try await device.engine.sync(models: ["Product"])
        #expect(pushed.refused == 0 && pushed.postponed == 0, "\(pushed)")
        let record = try #require(try await server.call("GET", server.records(bucket, "Product") + "/c1")["data"]?.objectValue)
        #expect(record["v"] == 1, "\(record)")
        #expect(try device.store.changeFates(model: "Product") == [:])
        try await Self.expectSame(device, server, bucket)
    }

    @Test(
        "a prefix holding regular-expression or LIKE characters, and a range of ids (encoded on the server), find exactly what a local query does (found by a black-box probe)"
    )
    func searchesKintoCannotSay() async throws {
        let (url, user, server, bucket) = try await Self.newAccount("ida", bucket: "odd")
        let objects: [(String, JSONObject)] = [
            ("_lead", ["name": "c$d"]), ("a.b", ["name": "g\\h"]), ("a1", ["name": "x(y"]), ("b2", ["name": "[z"]), ("c3", ["name": "50%_off"]),
            ("d4", ["name": "cd"]),
        ]
        for (id, data) in objects {
            try await server.call("PUT", server.records(bucket, "Product") + "/" + KintoMapping.recordID(id), ["data": .object(data)])
        }
        let device = try await Self.device(url, bucket: bucket, user, pageSize: 50)
        for (prefix, expected) in [("c$", ["_lead"]), ("g\\", ["a.b"]), ("x(", ["a1"]), ("[", ["b2"]), ("50%_", ["c3"]), ("5_", [])] {
            let found = try await device.engine.search("Product", where: Field("name").beginsWith(prefix))
            #expect(found.map(\.id).sorted() == expected, "\(prefix)")
        }
        let below = try await device.engine.search("Product", where: .id < .string("b"))
        #expect(below.map(\.id).sorted() == ["_lead", "a.b", "a1"])
    }

    @Test(
        "a create whose answer was lost, then edited here: the next sync finds its own record on the server and sends the edit over it (found by a black-box probe)"
    )
    func lostCreateAnswerThenEdit() async throws {
        let (url, user, server, bucket) = try await Self.newUser("fay", password: "secret", bucket: "lostcreate")
        let (device, faults) = try await Self.deviceThroughFaults(url, bucket: bucket, user)
        try device.model("Product").create(["object": "L2", "a": 1])
        faults.inject(.dropAnswer, on: .push)
        await #expect(throws: SyncError.self) { try await device.engine.sync(models: ["Product"]) }
        #expect(try await server.objects(bucket, "Product")["L2"] == ["a": 1], "the create landed; its answer did not")

        try device.model("Product").update("L2", with: ["b": 2])
        let report = try await device.engine.sync(models: ["Product"])
        #expect(report.refused == 0, "\(report)")
        #expect(try await server.objects(bucket, "Product")["L2"] == ["a": 1, "b": 2])
        #expect(try device.store.changeFates(model: "Product") == [:])
        #expect(try device.model("Product").find("L2")?.attributes == ["a": 1, "b": 2])

        // Edited to other values after the lost answer: the server's record is the lost create's
        // own, and the edit goes over it (found by a black-box probe: a 412 no action resolved).
        try device.model("Product").create(["object": "L4", "a": 1, "c": 3])
        faults.inject(.dropAnswer, on: .push)
        await #expect(throws: SyncError.self) { try await device.engine.sync(models: ["Product"]) }
        try device.model("Product").update("L4", with: ["a": 2, "b": 2])
        let edited = try await device.engine.sync(models: ["Product"])
        #expect(edited.refused == 0, "\(edited)")
        #expect(try await server.objects(bucket, "Product")["L4"] == ["a": 2, "b": 2, "c": 3])
        #expect(try device.store.changeFates(model: "Product") == [:])

        // A record of the same id that holds other values is still refused.
        try await server.call("PUT", server.records(bucket, "Product") + "/L3", ["data": ["a": 2]])
        try device.model("Product").create(["object": "L3", "a": 1, "b": 2])
        let refused = try await device.engine.sync(models: ["Product"])
        #expect(refused.refused == 1)
    }

    @Test(
        "a first push into a bucket not made yet whose answer was lost: the next sync makes the bucket and pushes (found by a black-box probe: Kinto's 403 for the missing bucket stopped every sync)"
    )
    func lostFirstPushIntoNewBucket() async throws {
        let url = try KintoServers.main()
        let user = Credentials(user: KintoServers.unique("nia"), password: "secret")
        let bucket = KintoServers.unique("notyet")
        let (device, faults) = try await Self.deviceThroughFaults(url, bucket: bucket, user)
        try device.model("Product").create(["object": "n1", "a": 1])
        faults.inject(.fail(SyncError(.network, "the connection was lost")), on: .push)
        await #expect(throws: SyncError.self) { try await device.engine.sync(models: ["Product"]) }
        let report = try await device.engine.sync(models: ["Product"])
        #expect(report.accepted == 1, "\(report)")
        #expect(try await KintoAdmin(url, user).objects(bucket, "Product")["n1"] == ["a": 1])
        #expect(try device.store.changeFates(model: "Product") == [:])
    }

    @Test(
        "a collection deleted on the server (no tombstones left): the next pull deletes its records here, keeps what waits to be pushed, and pushes it (found by a black-box probe: they stayed for good)"
    )
    func collectionDeletedOnTheServer() async throws {
        let (url, user, server, bucket) = try await Self.newUser("oli", password: "secret", bucket: "dropped")
        try await server.putMany(bucket, "Product", [("p1", ["name": "One"]), ("p2", ["name": "Two"])])
        let device = try await Self.device(url, bucket: bucket, user, pageSize: 50)
        try await device.engine.sync(models: ["Product"])
        #expect(try device.model("Product").count() == 2)
        try await server.call("DELETE", "buckets/\(bucket)/collections/Product")
        try await server.call("PUT", "buckets/\(bucket)/collections/Other", ["data": [:]])
        try device.model("Product").create(["object": "n1", "name": "New"])
        try await device.engine.sync(models: ["Product"])
        #expect(try device.model("Product").findAll().map(\.id) == ["n1"])
        #expect(try await server.objects(bucket, "Product") == ["n1": ["name": "New"]])
        let report = try await device.engine.verify("Product")
        #expect(report.drifts.isEmpty, "\(report.summary)")
        // Deleted again, with nothing to push: the pull itself meets the missing collection.
        try await server.call("DELETE", "buckets/\(bucket)/collections/Product")
        try await device.engine.sync(models: ["Product"])
        #expect(try device.model("Product").count() == 0)
    }

    @Test(
        "a create refused because another device's record holds its id, the record changed since: delete takes its newest form (a black-box probe: an old copy, for good)"
    )
    func refusedCreateDeleted() async throws {
        let (url, user, server, bucket) = try await Self.newUser("ida", password: "secret", bucket: "takenids")
        let (device, _) = try await Self.deviceThroughFaults(url, bucket: bucket, user)
        try await server.call("PUT", server.records(bucket, "Product") + "/T2", ["data": ["v": "theirs"]])
        try device.model("Product").create(["object": "T2", "v": "mine"])
        #expect(try await device.engine.sync(models: ["Product"]).refused == 1)
        try await server.call("PATCH", server.records(bucket, "Product") + "/T2", ["data": ["v": "newer"]])
        try await device.engine.sync(models: ["Product"])
        try device.store.resolve("Product", "T2", .delete)
        let report = try await device.engine.sync(models: ["Product"])
        #expect(report.refused == 0, "\(report)")
        #expect(try device.model("Product").find("T2")?.attributes == ["v": "newer"])
        #expect(try device.store.changeFates(model: "Product").isEmpty)
        #expect(try await server.objects(bucket, "Product")["T2"] == ["v": "newer"])
    }

    @Test(
        "a create whose answer was lost, its record then deleted by another device: sent again, it does not undo the delete but is kept refused, deleted on the server"
    )
    func lostCreateAnswerThenDeletedElsewhere() async throws {
        let (url, user, server, bucket) = try await Self.newUser("hal", password: "secret", bucket: "lostgone")
        let (device, faults) = try await Self.deviceThroughFaults(url, bucket: bucket, user)
        let other = try await Self.device(url, bucket: bucket, user, pageSize: 50)
        try device.model("Product").create(["object": "G1", "a": 1])
        try device.model("Product").create(["object": "G2", "a": 2])
        faults.inject(.dropAnswer, on: .push)
        await #expect(throws: SyncError.self) { try await device.engine.sync(models: ["Product"]) }
        #expect(try await server.objects(bucket, "Product").keys.sorted() == ["G1", "G2"], "the creates landed; their answer did not")

        // The other device pulls G1 and deletes it; G2 stays.
        try await other.engine.sync(models: ["Product"])
        try other.model("Product").delete("G1")
        try await other.engine.sync(models: ["Product"])
        #expect(try await server.objects(bucket, "Product").keys.sorted() == ["G2"])

        let report = try await device.engine.sync(models: ["Product"])
        #expect(report.refused == 1, "\(report)")
        #expect(try await server.objects(bucket, "Product").keys.sorted() == ["G2"], "the delete stands")
        let refusal = try #require(try device.store.refusedChanges(model: "Product").first)
        #expect(refusal.objectID == "G1" && refusal.kind == .create && refusal.serverDeleted, "\(refusal)")
        #expect(try device.store.changeFates(model: "Product").keys.sorted() == ["G1"])

        // Resolved with delete, it is gone here too; a create of a new id pulled by nobody goes as before.
        try device.store.resolve("Product", "G1", .delete)
        try device.model("Product").create(["object": "G3", "a": 3])
        let after = try await device.engine.sync(models: ["Product"])
        #expect(after.refused == 0, "\(after)")
        #expect(try device.model("Product").find("G1") == nil)
        #expect(try await server.objects(bucket, "Product").keys.sorted() == ["G2", "G3"])
        #expect(try device.store.changeFates(model: "Product").isEmpty)
    }

    @Test(
        "an update whose answer was lost, edited and then deleted here: the delete goes again on the server's version, which holds this device's own write (found by a black-box probe: a 412)"
    )
    func lostUpdateAnswerThenDelete() async throws {
        let (url, user, server, bucket) = try await Self.newUser("gus", password: "secret", bucket: "lostdelete")
        let (device, faults) = try await Self.deviceThroughFaults(url, bucket: bucket, user)
        try device.model("Product").create(["object": "D1", "a": 1])
        try device.model("Product").create(["object": "D2", "a": 1])
        try await device.engine.sync(models: ["Product"])
        try device.model("Product").update("D1", with: ["a": 2, "b": 3])
        try device.model("Product").update("D2", with: ["a": 2])
        faults.inject(.dropAnswer, on: .push)
        await #expect(throws: SyncError.self) { try await device.engine.sync(models: ["Product"]) }
        #expect(try await server.objects(bucket, "Product")["D1"] == ["a": 2, "b": 3], "the update landed; its answer did not")

        try device.model("Product").update("D1", with: ["a": 4])
        try device.model("Product").delete("D1")
        // D2: changed elsewhere since: the delete is a true conflict.
        try await server.call("PATCH", server.records(bucket, "Product") + "/D2", ["data": ["c": 9]])
        try device.model("Product").delete("D2")
        let report = try await device.engine.sync(models: ["Product"])
        #expect(report.refused == 1, "\(report)")
        let objects = try await server.objects(bucket, "Product")
        #expect(objects["D1"] == nil)
        #expect(objects["D2"] == ["a": 2, "c": 9])
        #expect(try device.store.changeFates(model: "Product").keys.sorted() == ["D2"])
    }

    @Test(
        "creates whose answer was lost: an attribute removed here since is removed there; one another device removed, or a record another device edited that is deleted here, is a conflict, not overwritten (found by a black-box probe)"
    )
    func lostCreateAnswerThenChanges() async throws {
        let (url, user, server, bucket) = try await Self.newUser("hal", password: "secret", bucket: "lostcreate")
        let (device, faults) = try await Self.deviceThroughFaults(url, bucket: bucket, user)
        for id in ["K1", "K2", "K3"] { try device.model("Product").create(["object": .string(id), "a": 1, "b": 2]) }
        faults.inject(.dropAnswer, on: .push)
        await #expect(throws: SyncError.self) { try await device.engine.sync(models: ["Product"]) }
        #expect(try await server.objects(bucket, "Product")["K1"] == ["a": 1, "b": 2], "the creates landed; their answer did not")

        try device.model("Product").update("K1", with: ["b": .null])
        try await server.call("PUT", server.records(bucket, "Product") + "/K2", ["data": ["a": 1]])
        try await server.call("PATCH", server.records(bucket, "Product") + "/K3", ["data": ["c": 9]])
        try device.model("Product").delete("K3")
        let report = try await device.engine.sync(models: ["Product"])
        #expect(report.refused == 2, "\(report)")
        let objects = try await server.objects(bucket, "Product")
        #expect(objects["K1"] == ["a": 1], "the removal made here went")
        #expect(objects["K2"] == ["a": 1], "the other device's removal stands")
        #expect(objects["K3"] == ["a": 1, "b": 2, "c": 9], "the other device's edit stands")
        #expect(try device.store.changeFates(model: "Product").keys.sorted() == ["K2", "K3"])
        #expect(try device.model("Product").find("K1")?.attributes == ["a": 1])
    }

    func expectUnauthorized(sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void) async {
        do {
            try await body()
            Issue.record("expected a 401", sourceLocation: sourceLocation)
        } catch let error as SyncError {
            #expect(error.code == .unauthorized && error.httpStatus == 401, "\(error)", sourceLocation: sourceLocation)
            #expect(error.message.contains("user name and password"), "a clear message: \(error.message)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("expected a SyncError, got \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test(
        "an object as deep as a store holds goes to Kinto and comes back: the batch's answer and every later pull read it (found by a black-box probe)"
    )
    func deepestObject() async throws {
        let url = try KintoServers.main()
        let user = Credentials(user: KintoServers.unique("dora"), password: "pw")
        let (_, bucket) = try await Self.productCollection(url, user, bucket: "deep")
        let device = try await Self.device(url, bucket: bucket, user, pageSize: 50)
        var deep = JSONValue.int(1)
        for _ in 0..<(JSONValue.maxDepth - 1) { deep = .array([deep]) }
        try device.model("Product").create(["object": "d1", "deep": deep, "name": "Deep"])
        #expect(try await device.engine.sync(models: ["Product"]).accepted == 1)
        try device.model("Product").update("d1", with: ["name": "Deeper"])
        try await device.engine.sync(models: ["Product"])
        // Another device reads the server's copy whole.
        let other = try await Self.device(url, bucket: bucket, user, pageSize: 50)
        try await other.engine.sync(models: ["Product"])
        let copy = try #require(try other.model("Product").find("d1"))
        #expect(copy["deep"] == deep && copy["name"] == "Deeper")
    }

    @Test("the server stops mid-sync and starts again: the next sync converges, nothing lost (PostgreSQL backend)")
    func serverStopsMidSync() async throws {
        let own = try await OwnKintoServer.start()
        do {
            try await Self.stopMidSync(own)
        } catch {
            try? await own.remove()
            throw error
        }
        try await own.remove()
    }

    static func stopMidSync(_ own: OwnKintoServer) async throws {
        let url = own.url
        let user = Credentials(user: KintoServers.unique("cy"), password: "pw")
        let (server, bucket) = try await Self.productCollection(url, user, bucket: "restart")
        try await server.putMany(bucket, "Product", Self.products(1...200))

        let hook = Mutex<BeforePull?>(nil)
        let device = try await Self.device(url, bucket: bucket, user, pageSize: 20) { backend in
            let wrapped = BeforePull(wrapped: backend)
            hook.withLock { $0 = wrapped }
            return wrapped
        }
        try await device.engine.sync(models: ["Product"])
        // Changes on both sides, then a sync during which the server goes away after a page.
        try await server.putMany(bucket, "Product", Self.products(201...260))
        let products = try device.model("Product")
        try products.create(["object": "offline", "name": "Made offline"])
        try products.update("p5", with: ["price": 5000])
        try products.delete("p6")
        // The server goes away after the first page of the pull.
        let stopped = Mutex(false)
        hook.withLock { $0 }?.arm(pull: 2) {
            stopped.withLock { $0 = true }
            try await own.stop()
        }
        do {
            try await device.engine.sync(models: ["Product"])
            Issue.record("the sync went through a stopped server")
        } catch let error as SyncError {
            #expect(error.code == .network, "\(error)")
        }
        #expect(try device.store.verify().problems == [])
        #expect(stopped.withLock { $0 }, "the server was stopped mid-sync")
        #expect(try products.count() > 200 && products.count() < 260, "the first page stays applied")

        try await own.restart()
        try await device.engine.sync(models: ["Product"])
        let remote = try await server.objects(bucket, "Product")
        #expect(remote["offline"]?["name"] == "Made offline" && remote["p5"]?["price"] == 5000 && remote["p6"] == nil)
        #expect(remote.count == 260)
        try await Self.expectSame(device, server, bucket)
    }
}

/// Runs an action once, before a chosen pull request goes to the server.
final class BeforePull: SyncBackend {
    typealias Action = @Sendable () async throws -> Void
    let wrapped: any SyncBackend
    /// Pulls left before the action, and the action.
    private let armed = Mutex<(left: Int, action: Action?)>((0, nil))

    init(wrapped: any SyncBackend) { self.wrapped = wrapped }

    /// Runs `action` before the `number`th pull from now (1: the next one).
    func arm(pull number: Int, _ action: @escaping Action) { armed.withLock { $0 = (number, action) } }

    var name: String { wrapped.name }
    var capabilities: SyncCapabilities { wrapped.capabilities }
    func logIn(_ credentials: Credentials) async throws -> SyncSession { try await wrapped.logIn(credentials) }
    func logOut(_ session: SyncSession) async throws { try await wrapped.logOut(session) }
    func push(_ request: PushRequest) async throws -> [PushResult] { try await wrapped.push(request) }
    func pull(_ request: PullRequest) async throws -> PullPage {
        let action: Action? = armed.withLock { state in
            guard state.action != nil else { return nil }
            state.left -= 1
            guard state.left == 0 else { return nil }
            defer { state.action = nil }
            return state.action
        }
        try await action?()
        return try await wrapped.pull(request)
    }
}

/// Passes every call to `wrapped`, keeping the cursor of each pull.
final class PullLog: SyncBackend {
    let wrapped: any SyncBackend
    private let log = Mutex<[JSONValue?]>([])

    init(wrapped: any SyncBackend) { self.wrapped = wrapped }

    /// The cursors pulls were asked from, in order.
    var cursors: [JSONValue?] { log.withLock { $0 } }

    var name: String { wrapped.name }
    var capabilities: SyncCapabilities { wrapped.capabilities }
    func logIn(_ credentials: Credentials) async throws -> SyncSession { try await wrapped.logIn(credentials) }
    func logOut(_ session: SyncSession) async throws { try await wrapped.logOut(session) }
    func push(_ request: PushRequest) async throws -> [PushResult] { try await wrapped.push(request) }
    func pull(_ request: PullRequest) async throws -> PullPage {
        log.withLock { $0.append(request.cursor) }
        return try await wrapped.pull(request)
    }
}
