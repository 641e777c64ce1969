import Foundation
import Logging
import Satchel
import Synchronization
import SatchelTestSupport
import Testing

/// The full-scan guard, and export.
@Suite("Scan guard and export")
struct ScanGuardTests {
    static func fill(_ model: Model) throws {
        for i in 0..<20 {
            try model.create([
                "object": .string("p\(i)"), "brand": i % 2 == 0 ? "Acme" : "Zenith", "price": .int(Int64(i)), "tags": [.string("t\(i % 3)")],
            ])
        }
    }

    static func refusal(_ body: () throws -> Void) -> String? {
        do {
            try body()
            return nil
        } catch let error as SatchelError where error.code == .unindexedQuery {
            return error.message
        } catch {
            return "unexpected \(error)"
        }
    }

    @Test("a query that requires an index is refused, naming the attribute to index, while it would scan the model; served once the index exists")
    func perQuery() throws {
        try withTemporaryStore { store in
            let products = try store.model("Product")
            try Self.fill(products)
            let byBrand = Query(where: Field("brand") == "Acme").requiringIndex()
            #expect(
                Self.refusal { _ = try products.findAll(byBrand) }
                    == "the query would scan every object of 'Product': index 'brand' to serve it (satchel index Product 'brand')")
            #expect(
                Self.refusal { _ = try products.findAll(Query(where: Field("tags").contains("t1")).requiringIndex()) }?.contains("index 'tags[]'")
                    == true)
            #expect(
                Self.refusal { _ = try products.findAll(Query(order: [.ascending(Field("price"))]).requiringIndex()) }?.contains("index 'price'")
                    == true)
            #expect(Self.refusal { _ = try products.findAll(Query().requiringIndex()) }?.contains("no condition or order") == true)
            // Without the switch the same query scans; an id lookup never needs an index.
            #expect(try products.findAll(Query(where: Field("brand") == "Acme")).count == 10)
            #expect(try products.findAll(Query(where: Field.id == "p3").requiringIndex()).count == 1)
            // A condition on the id that narrows nothing still scans every object (found by a
            // black-box probe: it let the scan through).
            for idCondition in [Field.id.exists(), Field.id >= ""] {
                #expect(Self.refusal { _ = try products.findAll(Query(where: Field("brand") == "Acme" && idCondition).requiringIndex()) } != nil)
            }
            #expect(try products.findAll(Query(where: Field.id >= "p5").requiringIndex()).count == 5, "an id range narrows (p5 to p9)")
            // Equalities on one field, or'ed, are its `in` (found by a black-box probe: refused).
            try products.createIndex(IndexDefinition("price"))
            let either = Query(where: Field("price") == 3 || Field("price") == 4 || Field("price").isIn([5])).requiringIndex()
            #expect(try products.findAll(either).map(\.id).sorted() == ["p3", "p4", "p5"])
            #expect(Self.refusal { _ = try products.findAll(Query(where: Field("price") == 3 || Field("brand") == "Acme").requiringIndex()) } != nil)
            try products.dropIndex(IndexDefinition("price"))
            try products.createIndex(IndexDefinition("brand"))
            #expect(try products.findAll(byBrand).count == 10)
            // Snapshots apply it too.
            #expect(Self.refusal { _ = try store.read { try $0.findAll(Query(where: Field("price") > 3).requiringIndex(), in: products) } } != nil)
        }
    }

    @Test("a store that refuses full scans refuses every scanning query outside transactions; transactions still scan")
    func storeOption() throws {
        var configuration = Store.Configuration()
        configuration.refusesFullScans = true
        try withTemporaryStore(configuration: configuration) { store in
            let products = try store.model("Product")
            try Self.fill(products)
            #expect(Self.refusal { _ = try products.findAll(where: Field("price") < 5) } != nil)
            let inTransaction = try store.bulkUpdate { tx in try tx.findAll(Query(where: Field("price") < 5), in: products).count }
            #expect(inTransaction == 5)
        }
    }

    @Test("warnsOnFullScans logs a scanning query (and runs it); a lock conflict is logged before it is thrown")
    func warnings() throws {
        let lines = LockedLines()
        var configuration = Store.Configuration()
        configuration.warnsOnFullScans = true
        configuration.logger = Logger(label: "test") { _ in LinesHandler(lines: lines) }
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"), configuration: configuration)
        defer { try? store.close() }
        let products = try store.model("Product")
        try Self.fill(products)
        #expect(try products.findAll(where: Field("brand") == "Acme").count == 10, "warned, not refused")
        #expect(lines.all.contains { $0.contains("the query would scan every object of 'Product': index 'brand'") })
        #expect(try products.findAll(Query(where: Field.id == "p1")).count == 1)
        let before = lines.all.count
        #expect(throws: SatchelError.self) { _ = try Store(path: directory.child("store"), configuration: configuration) }
        #expect(lines.all.count == before + 1 && lines.all.last?.contains("the store is open elsewhere") == true)
    }

    @Test("export writes JSON lines that import into an empty store as the same objects, ids included")
    func exportRoundTrip() throws {
        let directory = TemporaryDirectory()
        let file = URL(fileURLWithPath: directory.child("products.jsonl"))
        var objects: [Object] = []
        try withTemporaryStore { store in
            let products = try store.model("Product")
            try Self.fill(products)
            try products.update("p0", with: ["nested": ["a": [1, 2.5, "x"]], "note": "line\nbreak \"quoted\""])
            #expect(try products.export(to: file) == 20)
            objects = try products.findAll()
        }
        let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 20)
        try withTemporaryStore { store in
            let copy = try store.model("Product")
            #expect(try store.importObjects(from: file, into: copy) == 20)
            #expect(try copy.findAll() == objects)
        }
    }
}

/// Log lines, collected.
final class LockedLines: Sendable {
    private let lines = Locked<[String]>([])
    var all: [String] { lines.withLock { $0 } }
    func append(_ line: String) { lines.withLock { $0.append(line) } }
}

struct LinesHandler: LogHandler {
    let lines: LockedLines
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) { lines.append("\(event.level) \(event.message)") }
}
