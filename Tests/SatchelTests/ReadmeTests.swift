import Foundation
import SatchelTestSupport
import Testing

import Satchel

/// The README's Swift tour, line for line (paths aside), with the facts it states checked. If the
/// README's code changes, change this test with it.
@Suite("README")
struct ReadmeTests {
    @Test("the Swift tour compiles, runs and says what the comments say")
    func tour() throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("MyApp.satchel"))
        defer { try? store.close() }

        let products = try store.model("Product")
        let widget = try products.create(["name": "Widget", "brand": "Acme", "price": 9.5])

        try products.update(widget.id, with: ["price": 12, "brand": .null])
        let acme = try products.findAll(where: ["brand": "Acme"])
        let n = try products.count()
        #expect(acme.isEmpty)  // `brand` was removed
        #expect(n == 1)

        try products.createIndex(IndexDefinition("brand", "price"))
        try products.createIndex(.elements(of: "tags"))
        let cheap = try products.findAll(
            where: "brand" == "Acme" && "price" < 100, order: [.descending("price")], limit: 20, select: ["name", "price"])
        let onSale = try products.count(where: Field("tags").contains("sale"))
        let first = try products.findFirst(where: Field("address.city").beginsWith("Ly"))
        #expect(cheap.isEmpty && onSale == 0 && first == nil)
        #expect(try products.explain(Query(where: "brand" == "Acme").order(by: "price").limit(20)).description
            == "index brand,price: brand == \"Acme\", read in index order; stop after 20")

        let orders = try store.model("Order")
        try store.bulkUpdate { tx in
            let order = try tx.create(["customer": "c-1", "total": 0], in: orders)
            try tx.update(widget.id, with: ["quantity": 4], in: products)
            #expect(try tx.find(order.id, in: orders) != nil)
        }

        #expect(try products.isChanged)
        #expect(try products.pendingChanges().map(\.kind) == [.create])

        try store.register(ModelDefinition(name: "Price", kind: .fixedSchema(["sku": .string, "amount": .number])))
        try store.register(ModelDefinition(name: "Setting", partition: .local))

        #expect(try store.importObjects(from: Fixtures.url("products.json"), into: products) == 300)
        #expect(try products.count() == 301)
    }
}
