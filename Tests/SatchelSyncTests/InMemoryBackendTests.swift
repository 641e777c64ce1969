import Foundation
import Satchel
import SatchelSync
import SatchelSyncTesting
import Testing

/// The in-memory server itself, called directly as an adapter author would.
@Suite("In-memory backend")
struct InMemoryBackendTests {
    static let model = ModelDefinition(name: "Product")

    static func session(_ server: InMemoryBackend) async throws -> SyncSession {
        let session = try await server.logIn(Credentials(user: "ann", password: "x"))
        return try await server.prepare(session)
    }

    static func pull(_ server: InMemoryBackend, _ session: SyncSession, after cursor: JSONValue?, pageSize: Int = 100) async throws -> PullPage {
        try await server.pull(
            PullRequest(model: model, cursor: cursor, pageSize: pageSize, session: session, configuration: ModelSyncConfiguration()))
    }

    @Test(
        "with the client's ids kept, a create of an id another client's create made is refused with the server's copy, not written over it; the same client's create sent again is its own (found by a black-box probe)"
    )
    func createOverAnotherClientsObject() async throws {
        var configuration = InMemoryBackend.Configuration()
        configuration.serverAssignsIDs = false
        let server = InMemoryBackend(configuration: configuration)
        let models = [ModelDefinition(name: "Product")]
        let b = try SyncClient(backend: server, models: models)
        try await b.engine.logIn(Credentials(user: "ann", password: "pw"))
        try b.model("Product").create(["object": "dup", "owner": "b", "v": 1])
        try await b.engine.sync()
        let a = try SyncClient(backend: server, models: models)
        try await a.engine.logIn(Credentials(user: "ann", password: "pw"))
        try a.model("Product").create(["object": "dup", "owner": "a"])
        let report = try await a.engine.sync(models: ["Product"])
        #expect(report.refused == 1, "\(report)")
        #expect(await server.object("Product", "dup") == ["owner": "b", "v": 1])
        let refusal = try #require(try a.store.refusedChanges(model: "Product").first)
        #expect(refusal.kind == .create && refusal.serverCopy == ["owner": "b", "v": 1])
    }

    @Test("prepare gives the session a client id, called directly")
    func prepareRegistersClient() async throws {
        let server = InMemoryBackend()
        let session = try await Self.session(server)
        #expect(session.clientID != nil)
        let reset = try await server.resetClient(session)
        #expect(reset.clientID == nil)
        await #expect { try await Self.pull(server, session, after: nil) } throws: { ($0 as? SyncError)?.code == .unknownClient }
    }

    @Test("the change feed stays right across many rewrites of few objects")
    func feedCompaction() async throws {
        let server = InMemoryBackend()
        let session = try await Self.session(server)
        for i in 0..<10 { await server.put("Product", ["n": .int(Int64(i))], id: "p\(i)") }
        let start = try await Self.pull(server, session, after: nil)
        #expect(start.upserts.count == 10 && start.done)
        for round in 1...300 {
            for i in 0..<3 { await server.update("Product", "p\(i)", ["n": .int(Int64(round))]) }
            await server.delete("Product", "p\(3 + round % 2)")
            await server.put("Product", ["n": 1], id: "p\(3 + (round + 1) % 2)")
        }
        let page = try await Self.pull(server, session, after: start.nextCursor)
        #expect(page.done)
        #expect(Set(page.upserts.map(\.id)) == ["p0", "p1", "p2", "p4"], "round 300 deleted p3 and put p4")
        #expect(page.deletes == ["p3"])
        #expect(page.upserts.first { $0.id == "p0" }?.attributes == ["n": 300])
        // Paged one at a time, the same objects arrive, each once.
        var cursor = start.nextCursor
        var ids: [String] = []
        while true {
            let one = try await Self.pull(server, session, after: cursor, pageSize: 1)
            ids += one.upserts.map(\.id) + one.deletes
            cursor = one.nextCursor
            if one.done { break }
        }
        #expect(ids.sorted() == ["p0", "p1", "p2", "p3", "p4"])
    }

    @Test("saved state round-trips; a malformed one is a clear error")
    func savedState() async throws {
        var configuration = InMemoryBackend.Configuration()
        configuration.linksViaPull = true
        let server = InMemoryBackend(configuration: configuration)
        let session = try await Self.session(server)
        await server.put("Product", ["name": "Lamp"], id: "p1")
        let url = await server.putBlob(Data("bytes".utf8))
        let results = try await server.push(
            PushRequest(
                model: Self.model, changes: [OutgoingChange(objectID: "tmp1", kind: .create, attributes: ["name": "Kettle"])], session: session,
                configuration: ModelSyncConfiguration()))
        #expect(results == [PushResult(objectID: "tmp1", outcome: .awaitingLink)])

        let copy = try InMemoryBackend(configuration: configuration, savedState: await server.savedState())
        #expect(await copy.objects("Product") == server.objects("Product"))
        #expect(await copy.blob(at: url) == Data("bytes".utf8))
        // The session, the client and the link owed to it survive.
        let page = try await Self.pull(copy, session, after: nil)
        #expect(page.links.count == 1 && page.links["tmp1"] != nil)
        #expect(page.upserts.count == 2)

        for bad: JSONObject in [
            [:], ["format": "satchel-memory-server 1"],
            ["format": "satchel-memory-server 1", "clock": 1, "nextID": 1, "collections": ["P": ["objects": ["x": ["version": 1]]]]],
            // Members of another type, which read as empty lost what they held at the next save
            // (found by a black-box probe).
            ["format": "satchel-memory-server 2", "clock": 1, "nextID": 1, "collections": ["P": ["objects": [1, 2]]]],
            ["format": "satchel-memory-server 2", "clock": 1, "nextID": 1, "collections": .null],
            ["format": "satchel-memory-server 2", "clock": 1, "nextID": 1, "collections": ["P": [1]]],
            ["format": "satchel-memory-server 2", "clock": 1, "nextID": 1, "clients": ["c1", 2]],
        ] {
            #expect { try InMemoryBackend(savedState: bad) } throws: { ($0 as? SyncError)?.code == .protocolViolation }
        }
    }

    @Test("when each attribute changed survives a save: a delta after a reload sends only what changed; format 1 still loads")
    func attributeTimesSurviveASave() async throws {
        var configuration = InMemoryBackend.Configuration()
        configuration.wholeObjects = false
        let server = InMemoryBackend(configuration: configuration)
        let session = try await Self.session(server)
        await server.put("Product", ["name": "Lamp", "price": 3, "brand": "Acme"], id: "p1")
        let first = try await Self.pull(server, session, after: nil)
        await server.update("Product", "p1", ["price": 4])
        let reloaded = try InMemoryBackend(configuration: configuration, savedState: await server.savedState())
        await reloaded.update("Product", "p1", ["brand": .null])
        let delta = try await Self.pull(server, session, after: first.nextCursor)
        #expect(delta.upserts.map(\.attributes) == [["price": 4]])
        #expect(delta.removals.isEmpty)
        let reloadedDelta = try await Self.pull(reloaded, session, after: first.nextCursor)
        #expect(reloadedDelta.upserts.map(\.attributes) == [["price": 4]], "name was set before the cursor, price after")
        #expect(reloadedDelta.removals == ["p1": ["brand"]])
        // Only attributes set before the object's version are listed with their time; an older
        // file that lists them all still loads.
        let saved = await reloaded.savedState()
        let entry = saved["collections"]?["Product"]?["objects"]?["p1"]
        #expect(entry?["setAt"] == ["name": 1, "price": 2], "\(String(describing: entry))")
        #expect(await server.savedState()["collections"]?["Product"]?["objects"]?["p1"]?["setAt"] == ["name": 1, "brand": 1])
        var old = saved
        old["format"] = "satchel-memory-server 1"
        let legacy = try InMemoryBackend(configuration: configuration, savedState: old)
        #expect(await legacy.objects("Product") == reloaded.objects("Product"))
    }

    @Test("a cursor the server never gave is refused")
    func badCursor() async throws {
        let server = InMemoryBackend()
        let session = try await Self.session(server)
        for cursor: JSONValue in ["yesterday", ["offset": 3]] {
            await #expect { try await Self.pull(server, session, after: cursor) } throws: { ($0 as? SyncError)?.httpStatus == 400 }
        }
    }
}
