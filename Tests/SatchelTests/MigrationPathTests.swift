import Foundation
import SatchelTestSupport
import Testing

@testable import Satchel

/// Migration steps that name paths, as queries write them: into nested objects
/// (`address.city`) and into each element of an array (`items[].product`).
@Suite("Migrations over paths")
struct MigrationPathTests {
    /// Orders with lines (some not objects, some a single line without its array), addresses
    /// (some missing, some a plain string) and a nested legacy flag.
    static func orders(_ store: Store, count: Int) throws -> (Model, [String: JSONObject]) {
        var rng = SplitMix64(seed: 31)
        var written: [String: JSONObject] = [:]
        let model = try store.model("Order")
        try store.bulkUpdate { tx in
            for i in 0..<count {
                let id = String(format: "o%04d", i)
                var attributes: JSONObject = ["total": .int(Int64(i))]
                var lines: [JSONValue] = []
                for _ in 0..<Int.random(in: 0...3, using: &rng) {
                    var line: JSONObject = [
                        "product": .string("p\(Int.random(in: 0..<5, using: &rng))"), "qty": .string("\(Int.random(in: 1...9, using: &rng))"),
                    ]
                    if Bool.random(using: &rng) { line["discount"] = .double(0.1) }
                    if Bool.random(using: &rng) { line["currency"] = "USD" }
                    lines.append(.object(line))
                }
                if i % 7 == 0 { lines.append("a note, not a line") }
                switch i % 5 {
                case 0: attributes["items"] = lines.first(where: { $0.objectValue != nil }) ?? .array(lines)  // a single line, no array
                case 1: break  // no lines
                default: attributes["items"] = .array(lines)
                }
                switch i % 4 {
                case 0: attributes["address"] = .object(["city": .string("c\(i % 3)"), "street": "Main"])
                case 1: attributes["address"] = "12 Main St"  // not an object: the steps leave it
                case 2: attributes["address"] = .object(["street": "High"])
                default: break  // none: the add makes one
                }
                if i % 2 == 0 { attributes["meta"] = .object(["legacy": true, "source": "import"]) }
                attributes[Object.idAttribute] = .string(id)
                _ = try tx.put(attributes, in: model)
                attributes[Object.idAttribute] = nil
                written[id] = attributes
            }
        }
        return (model, written)
    }

    static let steps: [MigrationStep] = [
        .rename("items[].product", to: "items[].sku"), .remove("items[].discount"), .convert("items[].qty", .integer),
        .add("items[].currency", default: "EUR"), .rename("address.city", to: "address.town"), .add("address.country", default: "NZ"),
        .remove("meta.legacy"), .add("items[].tax.rate", default: 0.2),
    ]

    /// What the steps make of `attributes`, written out by hand, member by member.
    static func expected(_ attributes: JSONObject) -> JSONObject {
        func line(_ value: JSONValue) -> JSONValue {
            guard var line = value.objectValue else { return value }
            if let product = line["product"] {
                line["product"] = nil
                line["sku"] = product
            }
            line["discount"] = nil
            if let qty = line["qty"]?.stringValue { line["qty"] = .int(Int64(qty)!) }
            if line["currency"] == nil { line["currency"] = "EUR" }
            line["tax"] = .object(["rate": .double(0.2)])  // no line has one: the add makes it
            return .object(line)
        }
        var result = attributes
        switch attributes["items"] {
        case .array(let lines)?: result["items"] = .array(lines.map(line))
        case let single?: result["items"] = line(single)
        case nil: break
        }
        switch attributes["address"] {
        case .object(var address)?:
            if let city = address["city"] {
                address["city"] = nil
                address["town"] = city
            }
            if address["country"] == nil { address["country"] = "NZ" }
            result["address"] = .object(address)
        case nil: result["address"] = .object(["country": "NZ"])
        default: break
        }
        if case .object(var meta)? = attributes["meta"] {
            meta["legacy"] = nil
            result["meta"] = .object(meta)
        }
        return result
    }

    @Test("rename, remove, convert and add reach into nested objects and each element of an array; every object is what the steps say")
    func pathsIntoObjectsAndArrays() throws {
        try withTemporaryStore { store in
            let (model, written) = try Self.orders(store, count: 200)
            try model.createIndex(.elements(of: "items[].sku"))
            let report = try store.migrate([Migration("paths", model: "Order", steps: Self.steps)])
            let unchanged = written.filter { Self.expected($0.value).isIdentical(to: $0.value) }.count
            #expect(report.first?.changed == 200 - unchanged && unchanged < 200)
            for object in try model.findAll() {
                #expect(object.attributes == Self.expected(written[object.id]!), "\(object.id)")
            }
            // The index over the renamed path answers as a scan does.
            for sku in ["p0", "p3"] {
                let scanned = try model.findAll().filter { Field("items[].sku").values(in: $0.attributes).contains(.string(sku)) }.count
                let condition: Condition = Field("items[].sku") == .string(sku)
                #expect(try model.explain(Query(where: condition)).access == .index(.elements(of: "items[].sku")))
                #expect(try model.count(where: condition) == scanned && scanned > 0)
            }
            #expect(try model.count(where: Field("items[].product").exists()) == 0)
            #expect(try store.verify().isHealthy)
        }
    }

    @Test(
        "a null a path reaches is missing, as to queries: convert leaves it, add fills it (a black-box probe: convert wrote the text null or refused the migration, and add left the null)"
    )
    func nestedNullIsMissing() throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("s"))
        defer { try? store.close() }
        let model = try store.model("M")
        _ = try model.put(["object": "o1", "a": ["z": .null, "k": 1], "items": [["q": .null, "p": 1], ["q": 2]]])
        _ = try model.put(["object": "o2", "a": ["k": 2], "items": [["p": 3]]])
        #expect(try model.count(where: Field("a.z").exists(false)) == 2)
        try store.migrate([Migration("to-number", model: "M", steps: [.convert("a.z", .number), .convert("items[].q", .number)])])
        try store.migrate([Migration("to-string", model: "M", steps: [.convert("a.z", .string), .convert("items[].q", .string)])])
        #expect(try model.count(where: Field("a.z").exists(false)) == 2, "still missing")
        #expect(try model.find("o1")?["items"] == [["q": .null, "p": 1], ["q": "2"]])
        try store.migrate([Migration("fill", model: "M", steps: [.add("a.z", default: 7), .add("items[].q", default: 0)])])
        #expect(try model.count(where: Field("a.z").exists(false)) == 0)
        #expect(try model.find("o1")?["a"] == ["z": 7, "k": 1])
        #expect(try model.find("o1")?["items"] == [["q": 0, "p": 1], ["q": "2"]])
        #expect(try store.verify().isHealthy)
    }

    @Test(
        "a step names an attribute holding a dot as a JSON string, as the CLI's options do: add, convert, rename, remove and an index reach it, not the path (found by a black-box probe)"
    )
    func quotedNamesInSteps() throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("s"))
        defer { try? store.close() }
        let model = try store.model("M")
        _ = try model.put(["object": "o1", "a.b": "5", "a": ["b": "7"]])
        let index = try MigrationStep(json: ["createIndex": #""a.b""#])
        try store.migrate([
            Migration("quoted", model: "M", steps: [.convert(#""a.b""#, .integer), .add(#""n.m""#, default: 3), index])
        ])
        #expect(try model.find("o1")?.attributes == ["a.b": 5, "a": ["b": "7"], "n.m": 3])
        #expect(try model.explain(Query(where: Field(components: ["a.b"]) == 5)).access == .index(IndexDefinition([Field(components: ["a.b"])])))
        #expect(try model.count(where: Field(components: ["a.b"]) == 5) == 1)
        try store.migrate([Migration("rename", model: "M", steps: [.rename(#""a.b""#, to: #""c.d""#), .remove(#""n.m""#)])])
        #expect(try model.find("o1")?.attributes == ["c.d": 5, "a": ["b": "7"]])
        // Quotes around no name, or around what is no JSON string, are refused, not taken as a name.
        for wrong in [#""""#, #""a"b""#, #""a[]""#] {
            let error = #expect(throws: SatchelError.self) { try store.migrate([Migration("bad", model: "M", steps: [.remove(wrong)])]) }
            #expect(error?.code == .invalidArgument, "\(wrong)")
        }
        let brackets = #expect(throws: SatchelError.self) {
            try store.migrate([Migration("bad", model: "M", steps: [try MigrationStep(json: ["createIndex": #""a[]""#])])])
        }
        #expect(brackets?.message.contains("ends in []") == true, "\(String(describing: brackets))")
        #expect(try store.verify().isHealthy)
    }

    @Test("a dotted path without [] that meets an array refuses the migration, naming the object; nothing changes")
    func dottedPathMeetingAnArray() throws {
        try withTemporaryStore { store in
            let (model, _) = try Self.orders(store, count: 20)
            let before = try model.findAll()
            do {
                try store.migrate([Migration("bad", model: "Order", steps: [.rename("items.product", to: "items.sku")])])
                Issue.record("the migration ran")
            } catch let error as SatchelError {
                #expect(error.code == .invalidObject && error.message.contains("meets an array at 'items'"), "\(error)")
                #expect(error.message.contains("write 'items[].product'") && error.message.contains("nothing was changed"), "\(error)")
            }
            #expect(try model.findAll() == before && model.appliedMigrations.isEmpty)
        }
    }

    @Test("a step a path cannot take is refused before anything is read: a rename out of its object, a name ending in [], an empty name")
    func refusedSteps() throws {
        try withTemporaryStore { store in
            let (model, _) = try Self.orders(store, count: 5)
            let before = try model.findAll()
            for (step, message) in [
                (MigrationStep.rename("address.city", to: "town"), "keeps an attribute in the object that holds it"),
                (.rename("items[].product", to: "lines[].product"), "keeps an attribute in the object that holds it"),
                (.remove("items[]"), "ends in []"), (.add("tags[]", default: 1), "ends in []"), (.convert("a..b", .string), "an empty name"),
            ] {
                do {
                    try store.migrate([Migration("bad", model: "Order", steps: [step])])
                    Issue.record("\(step) ran")
                } catch let error as SatchelError {
                    #expect(error.code == .invalidArgument && error.message.contains(message), "\(error)")
                }
            }
            // The JSON form says the same at parsing.
            let json = try JSONObject(parsing: #"{"name":"x","steps":[{"rename":"address.city","to":"city"}]}"#)
            #expect(throws: SatchelError.self) { try Migration(model: "Order", json: json) }
            #expect(try model.findAll() == before && model.appliedMigrations.isEmpty)
        }
    }

    @Test("the JSON form takes an index over a path into arrays as satchel index does: element by element, and writes it back the same")
    func indexOverAPathIntoArrays() throws {
        try withTemporaryStore { store in
            let (model, written) = try Self.orders(store, count: 60)
            let json = try JSONObject(
                parsing:
                    #"{"name":"v2","steps":[{"rename":"items[].product","to":"items[].sku"},{"createIndex":"items[].sku"},{"createIndex":"tags[]"}]}"#
            )
            let migration = try Migration(model: "Order", json: json)
            guard case .createIndex(let definition) = migration.steps[1] else {
                Issue.record("\(migration.steps[1])")
                return
            }
            #expect(definition == .elements(of: "items[].sku"))
            #expect(migration.stepsJSON == json["steps"])
            try store.migrate([migration])
            let condition: Condition = Field("items[].sku") == "p2"
            let scanned = written.values.filter { Field("items[].product").values(in: $0).contains("p2") }.count
            #expect(try model.explain(Query(where: condition)).access == .index(.elements(of: "items[].sku")))
            #expect(try model.count(where: condition) == scanned && scanned > 0)
        }
    }

    @Test("a pending change holding the path's top-level attribute is rewritten with its object, base values too")
    func pendingChanges() throws {
        try withTemporaryStore { store in
            let model = try store.model("Order")
            try store.bulkUpdate { tx in
                try tx.writeServerObject(
                    model, "o1", ["address": .object(["city": "Paris", "zip": "75001"]), "items": [["product": "p1", "qty": "2"]]])
                try tx.writeServerObject(model, "o2", ["address": .object(["city": "Rome"])])
            }
            _ = try model.update("o1", with: ["address": .object(["city": "Lyon", "zip": "69001"]), "items": [["product": "p2", "qty": "3"]]])
            try store.migrate([
                Migration(
                    "paths", model: "Order", steps: [.rename("address.city", to: "address.town"), .rename("items[].product", to: "items[].sku")])
            ])
            let pending = try model.pendingChanges()
            #expect(pending.map(\.objectID) == ["o1"])
            #expect(pending.first?.attributes == ["address": .object(["town": "Lyon", "zip": "69001"]), "items": [["sku": "p2", "qty": "3"]]])
            #expect(pending.first?.baseValues == ["address": .object(["town": "Paris", "zip": "75001"]), "items": [["sku": "p1", "qty": "2"]]])
            #expect(try model.find("o2")?.attributes == ["address": .object(["town": "Rome"])])
        }
    }
}
