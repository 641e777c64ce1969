import Foundation
import LoopbackSupport
import Satchel
import SalesforceTestServer
import SatchelSalesforce
import SatchelSync
import SatchelSyncTesting
import Testing

/// Blobs pushed as their bytes, and the totals a pull reports, against the loopback org: checked
/// on the server's side (its request log and the bytes it keeps).
// One test at a time: each starts a loopback server, whose socket pool holds a Dispatch thread
// in epoll_wait while it runs. Every such test at once, beside the other suites, reached
// Dispatch's limit of threads in full runs: URLSession's queues got none, and clients timed out.
@Suite("Salesforce adapter: blob pushes and totals", .serialized)
struct SalesforceBlobTotalTests {
    typealias Setup = SalesforceBackendTests.Setup

    static let acme = "001Qy0000000001IAA"

    /// Bytes that are not text: every byte value, then a few thousand more.
    static func bytes(_ count: Int, seed: UInt8 = 0) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ Int(seed)) })
    }

    /// The text of every composite call's body (`method`).
    static func compositeTexts(_ setup: Setup, _ method: String) async -> [String] {
        await setup.requests(method, endingWith: "/composite/sobjects").map { String(decoding: $0.body, as: UTF8.self) }
    }

    @Test(
        "a local blob in a base64 field (Attachment Body, ContentVersion VersionData) is pushed as base64 in the composite JSON, never as its reference; the org keeps the local blob's bytes"
    )
    func blobPush() async throws {
        let setup = try await Setup(models: [ModelDefinition(name: "Attachment"), ModelDefinition(name: "ContentVersion")])
        defer { Task { await setup.stop() } }
        try await setup.device.engine.sync()
        let store = setup.device.store
        #expect(store.models.first { $0.name == "Attachment" }?.blobAttributes == ["Body"], "describe made Body a blob attribute")

        let first = Self.bytes(3000)
        let body = try store.blobs.put(first)
        let version = Self.bytes(700, seed: 3)
        let versionData = try store.blobs.put(version)
        try setup.model("Attachment").create(["object": "a-local", "Name": "photo.bin", "ParentId": .string(Self.acme), "Body": .string(body)])
        try setup.model("ContentVersion").create([
            "object": "v-local", "Title": "Plan", "PathOnClient": "plan.bin", "VersionData": .string(versionData),
        ])
        let report = try await setup.device.engine.sync()
        #expect(report.accepted == 2 && report.refused == 0)
        let attachment = try #require(report.serverIDs["Attachment"]?["a-local"])
        let content = try #require(report.serverIDs["ContentVersion"]?["v-local"])
        // The org's own copy of the bytes, read from the server, not through the adapter.
        #expect(await setup.server.blob("Attachment", attachment, "Body") == first)
        #expect(await setup.server.blob("ContentVersion", content, "VersionData") == version)
        let posts = await Self.compositeTexts(setup, "POST")
        #expect(posts.contains { $0.contains(first.base64EncodedString()) } && posts.contains { $0.contains(version.base64EncodedString()) })
        #expect(!posts.contains { $0.contains(BlobStore.referencePrefix) }, "no blob reference went out")

        // A new blob for Body: the update carries the new bytes.
        let second = Self.bytes(5000, seed: 11)
        try setup.model("Attachment").update(attachment, with: ["Body": .string(try store.blobs.put(second))])
        #expect(try await setup.device.engine.sync().accepted == 1)
        #expect(await setup.server.blob("Attachment", attachment, "Body") == second)
        let patches = await Self.compositeTexts(setup, "PATCH")
        #expect(patches.contains { $0.contains(second.base64EncodedString()) } && !patches.contains { $0.contains(BlobStore.referencePrefix) })
        // The pull after it brought the org's bytes back into the same blob.
        let local = try #require(try setup.model("Attachment").find(attachment)?["Body"]?.stringValue)
        #expect(try store.blobs.data(for: local) == second)
    }

    @Test(
        "a blob a first sync skipped (skipBlobsOnFirstSync) is downloaded by the next, from the path the record holds (a black-box probe: kept as its path for ever)"
    )
    func deferredBlob() async throws {
        let setup = try await Setup(models: [ModelDefinition(name: "Attachment")])
        defer { Task { await setup.stop() } }
        let bytes = Self.bytes(900, seed: 5)
        let id = await setup.server.insert(
            "Attachment", Data(#"{"Name":"a.bin","ParentId":"\#(Self.acme)","Body":"\#(bytes.base64EncodedString())"}"#.utf8))
        try await setup.device.engine.configure("Attachment", ModelSyncConfiguration(skipBlobsOnFirstSync: true))
        try await setup.device.engine.sync()
        let path = try #require(try setup.model("Attachment").find(id)?["Body"]?.stringValue)
        #expect(path.hasPrefix("/services/data/"), "kept as its path by the first sync")
        try await setup.device.engine.sync()
        #expect(setup.device.log.notifications(.error).isEmpty, "\(setup.device.log.notifications(.error))")
        let reference = try #require(try setup.model("Attachment").find(id)?["Body"]?.stringValue)
        #expect(BlobStore.isReference(.string(reference)), "\(reference)")
        #expect(try setup.device.store.blobs.data(for: reference) == bytes)
    }

    @Test("a blob in a model describe has not typed yet waits: never sent as its reference text, pushed as its bytes by the next sync")
    func blobBeforeDescribe() async throws {
        let setup = try await Setup(models: [ModelDefinition(name: "Attachment")])
        defer { Task { await setup.stop() } }
        let bytes = Self.bytes(1200, seed: 5)
        let reference = try setup.device.store.blobs.put(bytes)
        try setup.model("Attachment").create(["object": "early", "Name": "early.bin", "ParentId": .string(Self.acme), "Body": .string(reference)])
        let first = try await setup.device.engine.sync()
        #expect(first.accepted == 0 && first.refused == 0)
        #expect(!(await Self.compositeTexts(setup, "POST")).contains { $0.contains(BlobStore.referencePrefix) })
        #expect(try setup.device.store.changeFates(model: "Attachment")["early"] != nil, "still to push")
        let second = try await setup.device.engine.sync()
        #expect(second.accepted == 1)
        let id = try #require(second.serverIDs["Attachment"]?["early"])
        #expect(await setup.server.blob("Attachment", id, "Body") == bytes)
    }

    @Test("a blob whose file is gone is a refused change (BLOB_MISSING), not its reference text; the other records go")
    func missingBlob() async throws {
        let setup = try await Setup(models: [ModelDefinition(name: "Attachment")])
        defer { Task { await setup.stop() } }
        try await setup.device.engine.sync()
        let store = setup.device.store
        let gone = try store.blobs.put(Self.bytes(100, seed: 9))
        try FileManager.default.removeItem(at: try #require(store.blobs.url(for: gone)))
        try setup.model("Attachment").create(["object": "lost", "Name": "lost.bin", "ParentId": .string(Self.acme), "Body": .string(gone)])
        try setup.model("Attachment").create([
            "object": "kept", "Name": "kept.bin", "ParentId": .string(Self.acme), "Body": .string(try store.blobs.put(Self.bytes(10))),
        ])
        let report = try await setup.device.engine.sync()
        #expect(report.accepted == 1 && report.refused == 1)
        let error = try #require(try store.refusedChanges(model: "Attachment").first)
        #expect(error.objectID == "lost" && error.code == "BLOB_MISSING" && error.message.contains("Body"))
        #expect(!(await Self.compositeTexts(setup, "POST")).contains { $0.contains(BlobStore.referencePrefix) })
    }

    @Test(
        "base64 in a JSON body is bounded (Salesforce: 37.5 MB): records are sent in as many calls as it takes, and one blob past the bound alone is a refused change"
    )
    func base64Bound() async throws {
        let setup = try await Setup(models: [ModelDefinition(name: "Attachment")]) { $0.maximumBase64PerRequest = 4000 }
        defer { Task { await setup.stop() } }
        try await setup.device.engine.sync()
        let store = setup.device.store
        let sizes = [("one", 2000), ("two", 2000), ("big", 3100)]  // base64: 2,668, 2,668 and 4,136 characters
        for (name, size) in sizes {
            let blob = try store.blobs.put(Self.bytes(size, seed: UInt8(size % 251)))
            try setup.model("Attachment").create([
                "object": .string(name), "Name": .string(name), "ParentId": .string(Self.acme), "Body": .string(blob),
            ])
        }
        let report = try await setup.device.engine.sync()
        #expect(report.accepted == 2 && report.refused == 1)
        let posts = await setup.requests("POST", endingWith: "/composite/sobjects")
        #expect(posts.count == 2, "one record a call: two would pass the bound")
        let error = try #require(try store.refusedChanges(model: "Attachment").first)
        #expect(error.objectID == "big" && error.code == "BLOB_TOO_LARGE")
        for name in ["one", "two"] {
            let id = try #require(report.serverIDs["Attachment"]?[name])
            #expect(await setup.server.blob("Attachment", id, "Body") == Self.bytes(2000, seed: UInt8(2000 % 251)))
        }
    }

    @Test(
        "once a call of a push went through, a later call of it that fails keeps its records in flight and fails the sync after the first call's results are applied: a retry of the whole push would make them twice"
    )
    func laterCallFails() async throws {
        let retry = RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(1), jitter: 0)
        let setup = try await Setup(models: [ModelDefinition(name: "Attachment")], retry: retry) { $0.maximumBase64PerRequest = 4000 }
        defer { Task { await setup.stop() } }
        try await setup.device.engine.sync()
        let store = setup.device.store
        for name in ["one", "two"] {
            let blob = try store.blobs.put(Self.bytes(2000, seed: name == "one" ? 1 : 2))
            try setup.model("Attachment").create([
                "object": .string(name), "Name": .string(name), "ParentId": .string(Self.acme), "Body": .string(blob),
            ])
        }
        let held = await setup.server.records("Attachment").count
        let busy = Data(#"[{"errorCode":"SERVER_UNAVAILABLE","message":"busy"}]"#.utf8)
        await setup.server.sabotageNext("POST", "/services/data/v\(setup.server.version)/composite/sobjects", skipping: 1, status: 503, body: busy)
        // The first call's record is kept; the failed call's is in flight (it may have landed) and
        // the sync fails, saying why, before it pulls.
        let failure = await #expect(throws: SyncError.self) { try await setup.device.engine.sync() }
        #expect(failure?.httpStatus == 503, "\(String(describing: failure))")
        #expect(await setup.server.records("Attachment").count == held + 1)
        let fates = try store.changeFates(model: "Attachment")
        #expect(fates.count == 1 && fates["two"] == .inFlight(.create, awaitingLink: false), "\(fates)")
        let second = try await setup.device.engine.sync()
        #expect(second.accepted == 1)
        #expect(await setup.server.records("Attachment").count == held + 2, "each made once")
        #expect(await setup.requests("POST", endingWith: "/composite/sobjects").count == 3)
        #expect(try store.pendingChanges().isEmpty)
    }

    @Test("totals: a pull from no cursor reports the query's totalSize on every page; a delta pull and a limited first fetch report none")
    func totals() async throws {
        let setup = try await Setup("kit", models: [ModelDefinition(name: "Product")])
        defer { Task { await setup.stop() } }
        await setup.server.setQueryPageSize(5)
        var ids: [String] = []
        for i in 1...12 { ids.append(await setup.server.insert("Product", SalesforceBackendTests.json(["name": .string("P\(i)")]))) }
        try await setup.device.engine.sync()
        let first = setup.device.log.notifications(.inProgress, model: "Product")
        #expect(first.count == 3 && first.allSatisfy { $0.totalCount == 12 }, "\(first)")

        // A delta: the query's totalSize counts the changed records, not the model's.
        setup.device.log.clear()
        await setup.server.advanceClock(seconds: 2)
        await setup.server.update("Product", ids[0], SalesforceBackendTests.json(["price": 3]))
        await setup.server.update("Product", ids[1], SalesforceBackendTests.json(["price": 4]))
        #expect(try await setup.device.engine.sync().pulled == 2)
        let delta = setup.device.log.notifications(.inProgress, model: "Product")
        #expect(!delta.isEmpty && delta.allSatisfy { $0.totalCount == nil }, "\(delta)")

        // A full resync asks from no cursor again: the total is exact.
        setup.device.log.clear()
        try await setup.device.engine.sync(mode: .full)
        let full = setup.device.log.notifications(.inProgress, model: "Product")
        #expect(!full.isEmpty && full.allSatisfy { $0.totalCount == 12 }, "\(full)")

        // A first fetch limited to 4: the org holds more than its totalSize says.
        let limited = try SyncClient(backend: SalesforceBackend.forTests(setup.server), models: [ModelDefinition(name: "Product")])
        await limited.record()
        try await limited.engine.logIn(Credentials(user: "ann", password: "secret"))
        try await limited.engine.configure("Product", try ModelSyncConfiguration(syncObject: ["fetch-limit": 4]))
        #expect(try await limited.engine.sync().pulled == 4)
        let some = limited.log.notifications(.inProgress, model: "Product")
        #expect(!some.isEmpty && some.allSatisfy { $0.totalCount == nil }, "\(some)")
    }
}
