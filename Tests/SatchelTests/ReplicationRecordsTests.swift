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

    @Test("references to several renamed objects are rewritten in one pass, indexed or not", arguments: [false, true])
    func rewriteReferences(indexed: Bool) throws {
        try withTemporaryStore { store in
            let orders = try store.model("Order")
            if indexed { try orders.createIndex(IndexDefinition("customer")) }
            for (id, customer) in [("o1", "c1"), ("o2", "c2"), ("o3", "c3"), ("o4", "c1")] {
                try store.bulkUpdate { try $0.writeServerObject(orders, id, ["customer": .string(customer), "total": 1]) }
            }
            try orders.update("o1", with: ["customer": "c2"])  // a pending update naming a renamed id
            try orders.create(["object": "o5", "customer": "c1"])  // a pending create
            try store.bulkUpdate { tx in
                try tx.setInFlightChange(orders, "o4", InFlightChange(kind: .update, attributes: ["customer": "c1"], baseVersion: nil))
                try tx.rewriteReferences(in: orders, attribute: "customer", renames: ["c1": "s1", "c2": "s2"])
            }
            let customers = Dictionary(uniqueKeysWithValues: try orders.findAll().map { ($0.id, $0["customer"]) })
            #expect(customers == ["o1": "s2", "o2": "s2", "o3": "c3", "o4": "s1", "o5": "s1"])
            let pending = Dictionary(uniqueKeysWithValues: try orders.pendingChanges().map { ($0.objectID, $0) })
            #expect(pending["o1"]?.attributes["customer"] == "s2")
            #expect(pending["o5"]?.kind == .create)
            #expect(try store.bulkUpdate { try $0.inFlightChange(orders, "o4") }?.attributes["customer"] == "s1")
            #expect(try orders.findAll(where: ["customer": "c1"]).isEmpty)
            #expect(try store.verify().problems == [])
        }
    }
}
