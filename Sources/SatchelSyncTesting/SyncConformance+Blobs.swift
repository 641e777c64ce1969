import Foundation
public import Satchel
import SatchelSync
import Testing

extension SyncConformance {
    /// The blob scenarios' model: a title, and one blob attribute, `image`.
    public static let photo = ModelDefinition(name: "Photo", blobAttributes: ["image"])

    /// Scenarios for servers that keep files: blobs made here reach the server's own copy byte for
    /// byte, blobs put there arrive here, and removing one (or deleting its object) on either side
    /// removes it on the other. They need a server whose ``ConformanceServer/putBlob(_:_:_:_:)``
    /// and ``ConformanceServer/blob(_:_:_:)`` work, and that has the model ``photo``:
    ///
    /// ```swift
    /// @Test(arguments: SyncConformance.blobScenarios)
    /// func blobs(_ scenario: SyncConformance.Scenario) async throws {
    ///     try await scenario.run(on: MyServerHarness())
    /// }
    /// ```
    public static let blobScenarios: [Scenario] = [
        Scenario(name: "a blob made here reaches the server byte for byte; a new one replaces it", body: blobReachesTheServer),
        Scenario(name: "a blob put on the server arrives here, and so does its replacement", body: blobArrives),
        Scenario(name: "a blob removed, or its object deleted, on either side is gone on the other", body: blobRemoved),
    ]

    /// `count` bytes, every value among them, from `seed`.
    static func bytes(_ seed: UInt64, _ count: Int) -> Data {
        var state = seed &* 0x9E37_79B9_7F4A_7C15
        return Data(
            (0..<count).map { _ in
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                return UInt8(truncatingIfNeeded: state >> 33)
            })
    }

    /// A device for the blob scenarios: the kit's models and ``photo``.
    static func blobDevice(_ server: any ConformanceServer) async throws -> Device {
        let device = try await device(server)
        _ = try device.store.register(photo)
        return device
    }

    /// The id the server gave the one photo titled `title`.
    static func photoID(_ server: any ConformanceServer, titled title: String, sourceLocation: SourceLocation = #_sourceLocation) async throws
        -> String
    {
        let found = try await serverObjects(server, "Photo", where: "title", is: .string(title))
        #expect(found.count == 1, "one photo titled \(title) on the server: \(found)", sourceLocation: sourceLocation)
        return try #require(found.keys.first, sourceLocation: sourceLocation)
    }

    /// The bytes of object `id`'s `image` in the device's store (nil: no blob there).
    static func localImage(_ device: Device, _ id: String) throws -> Data? {
        guard let value = try device.client.model("Photo").find(id)?["image"] else { return nil }
        guard BlobStore.isReference(value), let reference = value.stringValue else {
            Issue.record("the image of \(id) is \(value), not a downloaded blob")
            return nil
        }
        return try device.store.blobs.data(for: reference)
    }

    /// Asserts the device holds the server's photos: the same objects, the same attributes but
    /// the blob, and in place of its value (a reference here, whatever the server keeps there)
    /// the same bytes; nothing left to push.
    static func expectPhotosConverged(_ device: Device, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        #expect(try device.store.verify().problems == [], sourceLocation: sourceLocation)
        #expect(try device.client.model("Photo").pendingChanges() == [], sourceLocation: sourceLocation)
        #expect(try device.store.changeFates(model: "Photo") == [:], sourceLocation: sourceLocation)
        let local = try device.client.objects("Photo")
        let remote = try await device.server.objects("Photo")
        #expect(Set(local.keys) == Set(remote.keys), "the same photos here and there", sourceLocation: sourceLocation)
        let withoutImage = { (object: JSONObject?) in plain(object, device.server)?.filter { name, _ in name != "image" } }
        for id in local.keys {
            #expect(withoutImage(local[id]) == withoutImage(remote[id]), "photo \(id)", sourceLocation: sourceLocation)
            let here = try localImage(device, id)
            let there = try await device.server.blob("Photo", id, "image")
            #expect(here == there, "the image of \(id): \(here?.count ?? 0) bytes here, \(there?.count ?? 0) there", sourceLocation: sourceLocation)
        }
    }

    static func blobReachesTheServer(_ server: any ConformanceServer) async throws {
        let device = try await blobDevice(server)
        let photos = try device.client.model("Photo")
        let original = bytes(1, 70_000)
        try photos.create(["object": "ph1", "title": "Sunset", "image": .string(try device.store.blobs.put(original))])
        let report = try await device.engine.sync(models: ["Photo"])
        #expect(report.accepted == 1 && report.refused == 0)
        let id = try await photoID(server, titled: "Sunset")
        #expect(try await server.blob("Photo", id, "image") == original, "the server's own copy holds the bytes")
        try await expectPhotosConverged(device)

        // Replaced here: the server's copy follows.
        let replacement = bytes(2, 1_000)
        try photos.update(id, with: ["image": .string(try device.store.blobs.put(replacement))])
        #expect(try await device.engine.sync(models: ["Photo"]).refused == 0)
        #expect(try await server.blob("Photo", id, "image") == replacement)
        // Another attribute changed here leaves the blob as it is there.
        try photos.update(id, with: ["title": "Dusk"])
        #expect(try await device.engine.sync(models: ["Photo"]).refused == 0)
        #expect(try await server.objects("Photo")[id]?["title"] == "Dusk")
        #expect(try await server.blob("Photo", id, "image") == replacement)
        try await expectPhotosConverged(device)
    }

    static func blobArrives(_ server: any ConformanceServer) async throws {
        let original = bytes(3, 5_000)
        let id = try await server.put("Photo", ["title": "From the server"], id: "ph2")
        try await server.putBlob("Photo", id, "image", original)
        let device = try await blobDevice(server)
        try await device.engine.sync(models: ["Photo"])
        #expect(try device.client.model("Photo").find(id)?["title"] == "From the server")
        #expect(try localImage(device, id) == original, "the bytes were downloaded into the blob store")
        try await expectPhotosConverged(device)

        let replacement = bytes(4, 300)
        try await server.putBlob("Photo", id, "image", replacement)
        try await device.engine.sync(models: ["Photo"])
        #expect(try localImage(device, id) == replacement)
        try await expectPhotosConverged(device)
    }

    static func blobRemoved(_ server: any ConformanceServer) async throws {
        let device = try await blobDevice(server)
        let photos = try device.client.model("Photo")
        let (kept, deleted) = (bytes(5, 2_000), bytes(6, 3_000))
        try photos.create(["object": "ph1", "title": "Kept", "image": .string(try device.store.blobs.put(kept))])
        try photos.create(["object": "ph2", "title": "Deleted", "image": .string(try device.store.blobs.put(deleted))])
        #expect(try await device.engine.sync(models: ["Photo"]).refused == 0)
        let keptID = try await photoID(server, titled: "Kept")
        let deletedID = try await photoID(server, titled: "Deleted")
        #expect(try await server.blob("Photo", keptID, "image") == kept)
        #expect(try await server.blob("Photo", deletedID, "image") == deleted)

        // Removed here: the blob, or the whole object.
        try photos.update(keptID, with: ["image": .null])
        try photos.delete(deletedID)
        #expect(try await device.engine.sync(models: ["Photo"]).refused == 0)
        #expect(try await server.blob("Photo", keptID, "image") == nil, "the removed blob is gone from the server")
        #expect(try await server.objects("Photo")[keptID]?["title"] == "Kept", "its object stays")
        #expect(try await server.objects("Photo")[deletedID] == nil)
        #expect(try await server.blob("Photo", deletedID, "image") == nil, "the deleted object's blob went with it")
        try await expectPhotosConverged(device)

        // Removed on the server: the blob, then the whole object.
        let id = try await server.put("Photo", ["title": "The server's"], id: "ph3")
        try await server.putBlob("Photo", id, "image", bytes(7, 100))
        try await device.engine.sync(models: ["Photo"])
        #expect(try localImage(device, id) == bytes(7, 100))
        try await server.putBlob("Photo", id, "image", nil)
        try await device.engine.sync(models: ["Photo"])
        #expect(try photos.find(id).map { $0["image"] == nil && $0["title"] == "The server's" } == true)
        try await server.delete("Photo", id)
        try await device.engine.sync(models: ["Photo"])
        #expect(try photos.find(id) == nil)
        try await expectPhotosConverged(device)
    }
}
