import Foundation
import SatchelTestSupport
import Testing

@testable import Satchel

/// docs/KEY_LAYOUT.md is the on-disk format's specification: its worked examples must be the
/// bytes the code writes.
@Suite("KEY_LAYOUT.md")
struct KeyLayoutDocTests {
    struct Example {
        var family: KeyFamily
        var elements: [JSONValue]
        var hex: String
    }

    /// Rows of the examples table: | `family` | `[elements as JSON]` | `hex bytes` |
    static func examples() throws -> [Example] {
        let url = Fixtures.directory.deletingLastPathComponent().appendingPathComponent("docs/KEY_LAYOUT.md")
        let text = try String(contentsOf: url, encoding: .utf8)
        guard let start = text.range(of: "<!-- examples -->"), let end = text.range(of: "<!-- /examples -->") else { return [] }
        return try text[start.upperBound..<end.lowerBound].split(separator: "\n").compactMap { line in
            let cells = line.split(separator: "|").map {
                $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            }
            guard cells.count == 3,
                let family = [
                    "meta": KeyFamily.meta, "obj": .object, "idx": .index, "chg": .change, "out": .inFlight, "err": .error, "ver": .version,
                ][cells[0]]
            else { return nil }
            guard case .array(let elements) = try JSONValue(parsing: cells[1]) else { return nil }
            return Example(family: family, elements: elements, hex: cells[2])
        }
    }

    @Test("every worked example encodes to the documented bytes")
    func examplesMatch() throws {
        let examples = try Self.examples()
        #expect(examples.count >= 27)
        for example in examples {
            let actual = Keys.encode(example.family, example.elements).map { String(format: "%02x", $0) }.joined(separator: " ")
            #expect(actual == example.hex, "\(example.family) \(example.elements)")
        }
    }

    @Test("the named key constructors produce the documented layouts")
    func constructors() {
        #expect(Keys.object("Product", "p1") == Keys.encode(.object, ["Product", "p1"]))
        #expect(Keys.change("Product", "p1") == Keys.encode(.change, ["Product", "p1"]))
        #expect(Keys.modelDefinition("Product") == Keys.encode(.meta, ["model", "Product"]))
        #expect(Keys.modelStatistics("Product") == Keys.encode(.meta, ["stats", "Product"]))
        #expect(Keys.format == Keys.encode(.meta, ["format"]))
        #expect(Keys.objectRecord(.inFlight, "Product", "p1") == Keys.encode(.inFlight, ["Product", "p1"]))
        #expect(Keys.objectRecord(.error, "Product", "p1") == Keys.encode(.error, ["Product", "p1"]))
        #expect(Keys.objectRecord(.version, "Product", "p1") == Keys.encode(.version, ["Product", "p1"]))
        #expect(Keys.syncState("Product") == Keys.encode(.meta, ["sync", "Product"]))
        #expect(Keys.session == Keys.encode(.meta, ["session"]))
        #expect(Keys.rewrite("Customer", "01J") == Keys.encode(.meta, ["rewrite", "Customer", "01J"]))
        #expect(Keys.rewrite("Customer", "01J").starts(with: Keys.rewritePrefix))
        #expect(Keys.migration("Note", "v2") == Keys.encode(.meta, ["migration", "Note", "v2"]))
        #expect(Keys.migration("Note", "v2").starts(with: Keys.migrationPrefix("Note")))
        #expect(Keys.migrating("Note") == Keys.encode(.meta, ["migrating", "Note"]))
        #expect(Keys.migrating("Note").starts(with: Keys.migratingPrefix))
    }
}
