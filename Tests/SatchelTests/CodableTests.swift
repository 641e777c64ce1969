import Foundation
import Satchel
import SatchelTestSupport
import Testing

/// Codable models over property bags: the coders on JSONValue, the null rule, attributes a type
/// does not know, and decode errors that say where.
@Suite("Codable models")
struct CodableTests {
    enum Status: String, Codable { case draft, live }

    struct Dimensions: Codable, Equatable {
        var width: Double
        var height: Double
    }

    struct Product: ModelRecord, Equatable {
        static let modelName = "Product"
        var id: String
        var name: String
        var price: Double?
        var stock: Int
        var status: Status
        var released: Date
        var thumbnail: Data?
        var homepage: URL?
        var tags: [String]
        var size: Dimensions?
        var variants: [Dimensions]
    }

    struct Note: ModelRecord {
        static let modelName = "Note"
        static let idKey = "key"
        var key: String
        var text: String
    }

    static let date = Date(timeIntervalSince1970: 1_764_000_000.125)  // milliseconds: what the ISO form keeps

    static func lamp() -> Product {
        Product(
            id: "p1", name: "Lamp", price: 12.5, stock: 3, status: .live, released: date, thumbnail: Data([1, 2, 3]),
            homepage: URL(string: "https://example.com/lamp"), tags: ["new", "sale"], size: Dimensions(width: 10, height: 20.5),
            variants: [Dimensions(width: 1, height: 2), Dimensions(width: 3, height: 4)])
    }

    @Test("every default encoding round-trips: dates, data, URLs, raw-value enums, nested structs and arrays of them")
    func roundTrip() throws {
        try withTemporaryStore { store in
            let products = try store.model(for: Product.self)
            let lamp = Self.lamp()
            let saved = try #require(try products.save(lamp))
            #expect(saved == lamp)
            #expect(try products.find("p1", as: Product.self) == lamp)
            let stored = try #require(try products.find("p1"))
            #expect(stored["released"] == .string("2025-11-24T16:00:00.125Z"))
            #expect(stored["thumbnail"] == "AQID" && stored["homepage"] == "https://example.com/lamp" && stored["status"] == "live")
            #expect(stored["size"] == ["width": 10.0, "height": 20.5])
            #expect(stored["id"] == nil, "the id property is the object id, not an attribute")
            #expect(try products.findAll(where: Field("stock") > 1, as: Product.self) == [lamp])
        }
    }

    @Test("a nil Optional removes its attribute; attributes the type does not declare survive a read-modify-save")
    func nullRuleAndUnknownAttributes() throws {
        try withTemporaryStore { store in
            let products = try store.model(for: Product.self)
            try products.save(Self.lamp())
            try products.update("p1", with: ["supplier": "Acme", "internal": ["rank": 3]])
            var lamp = try #require(try products.find("p1", as: Product.self))
            lamp.price = nil
            lamp.size = nil
            lamp.name = "Desk lamp"
            try products.save(lamp)
            let stored = try #require(try products.find("p1"))
            #expect(stored["price"] == nil && stored["size"] == nil, "nil removes")
            #expect(stored["name"] == "Desk lamp")
            #expect(stored["supplier"] == "Acme" && stored["internal"] == ["rank": 3], "what the type does not know stays")
            #expect(try products.pendingChanges().count == 1, "logged for sync like any write")
        }
    }

    @Test("decode errors name the model, the object and the attribute path; a custom id key; a bad id is refused")
    func errors() throws {
        try withTemporaryStore { store in
            let products = try store.model(for: Product.self)
            try products.save(Self.lamp())
            try products.update("p1", with: ["variants": [["width": 1, "height": "tall"]]])
            do {
                _ = try products.find("p1", as: Product.self)
                Issue.record("a wrong type decoded")
            } catch let error as SatchelError {
                #expect(error.code == .invalidObject)
                #expect(
                    error.message.contains("object 'p1' of model 'Product'") && error.message.contains("attribute 'variants[0].height'"),
                    "\(error.message)")
            }
            try products.update("p1", with: ["variants": [], "stock": .null])
            #expect(throws: SatchelError.self) { _ = try products.find("p1", as: Product.self) }

            let notes = try store.model(for: Note.self)
            try notes.save(Note(key: "n1", text: "hello"))
            #expect(try notes.find("n1")?.attributes == ["text": "hello"])
            #expect(try notes.find("n1", as: Note.self)?.key == "n1")
            #expect(throws: SatchelError.self) { try notes.save(Note(key: "", text: "no id")) }
            #expect(try notes.delete(Note(key: "n1", text: "")))
            #expect(try notes.find("n1") == nil)
        }
    }

    @Test("the coders work on JSONValue alone and agree with the stored forms")
    func coders() throws {
        let value = try JSONValueEncoder().encode(Self.lamp())
        #expect(value["price"] == 12.5 && value["stock"] == 3 && value["tags"] == ["new", "sale"])
        let back = try JSONValueDecoder().decode(Product.self, from: value)
        #expect(back == Self.lamp())
        #expect(try JSONValueDecoder().decode([Int].self, from: [1, 2.0, 3]) == [1, 2, 3], "an integral double is an integer")
        #expect(throws: DecodingError.self) { try JSONValueDecoder().decode([Int].self, from: [1.5]) }
        #expect(throws: EncodingError.self) { try JSONValueEncoder().encode([Double.nan]) }
        #expect(try JSONValueEncoder().encode(Optional<Int>.none) == .null)
    }

    @Test("store.model(Product.self): a typed handle whose reads return Products; observe as Products; Store(url:)")
    func typedModel() async throws {
        let directory = TemporaryDirectory()
        let store = try Store(url: URL(fileURLWithPath: directory.child("store with space")))
        defer { try? store.close() }
        let products = try store.model(Product.self)
        #expect(products.model.name == "Product")
        var live = products.observe(Query(where: "stock" > 0).order(by: "name")).makeAsyncIterator()
        #expect(try await live.next() == [])
        var lamp = Self.lamp()
        try products.save(lamp)
        #expect(try await live.next() == [lamp])
        var desk = lamp
        desk.id = "p2"
        desk.name = "Desk"
        try products.save(desk)
        #expect(try await live.next() == [desk, lamp])
        #expect(try products.find("p1") == lamp)
        #expect(try products.findAll(where: "name" == "Desk") == [desk])
        #expect(try products.findFirst(where: "stock" > 0, order: [SortKey("name", descending: true)]) == lamp)
        #expect(try products.count() == 2 && products.count(where: "name" == "Lamp") == 1)
        var one = products.observe("p1").makeAsyncIterator()
        #expect(try await one.next() == .some(lamp))
        lamp.stock = 0
        try products.save(lamp)
        #expect(try await live.next() == [desk])
        #expect(try await one.next() == .some(lamp))
        #expect(try products.delete(lamp))
        #expect(try await one.next() == .some(nil))
        // An object that does not decode as a Product fails the typed stream with .invalidObject.
        try products.model.put(["object": "p3", "name": 7, "stock": 1])
        // (The delete's commit may still be buffered before it: results yielded again, unchanged.)
        var failure: (any Error)?
        for _ in 0..<3 where failure == nil {
            do {
                #expect(try await live.next() == [desk])
            } catch {
                failure = error
            }
        }
        #expect((failure as? SatchelError)?.code == .invalidObject, "\(String(describing: failure))")
        #expect { _ = try Store(url: URL(string: "https://example.com/store")!) } throws: {
            ($0 as? SatchelError)?.code == .invalidArgument
        }
    }
}
