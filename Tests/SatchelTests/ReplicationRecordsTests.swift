import SatchelTestSupport
import Testing

@testable import Satchel

/// The core's records for sync, written through the engine's `package` seam.
@Suite("Replication records")
struct ReplicationRecordsTests {
    @Test("server writes record no pending change, and keep indexes and counts right")
    func serverWritesRecordNoChange() throws {
        try withTemporaryStore { store in
            let model = try store.model("Product")
            try model.createIndex(IndexDefinition("brand"))
            let effects = try store.bulkUpdate { tx -> [Transaction.ObjectEffect] in
                [
                    try tx.writeServerObject(model, "p1", ["brand": "Acme", "price": 1]),
                    try tx.writeServerObject(model, "p1", ["brand": "Zenith", "price": 1]),
                    try tx.writeServerObject(model, "p1", ["brand": "Zenith", "price": 1]),
                    try tx.writeServerObject(model, "p2", ["brand": "Acme"]),
                    try tx.writeServerObject(model, "p2", ["brand": .null]),
                ]
            }
            #expect(effects == [.created, .updated, .unchanged, .created, .deleted])
            #expect(try model.pendingChanges() == [])
            #expect(try model.count() == 1)
            #expect(try model.findAll(where: ["brand": "Zenith"]).map(\.id) == ["p1"])
            #expect(try store.verify().problems == [])
        }
    }
}
