import Foundation
import Satchel
import SatchelTestSupport
import Testing

/// App code passes its variables as they are: conditions, attribute dictionaries and `in` lists
/// take Swift values (JSONValueConvertible), converted as JSONValueEncoder encodes them.
@Suite("Values from variables")
struct ValuesFromVariablesTests {
    enum Status: String, Codable, JSONValueConvertible { case draft, live }

    struct Size: Codable, JSONValueConvertible {
        var width: Int
        var height: Int
    }

    @Test("attributes from variables are stored as the encoder stores them; nil optionals remove; conditions and in lists take variables")
    func variables() throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        defer { try? store.close() }
        let products = try store.model("Product")
        let name = "Lamp"
        let price = 12.5
        let stock = 3
        let released = Date(timeIntervalSince1970: 1_764_000_000.125)
        let homepage = URL(string: "https://example.com/lamp")!
        let tags = ["new", "sale"]
        let thumbnail = Data([1, 2, 3])
        let discontinued: Bool? = nil
        try products.create([
            "object": "p1", "name": name, "price": price, "stock": stock, "released": released, "homepage": homepage, "tags": tags,
            "thumbnail": thumbnail, "discontinued": discontinued, "status": Status.live, "size": Size(width: 2, height: 3),
        ])
        try products.create(["object": "p2", "name": "Desk", "price": 80, "stock": 0])

        // Stored exactly as JSONValueEncoder encodes the same values.
        let encoder = JSONValueEncoder()
        let lamp = try #require(try products.find("p1"))
        #expect(lamp["price"] == .double(12.5) && lamp["stock"] == .int(3) && lamp["name"] == "Lamp")
        let (encodedDate, encodedPage, encodedData) = (try encoder.encode(released), try encoder.encode(homepage), try encoder.encode(thumbnail))
        #expect(lamp["released"] == encodedDate && lamp["homepage"] == encodedPage)
        #expect(lamp["thumbnail"] == encodedData && lamp["tags"] == ["new", "sale"])
        #expect(lamp["status"] == "live" && lamp["size"] == ["width": 2, "height": 3])
        #expect(lamp["discontinued"] == nil, "a nil optional is null: nothing stored")

        // Conditions with variables on the right.
        let brand = "Lamp"
        let maxPrice = 20.0
        let minStock = 1
        #expect(try products.findAll(where: "name" == brand && "price" < maxPrice && "stock" >= minStock).map(\.id) == ["p1"])
        #expect(try products.findAll(where: "released" == released).map(\.id) == ["p1"])
        #expect(try products.findAll(where: "status" == Status.live || "price" > Int64(50)).map(\.id).sorted() == ["p1", "p2"])
        #expect(try products.count(where: "price" != price) == 1)
        let names = ["Desk", "Chair"]
        #expect(try products.findAll(where: Field("name").isIn(names)).map(\.id) == ["p2"])
        let tag = "sale"
        #expect(try products.findAll(where: Field("tags").contains(tag)).map(\.id) == ["p1"])

        // Updates with variables; a nil optional removes its attribute.
        let newPrice = 9.99
        let noPage: URL? = nil
        try products.update("p1", with: ["price": newPrice, "homepage": noPage])
        let updated = try #require(try products.find("p1"))
        #expect(updated["price"] == .double(9.99) && updated["homepage"] == nil)
        try store.bulkUpdate { tx in
            _ = try tx.update("p2", with: ["stock": stock + 1], in: products)
            _ = try tx.put(["object": "p3", "name": name, "stock": UInt8(7)], in: products)
        }
        #expect(try products.find("p2")?["stock"] == 4)
        #expect(try products.find("p3")?["stock"] == 7)
        // Literals keep their meaning (and .null still removes).
        try products.update("p3", with: ["stock": .null, "name": "Cup"])
        #expect(try products.find("p3")?.attributes == ["name": "Cup"])
    }
}
