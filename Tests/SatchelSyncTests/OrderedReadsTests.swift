@testable import Satchel
import SatchelSyncTesting
import SatchelTestSupport
import Testing

@testable import SatchelSync

/// The engine reads a page in id order, or a chunk of changes, through iterators
/// (`Transaction.readingInOrder`); a page in another order reads each object on its own. The two
/// must end alike.
@Suite("Ordered reads")
struct OrderedReadsTests {
    /// A store holding `ids` as pulled (version 1), then local work on some: pending updates,
    /// pending deletes, changes in flight, refusals, and local creates the server never had.
    static func device(_ store: Store, ids: [String]) throws -> Model {
        let model = try store.register(ModelDefinition(name: "Product", syncType: .incremental))
        try store.bulkUpdate { tx in
            for (n, id) in ids.enumerated() {
                try tx.writeServerObject(model, id, ["name": .string(id), "price": .int(Int64(n)), "old": true], version: 1)
            }
        }
        try store.bulkUpdate { tx in
            for (n, id) in ids.enumerated() {
                switch n % 6 {
                case 1: _ = try tx.update(id, with: ["price": -1], in: model)
                case 2: _ = try tx.delete(id, in: model)
                case 3:
                    var records = try tx.objectSyncState(model, id)
                    records.inFlight = InFlightChange(kind: .update, attributes: ["price": -2], baseVersion: 1)
                    try tx.setObjectSyncState(model, id, records)
                case 4:
                    var records = try tx.objectSyncState(model, id)
                    records.refusal = RefusedChange(model: model.name, objectID: id, kind: .update, message: "no", attributes: ["price": -3])
                    try tx.setObjectSyncState(model, id, records)
                default: break
                }
            }
            for n in 0..<10 { _ = try tx.create(["object": .string("local-\(n)"), "price": 7], in: model) }
        }
        return model
    }

    @Test("a page applied in id order (read through iterators) leaves what the same page applied out of order leaves")
    func pageInOrderMatchesOutOfOrder() throws {
        let ids = (0..<600).map { "p" + String(10_000 + 3 * $0) }
        // The server's page: new prices and a new attribute, "old" removed from every other
        // object, version 2; objects the device never had among them.
        let page = (ids + (0..<40).map { "p" + String(10_001 + 3 * $0) }).sorted().enumerated().map { n, id in
            var attributes: JSONObject = ["name": .string(id), "price": .int(Int64(1000 + n)), "new": true]
            if n % 2 == 0 { attributes["old"] = true }
            return ServerObject(id: id, attributes: attributes, version: 2)
        }
        #expect(page.count >= Transaction.orderedReadsFrom)
        var outcomes: [(objects: [Object], records: [String], notification: [String])] = []
        for objects in [page, page.reversed()] {
            try withTemporaryStore { store in
                let model = try Self.device(store, ids: ids)
                var notification = ChangeSet(model: model.name, origin: .server)
                try store.bulkUpdate { tx in
                    try SyncEngine.applyUpserts(
                        objects, to: model, modelConfiguration: ModelSyncConfiguration(), blobs: [:], tx: tx, notification: &notification)
                }
                let records = try store.bulkUpdate { try $0.objectSyncStates(of: model, withVersions: true) }.map { "\($0.id) \($0.records)" }
                let changed = (notification.created.map { "+\($0)" } + notification.updated.map { "~\($0)" } + notification.deleted.map { "-\($0)" })
                outcomes.append((try model.findAll(), records, changed.sorted()))
                #expect(try store.verify().problems == [])
            }
        }
        #expect(outcomes[0].objects.count == 600 - ids.indices.filter { $0 % 6 == 2 }.count + 40 + 10)
        #expect(outcomes[0].objects == outcomes[1].objects)
        #expect(outcomes[0].records == outcomes[1].records)
        #expect(outcomes[0].notification == outcomes[1].notification)
        // The page landed where nothing local held it back.
        let byID = Dictionary(uniqueKeysWithValues: outcomes[0].objects.map { ($0.id, $0) })
        #expect(byID[ids[0]]?["new"] == true && byID[ids[1]]?["price"] == -1 && byID[ids[2]] == nil)
    }

    @Test("a push's chunk reads its records in key order: every change is sent once and every result lands, whatever the order of the ids")
    func pushInOrder() async throws {
        var configuration = InMemoryBackend.Configuration()
        configuration.serverAssignsIDs = false  // the ids stay, so the updates find their objects
        configuration.maxPushBatch = 600
        let server = InMemoryBackend(configuration: configuration)
        let client = try SyncClient(backend: server, models: [ModelDefinition(name: "Product")], pageSize: 100)
        try await client.engine.logIn(Credentials(user: "ann", password: "secret"))
        _ = try await client.engine.sync()
        let model = try client.store.model("Product")
        // Ids whose order as strings is not their order of creation.
        let ids = (0..<1200).map { "item-\(($0 * 7919) % 1200)" }
        try await client.store.bulkUpdate { tx in
            for (n, id) in ids.enumerated() { _ = try tx.create(["object": .string(id), "n": .int(Int64(n))], in: model) }
        }
        var report = try await client.engine.sync()
        #expect(report.accepted == 1200 && report.refused == 0)
        try await client.store.bulkUpdate { tx in
            for id in ids.reversed() { _ = try tx.update(id, with: ["n": -1], in: model) }
        }
        report = try await client.engine.sync()
        #expect(report.accepted == 1200)
        let held = await server.objects("Product")
        #expect(held.count == 1200 && held.values.allSatisfy { $0["n"] == -1 })
        #expect(try model.pendingChanges().isEmpty)
        let unsynced = try await client.store.read { try $0.objectSyncStates(of: model) }
        #expect(unsynced.isEmpty)
        #expect(try model.findAll().allSatisfy { $0["n"] == -1 })
        try client.store.close()
    }
}
