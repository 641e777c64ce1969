import Foundation
import Satchel
import SatchelTestSupport
import Testing

/// One read protocol, `StoreReading`, for snapshots and transactions.
@Suite("StoreReading: one read protocol")
struct StoreReadingTests {
    /// Reads written once against the protocol.
    static func summary(_ db: some StoreReading, _ products: Model) throws -> [String] {
        let acme = try db.findAll(Query(where: "brand" == "Acme", order: [.descending("price")], limit: 2), in: products).map(\.id)
        let first = try db.findFirst(where: "price" > 1, order: [.ascending("price")], in: products)?.id ?? "-"
        let count = try db.count(where: "brand" == "Acme", in: products)
        let all = try db.findAll(in: products).map(\.id)
        let pending = try db.pendingChanges(of: products).map(\.objectID).sorted()
        let plan = try db.explain(Query(where: "brand" == "Acme"), in: products).description
        return acme + [first, String(count)] + all + pending + [plan.contains("index") ? "index" : "scan"]
    }

    @Test("code written against StoreReading gives the same answers in a snapshot and in a transaction")
    func sameAnswers() throws {
        try withTemporaryStore { store in
            let products = try store.model("Product")
            try products.createIndex(IndexDefinition(Field("brand")))
            for i in 1...6 { try products.create(["object": .string("p\(i)"), "brand": i % 2 == 0 ? "Acme" : "Zenith", "price": .int(Int64(i))]) }
            let read = try store.read { try Self.summary($0, products) }
            let inTransaction = try store.bulkUpdate { try Self.summary($0, products) }
            #expect(read == inTransaction)
            #expect(read == ["p6", "p4", "p2", "3", "p1", "p2", "p3", "p4", "p5", "p6", "p1", "p2", "p3", "p4", "p5", "p6", "index"])
        }
    }

    @Test(
        "a transaction's query after its own writes runs the planner (an index-only query stays allowed) and sees every write: creates, updates in and out of the match, deletes, with order, offset and limit"
    )
    func afterWrites() throws {
        try withTemporaryStore { store in
            let products = try store.model("Product")
            try products.createIndex(IndexDefinition(Field("brand")))
            for i in 1...20 {
                try products.create(["object": .string(String(format: "p%02d", i)), "brand": i % 2 == 0 ? "Acme" : "Zenith", "price": .int(Int64(i))])
            }
            var generator = SystemRandomNumberGenerator()
            for _ in 0..<25 {
                try store.bulkUpdate { tx in
                    for _ in 0..<8 {
                        let id = String(format: "p%02d", Int.random(in: 1...26, using: &generator))
                        switch Int.random(in: 0..<3, using: &generator) {
                        case 0: _ = try tx.delete(id, in: products)
                        case 1:
                            _ = try tx.save(
                                Object(
                                    id: id,
                                    attributes: [
                                        "brand": Bool.random(using: &generator) ? "Acme" : "Zenith",
                                        "price": .int(Int64.random(in: 1...30, using: &generator)),
                                    ]), in: products)
                        default:
                            if try tx.find(id, in: products) != nil {
                                _ = try tx.update(id, with: ["price": .int(Int64.random(in: 1...30, using: &generator))], in: products)
                            }
                        }
                    }
                    // What the transaction sees, evaluated by hand.
                    let everything = try tx.findAll(in: products)
                    let acme = everything.filter { $0["brand"] == "Acme" }
                        .sorted { ($0["price"]?.intValue ?? 0, $0.id) > ($1["price"]?.intValue ?? 0, $1.id) }
                    let query = Query(where: "brand" == "Acme", order: [.descending("price")], limit: 3, offset: 1, select: [Field("price")])
                        .requiringIndex()
                    let answer = try tx.findAll(query, in: products)
                    #expect(answer.map(\.id) == acme.dropFirst(1).prefix(3).map(\.id))
                    #expect(answer.allSatisfy { $0.attributes.keys == ["price"] })
                    #expect(try tx.count(where: "brand" == "Acme", in: products) == acme.count)
                    // A query the indexes cannot serve is still refused when it must not scan.
                    #expect(throws: SatchelError.self) { try tx.findAll(Query(where: "price" > 3).requiringIndex(), in: products) }
                }
            }
        }
    }
}
