import Foundation
import SatchelTestSupport
import Testing

@testable import Satchel

/// docs/KEY_LAYOUT.md's worked examples of values must be the bytes the code writes, and read
/// back as what wrote them: the value layouts, not only the keys, cannot drift from the page.
@Suite("KEY_LAYOUT.md: values")
struct ValueLayoutDocTests {
    /// The rows of the table between `<!-- marker -->` and `<!-- /marker -->`: record → bytes.
    static func rows(_ marker: String) throws -> [String: [UInt8]] {
        let url = Fixtures.directory.deletingLastPathComponent().appendingPathComponent("docs/KEY_LAYOUT.md")
        let text = try String(contentsOf: url, encoding: .utf8)
        guard let start = text.range(of: "<!-- \(marker) -->"), let end = text.range(of: "<!-- /\(marker) -->") else { return [:] }
        var rows: [String: [UInt8]] = [:]
        for line in text[start.upperBound..<end.lowerBound].split(separator: "\n") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == 2, cells[0].hasPrefix("`"), cells[1].hasPrefix("`"), cells[1].hasSuffix("`") else { continue }
            let name = cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            let value = String(cells[1].dropFirst().dropLast())
            if value.hasPrefix("hex: ") {
                rows[name] = value.dropFirst(5).split(separator: " ").compactMap { UInt8($0, radix: 16) }
            } else {
                rows[name] = Array(value.utf8)
            }
        }
        return rows
    }

    static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    @Test("every value example is what the owning code writes, and reads back to what wrote it")
    func values() throws {
        let rows = try Self.rows("values")
        #expect(rows.count == 24, "\(rows.keys.sorted())")
        func expect(_ name: String, _ written: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(rows[name].map(Self.text) == Self.text(written), "\(name)", sourceLocation: sourceLocation)
        }
        func read<T>(_ name: String, _ decode: (UnsafeRawBufferPointer) throws -> T) throws -> T {
            try (rows[name] ?? []).withUnsafeBytes { try decode($0) }
        }

        expect("format", JSONValue.int(Keys.formatVersion).jsonBytes)

        let widget: JSONObject = ["brand": "Acme", "name": "Widget", "price": 9.5]
        expect("object", try StoredObject.encode(widget, model: "Product", id: "p1"))
        #expect(try read("object") { try StoredObject.decode($0, model: "Product", id: "p1") } == widget)
        expect(
            "object with version",
            StoredObject.record(json: try StoredObject.encode(["n": 1], model: "M", id: "x"), version: JSONValue.int(7).jsonBytes))
        #expect(try read("object with version") { try StoredObject.version($0, model: "M", id: "x") } == 7)
        #expect(try read("object with version") { try StoredObject.decode($0, model: "M", id: "x") } == ["n": 1])

        let changes: [(String, StoredChange)] = [
            ("change create", StoredChange(kind: .create, attributes: JSONObject())),
            ("change update", StoredChange(kind: .update, attributes: ["color": .null, "price": 12], base: ["color": "red", "price": 10])),
            ("change update unknown base", StoredChange(kind: .update, attributes: ["price": 12])),
            ("change delete", StoredChange(kind: .delete, attributes: ["name": "Widget"])),
        ]
        for (name, change) in changes {
            expect(name, change.encoded)
            #expect(try read(name) { try StoredChange(decoding: $0) } == change, "\(name)")
        }

        let product = ModelDefinition(name: "Product")
        let order = ModelDefinition(
            name: "Order", kind: .fixedSchema(["customer": .string, "total": .number]), partition: .app, syncType: .bulkOnly,
            associations: ["customer": "Customer"], blobAttributes: ["photo"])
        for (name, model) in [("model", product), ("model fixed", order)] {
            expect(name, model.json.jsonBytes)
            #expect(try read(name) { try ModelDefinition(json: JSONObject(parsing: $0)) } == model, "\(name)")
        }

        let indexes: [(String, StoredIndex)] = [
            ("index", StoredIndex(id: 1, definition: IndexDefinition([Field("brand"), Field("address.city")]), state: .ready, model: "Product")),
            (
                "index keys-only",
                StoredIndex(id: 2, definition: IndexDefinition([Field("price")], storesObjects: false), state: .building, model: "Product")
            ),
            ("index elements", StoredIndex(id: 3, definition: .elements(of: Field("tags")), state: .dropping, model: "Product")),
            ("index text", StoredIndex(id: 4, definition: .text("title", "body"), state: .ready, model: "Product")),
        ]
        for (name, index) in indexes {
            expect(name, index.json.jsonBytes)
            let back = try read(name) { try StoredIndex(json: JSONObject(parsing: $0), model: "Product") }
            #expect(back.id == index.id && back.definition == index.definition && back.state == index.state, "\(name)")
        }
        // A text index's posting block: "n1" (3 words, the word at 0 and 2), "n2" (5 words, at 4).
        let postings: [(id: [UInt8], posting: TextPosting)] = [
            (Array("n1".utf8), TextPosting(length: 3, positions: [0, 2])), (Array("n2".utf8), TextPosting(length: 5, positions: [4])),
        ]
        expect("text postings", TextBlock.encode(postings[...]))
        let block = try read("text postings") { try TextBlock.decode($0) }
        #expect(block.map(\.id) == postings.map(\.id) && block.map(\.posting) == postings.map(\.posting))
        // The form an earlier version of the page specified reads the same.
        let documents = try StoredIndex(
            json: JSONObject(parsing: #"{"documents":true,"fields":[["brand"]],"id":4,"kind":"value","state":"ready"}"#), model: "Product")
        #expect(documents.storesObjects)
        let unsaid = try StoredIndex(json: JSONObject(parsing: #"{"fields":[["brand"]],"id":5,"kind":"value","state":"ready"}"#), model: "Product")
        #expect(!unsaid.storesObjects)

        var statistics = StoredStatistics()
        (statistics.objects, statistics.pendingCreates, statistics.pendingUpdates, statistics.inFlight) = (5, 1, 3, 2)
        statistics.indexEntries = [1: 5]
        statistics.arrays = [NameKey("tags"): 2]
        expect("stats", statistics.encoded)
        #expect(try read("stats") { try StoredStatistics(decoding: $0) } == statistics)

        let inFlight: [(String, InFlightChange)] = [
            ("in flight", InFlightChange(kind: .update, attributes: ["price": 12], baseVersion: 7, baseValues: ["price": 10])),
            ("in flight create", InFlightChange(kind: .create, attributes: ["name": "Widget"], state: .awaitingLink)),
        ]
        for (name, change) in inFlight {
            expect(name, change.json.jsonBytes)
            #expect(try read(name) { try InFlightChange(json: JSONObject(parsing: $0)) } == change, "\(name)")
        }

        let errors: [(String, RefusedChange)] = [
            (
                "refused change",
                RefusedChange(
                    model: "Product", objectID: "p1", kind: .update, message: "price too low", code: "142", attributes: ["price": 12],
                    serverCopy: ["price": 10])
            ),
            (
                "refused change gone",
                RefusedChange(
                    model: "Product", objectID: "p1", kind: .update, message: "deleted on the server", attributes: ["price": 12], serverDeleted: true)
            ),
        ]
        for (name, error) in errors {
            expect(name, error.stored.jsonBytes)
            #expect(try read(name) { try RefusedChange(model: "Product", objectID: "p1", stored: JSONObject(parsing: $0)) } == error, "\(name)")
        }

        let version: JSONValue = ["updatedAt": "2024-05-01T10:00:00.000Z"]
        expect("version", version.jsonBytes)

        let state = ModelSyncState(
            cursor: ["since": 42], fullPullPending: true, initialSyncComplete: true, lastSync: "2026-11-21T20:00:00Z",
            metadata: ["types": ["due": "Date"]])
        expect("sync state", state.json.jsonBytes)
        #expect(try read("sync state") { ModelSyncState(json: try JSONObject(parsing: $0)) } == state)

        expect("rewrite", RewriteRecord.encode(["local-1": "Xy12"]))
        #expect(try read("rewrite", RewriteRecord.renames) == ["local-1": "Xy12"])

        let applied = Store.AppliedMigration(
            order: 2, applied: "2026-11-26T10:00:00Z", changed: 120, deleted: 0, steps: [["rename": "title", "to": "name"]])
        expect("migration applied", applied.json.jsonBytes)
        #expect(try read("migration applied") { try Store.AppliedMigration(json: JSONObject(parsing: $0)) } == applied)
        var underWay = Store.MigrationState(name: "v2", push: false, steps: [["rename": "title", "to": "name"]])
        (underWay.cursor, underWay.changed) = ("n-0999", 1000)
        expect("migration under way", underWay.json.jsonBytes)
        #expect(try read("migration under way") { try Store.MigrationState(json: JSONObject(parsing: $0)) } == underWay)
    }
}
