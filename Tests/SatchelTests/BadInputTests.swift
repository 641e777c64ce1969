import Foundation
import SatchelTestSupport
import Testing

@testable import Satchel

@Suite("Odd names and bad input")
struct BadInputTests {
    static let oddNames: [String] = [
        "a/b", "/", "with space", " leading", "ünïcödé", "日本語", "emoji😀", "caf\u{E9}", "cafe\u{301}", "nul\0byte", "\0",
        String(repeating: "long/", count: 2048), "quote\"back\\slash", "tab\tnewline\n",
    ]

    @Test("odd model names, attribute names and ids round-trip exactly", arguments: oddNames)
    func oddNamesRoundTrip(_ name: String) throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        do {
            let store = try Store(path: path)
            let model = try store.model(name)
            try model.create(["object": .string(name), name: .string(name), "plain": 1])
            try model.create(["object": "", "empty-id": true])
            // A sibling name that a naive encoding would confuse.
            try store.model(name + "\0").create(["object": .string(name), "sibling": true])
            try store.close()
        }
        let store = try Store(path: path)
        defer { try? store.close() }
        let model = try store.model(name)
        let found = try #require(try model.find(name))
        #expect(found.id.utf8.elementsEqual(name.utf8))
        #expect(found.attributes == [name: .string(name), "plain": 1])
        #expect(found.attributes.keys.contains { $0.utf8.elementsEqual(name.utf8) })
        #expect(try model.find("")?["empty-id"] == true)
        #expect(try model.count() == 2)
        #expect(try model.findAll().count == 2)
        #expect(try store.model(name + "\0").findAll().map(\.attributes) == [["sibling": true]])
        #expect(store.models.contains { $0.name.utf8.elementsEqual(name.utf8) })
    }

    @Test("canonically equivalent names stay distinct models, attributes and ids")
    func canonicalEquivalence() throws {
        try withTemporaryStore { store in
            let nfc = try store.model("caf\u{E9}"), nfd = try store.model("cafe\u{301}")
            try nfc.create(["object": "caf\u{E9}", "caf\u{E9}": 1])
            try nfc.create(["object": "cafe\u{301}", "cafe\u{301}": 2])
            #expect(try nfc.count() == 2)
            #expect(try nfd.count() == 0)
            #expect(try nfc.find("cafe\u{301}")?.attributes.keys == ["cafe\u{301}"])
            #expect(store.models.count == 2)
        }
    }

    @Test("values from the edges round-trip through the store")
    func edgeValues() throws {
        try withTemporaryStore { store in
            let model = try store.model("Edge")
            let big = String(repeating: "x", count: 5 << 20)
            let attributes: JSONObject = [
                "big": .string(big), "max": .int(.max), "min": .int(.min), "double": 0.1, "negzero": -0.0, "tiny": .double(.leastNonzeroMagnitude),
                "nested": [["a": [[], [:], [.null]]]], "unicode": "\u{10FFFF}\u{0}",
            ]
            let stored = try model.create(attributes)
            let found = try #require(try model.find(stored.id))
            #expect(found.attributes.isIdentical(to: attributes))
        }
    }

    @Test("values nested deeper than the limit are refused and change nothing")
    func deepValue() throws {
        try withTemporaryStore { store in
            let model = try store.model("Deep")
            var value: JSONValue = 1
            for _ in 0..<300 { value = [value] }
            let before = try dump(store)
            expectError(.malformedJSON) { try model.create(["deep": value]) }
            #expect(try dump(store) == before)
        }
    }
}
