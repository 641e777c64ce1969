import Foundation
import SatchelTestSupport
import Synchronization
import Testing

@testable import Satchel

/// Paths into arrays of objects (`items[].product`): random orders and random conditions, each
/// answered by the store (scanning, and through an array-element index on the path) and by a
/// naive evaluator written here on its own.
@Suite("Paths into arrays of objects")
struct ArrayPathTests {
    /// An order: lines that are objects (most with a product, some with a quantity), sometimes a
    /// line that is not an object, sometimes no `items`, or `items` that is not an array (a
    /// string, or one line object).
    static func order(_ i: Int, _ rng: inout SplitMix64) -> JSONObject {
        var order: JSONObject = ["object": .string(String(format: "o%04d", i)), "n": .int(Int64(i))]
        switch Int.random(in: 0..<10, using: &rng) {
        case 0: return order
        case 1:
            order["items"] = .string("prod-\(Int.random(in: 0..<20, using: &rng))")
            return order
        case 2:
            // One line written without its array: its own one element.
            order["items"] = ["product": .string("prod-\(Int.random(in: 0..<20, using: &rng))")]
            return order
        default: break
        }
        var lines: [JSONValue] = []
        for _ in 0..<Int.random(in: 0...4, using: &rng) {
            switch Int.random(in: 0..<8, using: &rng) {
            case 0: lines.append(.int(Int64.random(in: 0..<5, using: &rng)))
            case 1: lines.append(["qty": .int(Int64.random(in: 1...5, using: &rng))])
            default:
                var line: JSONObject = ["product": .string("prod-\(Int.random(in: 0..<20, using: &rng))")]
                if Bool.random(using: &rng) { line["qty"] = .int(Int64.random(in: 1...5, using: &rng)) }
                lines.append(.object(line))
            }
        }
        order["items"] = .array(lines)
        return order
    }

    /// The values of `name` of each object line of `items`, found without `Field`.
    static func lineValues(_ order: JSONObject, _ name: String) -> [JSONValue] {
        let lines: [JSONValue]
        switch order["items"] {
        case .array(let elements)?: lines = elements
        case let single?: lines = [single]
        case nil: lines = []
        }
        return lines.compactMap { line in
            guard case .object(let object) = line else { return nil }
            return object[name]
        }
    }

    /// A random condition on `items[].product` and `items[].qty`, and what it means.
    static func condition(_ rng: inout SplitMix64, depth: Int = 0) -> (Condition, (JSONObject) -> Bool) {
        let product = "prod-\(Int.random(in: 0..<20, using: &rng))"
        let qty = Int64.random(in: 1...5, using: &rng)
        let products = Field("items[].product"), quantities = Field("items[].qty")
        let choice = Int.random(in: 0..<(depth < 2 ? 11 : 8), using: &rng)
        switch choice {
        case 0: return (products == .string(product), { lineValues($0, "product").contains(.string(product)) })
        case 1: return (products != .string(product), { lineValues($0, "product").contains { $0 != .string(product) } })
        case 2:
            let other = "prod-\(Int.random(in: 0..<20, using: &rng))"
            return (
                products.isIn([.string(product), .string(other)]),
                { lineValues($0, "product").contains { [.string(product), .string(other)].contains($0) } }
            )
        case 3: return (products.exists(), { !lineValues($0, "product").isEmpty })
        case 4: return (products.exists(false), { lineValues($0, "product").isEmpty })
        case 5: return (quantities < .int(qty), { lineValues($0, "qty").contains { ($0.intValue ?? .max) < qty } })
        case 6: return (products.beginsWith("prod-1"), { lineValues($0, "product").contains { $0.stringValue?.hasPrefix("prod-1") ?? false } })
        case 7: return (products.contains("d-1"), { lineValues($0, "product").contains { $0.stringValue?.contains("d-1") ?? false } })
        case 8:
            let (a, f) = condition(&rng, depth: depth + 1), (b, g) = condition(&rng, depth: depth + 1)
            return (a && b, { f($0) && g($0) })
        case 9:
            let (a, f) = condition(&rng, depth: depth + 1), (b, g) = condition(&rng, depth: depth + 1)
            return (a || b, { f($0) || g($0) })
        default:
            let (a, f) = condition(&rng, depth: depth + 1)
            return (!a, { !f($0) })
        }
    }

    @Test(
        "an element index serves `in` on its path and `tags[] ==` on an index of `tags`, each object once, as the scan answers (found by a black-box probe: --require-index refused them)"
    )
    func elementsServeInAndArrayStep() throws {
        try withTemporaryStore { store in
            let orders = try store.model("Order")
            _ = try orders.put(["object": "o1", "items": [["product": "p-7"], ["product": "p-9"]], "tags": ["x", "y"]])
            _ = try orders.put(["object": "o2", "items": [["product": "p-9"]], "tags": "x"])
            _ = try orders.put(["object": "o3", "items": [["product": "p-8"]], "tags": [["x"]]])
            _ = try orders.put(["object": "o4", "tags": ["xy", 5]])
            let conditions: [Condition] = [
                Field("items[].product").isIn(["p-7", "p-9"]), Field("items[].product").isIn(["p-9", "p-9", "p-8"]),
                Field("tags[]") == "x", Field("tags[]").isIn(["x", "y"]), Field("tags[]") == "xy",
            ]
            var scanned: [[String]] = []
            for condition in conditions {
                scanned.append(try orders.findAll(where: condition).map(\.id).sorted())
            }
            #expect(scanned[0] == ["o1", "o2"] && scanned[2] == ["o1", "o2"] && scanned[3] == ["o1", "o2"], "\(scanned)")
            try orders.createIndex(.elements(of: "items[].product"))
            try orders.createIndex(.elements(of: "tags"))
            for (condition, expected) in zip(conditions, scanned) {
                let plan = try orders.explain(Query(where: condition))
                guard case .index = plan.access else {
                    Issue.record("\(condition) scans: \(plan.description)")
                    continue
                }
                #expect(try orders.findAll(where: condition).map(\.id).sorted() == expected, "\(condition)")
                #expect(try orders.count(where: condition) == expected.count, "\(condition)")
                #expect(try orders.findAll(Query(where: condition, limit: 1)).count == min(1, expected.count))
            }
            // A number is not served by an index of `tags` (a scalar number has no entry): scanned, and right.
            let number = Field("tags[]") == 5
            #expect(try orders.explain(Query(where: number)).access == .scan)
            #expect(try orders.findAll(where: number).map(\.id) == ["o4"])
        }
    }

    @Test(
        "a range with an array bound compares whole arrays, element by element, a prefix first, as --order sorts them; with an index on the attribute too (found by a black-box probe: it never matched)"
    )
    func arrayRanges() throws {
        try withTemporaryStore { store in
            let model = try store.model("A")
            let values: [JSONValue] = [[1], [1, 2], [1, 2, 3], [2], [1, "x"], [], "s", 5]
            for (i, value) in values.enumerated() { try model.create(["object": .string("a\(i)"), "n": value]) }
            func ids(_ condition: Condition) throws -> [String] { try model.findAll(Query(where: condition)).map(\.id).sorted() }
            let cases: [(Condition, [String])] = [
                (Field("n") >= [1, 2], ["a1", "a2", "a3", "a4"]),
                (Field("n") > [1], ["a1", "a2", "a3", "a4"]),
                (Field("n") < [2], ["a0", "a1", "a2", "a4", "a5"]),
                (Field("n") <= [1, 2], ["a0", "a1", "a5"]),
                (Field("n") < [], []),
            ]
            for (condition, expected) in cases { #expect(try ids(condition) == expected, "\(condition)") }
            let sorted = try model.findAll(Query(where: Field("n") >= [], order: [.ascending("n")])).map(\.id)
            #expect(sorted == ["a5", "a0", "a1", "a2", "a4", "a3"], "the order --order gives")
            try model.createIndex(IndexDefinition("n"))
            for (condition, expected) in cases { #expect(try ids(condition) == expected, "indexed: \(condition)") }
        }
    }

    @Test("random conditions on items[].product and items[].qty: the store's answer, scanning and indexed, is the naive evaluator's")
    func differential() throws {
        var rng = SplitMix64(seed: 29)
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        defer { try? store.close() }
        let orders = try store.register(ModelDefinition(name: "Order", syncType: .none))
        let written = (0..<400).map { Self.order($0, &rng) }
        try store.bulkUpdate { tx in for order in written { try tx.put(order, in: orders) } }

        var indexedPlans = 0
        for round in 0..<2 {
            if round == 1 { try orders.createIndex(.elements(of: "items[].product")) }
            for _ in 0..<150 {
                let (condition, meaning) = Self.condition(&rng)
                let expected = written.filter(meaning).compactMap { $0["object"]?.stringValue }.sorted()
                let found = try orders.findAll(where: condition).map(\.id).sorted()
                #expect(found == expected, "\(condition), \(round == 0 ? "scanning" : "with the index")")
                #expect(try orders.count(where: condition) == expected.count)
                if round == 1, case .index = try orders.explain(Query(where: condition)).access { indexedPlans += 1 }
            }
        }
        #expect(indexedPlans > 0, "the element index served some of the conditions")
        #expect(try store.verify().isHealthy, "the index's entries are the objects' values")
    }

    @Test("a projection through items[] keeps the array, each line reduced to the selected names; lines with none of them are left out")
    func projection() throws {
        var rng = SplitMix64(seed: 31)
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        defer { try? store.close() }
        let orders = try store.register(ModelDefinition(name: "Order", syncType: .none))
        let written = (0..<300).map { Self.order($0, &rng) }
        try store.bulkUpdate { tx in for order in written { try tx.put(order, in: orders) } }

        // Written here without `Field`: a line (an object, or `items` itself when it is one
        // object) keeps its product and its quantity; the array keeps the lines left.
        func reduced(_ line: JSONValue) -> JSONValue? {
            guard case .object(let object) = line else { return nil }
            var kept = JSONObject()
            for name in ["product", "qty"] { if let value = object[name] { kept[name] = value } }
            return kept.isEmpty ? nil : .object(kept)
        }
        let query = Query(order: [.ascending("n")]).select("items[].product", "n", "items[].qty")
        let found = try orders.findAll(query)
        #expect(found.count == written.count)
        for (object, order) in zip(found, written) {
            var expected: JSONObject = ["n": order["n"]!]
            switch order["items"] {
            case .array(let lines)?:
                let kept = lines.compactMap(reduced)
                if !kept.isEmpty { expected["items"] = .array(kept) }
            case let single?: expected["items"] = reduced(single)
            case nil: break
            }
            #expect(object.attributes == expected, "\(object.id): \(order)")
        }

        // One example as printed, and the whole array when it is selected too.
        _ = try orders.put(["object": "x1", "n": 1000, "items": [["product": "p-1", "qty": 2, "note": "gift"], 7, ["note": "none"], ["qty": 1]]])
        let one = try #require(try orders.findAll(Query(where: "object" == "x1").select("items[].qty", "items[].product")).first)
        #expect(one.attributes == ["items": [["product": "p-1", "qty": 2], ["qty": 1]]])
        let whole = try #require(try orders.findAll(Query(where: "object" == "x1").select("items[].qty", "items")).first)
        #expect(whole.attributes["items"] == (try orders.find("x1"))?.attributes["items"])
        let none = try #require(try orders.findAll(Query(where: "object" == "x1").select("items[].missing")).first)
        #expect(none.attributes.isEmpty && none.id == "x1")
        // `items` as one line object, reached by a path through `[]` and a dotted one: one object.
        _ = try orders.put(["object": "x2", "n": 1001, "items": ["product": "p-2", "qty": 1, "note": "gift"]])
        let single = try #require(try orders.findAll(Query(where: "object" == "x2").select("items[].product", "items.qty")).first)
        #expect(single.attributes == ["items": ["product": "p-2", "qty": 1]])
    }

    @Test("the index over a path into arrays: one entry per distinct value, kept by writes, used for ==, shown by explain")
    func index() throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        defer { try? store.close() }
        let orders = try store.register(ModelDefinition(name: "Order", syncType: .none))
        _ = try orders.put(["object": "o1", "items": [["product": "prod-1"], ["product": "prod-1"], ["product": "prod-2"]]])
        _ = try orders.put(["object": "o2", "items": [["product": "prod-2", "qty": 3]]])
        try orders.createIndex(.elements(of: "items[].product"))
        #expect(try orders.indexes.map(\.definition.description) == ["items[].product"])
        let plan = try orders.explain(Query(where: "items[].product" == "prod-2"))
        #expect(plan.description.contains("index items[].product"), "\(plan.description)")
        #expect(try orders.findAll(where: "items[].product" == "prod-2").map(\.id) == ["o1", "o2"])
        #expect(try orders.findAll(where: "items[].product" == "prod-1").map(\.id) == ["o1"])
        _ = try orders.update("o1", with: ["items": [["product": "prod-3"]]])
        #expect(try orders.findAll(where: "items[].product" == "prod-1").isEmpty)
        #expect(try orders.findAll(where: "items[].product" == "prod-3").map(\.id) == ["o1"])
        #expect(try store.verify().isHealthy)
        // A value index on such a path would hold the whole list in one entry: refused.
        #expect(throws: SatchelError.self) { try orders.createIndex(IndexDefinition("items[].product")) }
    }

    @Test(
        "ordering and grouping by a path through [] leave out the nulls it reaches, as conditions do: a line holding only a null is missing (found by a black-box probe)"
    )
    func orderAndGroupSkipNulls() throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        defer { try? store.close() }
        let orders = try store.register(ModelDefinition(name: "Order", syncType: .none))
        _ = try orders.put(["object": "o1", "items": [["product": "p1"]]])
        _ = try orders.put(["object": "o2", "items": [["product": .null], ["product": "p2"]]])
        _ = try orders.put(["object": "o3", "items": [["product": .null]]])
        _ = try orders.put(["object": "o4", "items": [["qty": 1]]])
        for indexed in [false, true] {
            if indexed { try orders.createIndex(.elements(of: "items[].product")) }
            #expect(try orders.findAll(Query().order(by: "items[].product")).map(\.id) == ["o3", "o4", "o1", "o2"], "missing first, then by value")
            let groups = try orders.aggregate(groupBy: ["items[].product"], [.count])
            #expect(groups.map(\.key) == [[nil], [.array(["p1"])], [.array(["p2"])]], "\(groups.map(\.key))")
            #expect(groups.map { $0[.count] } == [2, 1, 1])
            #expect(try store.verify().isHealthy)
        }
    }

    @Test("a dotted path that meets an array is refused in one line naming the path to write, never answered empty")
    func dottedPathThroughArray() throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        defer { try? store.close() }
        let orders = try store.register(ModelDefinition(name: "Order", syncType: .none))
        _ = try orders.put(["object": "o1", "customer": ["city": "Oslo"], "items": [["product": "p1"]]])
        _ = try orders.put(["object": "o2", "customer": ["city": "Rome"]])
        let conditions: [Condition] = ["items.product" == "p1", !("items.product" == "p1"), Field("items.product").exists()]
        for condition in conditions {
            #expect {
                _ = try orders.findAll(where: condition)
            } throws: { error in
                let error = try #require(error as? SatchelError)
                return error.code == .invalidArgument
                    && error.message.contains("'items.product' meets an array at 'items' (1 object holds an array there)")
                    && error.message.contains("write 'items[].product'")
            }
            #expect(throws: SatchelError.self) { _ = try orders.count(where: condition) }
        }
        // Refused whatever the plan or the limit: with an index on the path, and with a limit met first.
        try orders.createIndex(IndexDefinition("items.product"))
        #expect(throws: SatchelError.self) { _ = try orders.findAll(Query(where: "items.product" == "p1" || Field.id == "o2", limit: 1)) }
        #expect(throws: SatchelError.self) { _ = try orders.search("lamp", where: "items.product" == "p1") }
        // Once no object holds an array there, the path answers again.
        _ = try orders.update("o1", with: ["items": ["product": "p1"]])
        #expect(try orders.findAll(where: "items.product" == "p1").map(\.id) == ["o1"])
        #expect(try orders.findAll(where: "items[].product" == "p1").map(\.id) == ["o1"])
        _ = try orders.update("o1", with: ["items": [["product": "p1"]]])
        // An array deeper down (customer.visits is one) is refused when a query reads its object.
        _ = try orders.put(["object": "o3", "customer": ["visits": [["city": "Oslo"]]]])
        #expect {
            _ = try orders.findAll(where: "customer.visits.city" == "Oslo")
        } throws: { error in
            (error as? SatchelError)?.message.contains(
                "meets an array at 'customer.visits' (1 object holds an array there): write 'customer.visits[].city'") == true
        }
        #expect(try orders.findAll(where: "customer.visits[].city" == "Oslo").map(\.id) == ["o3"])
        // An index holds such a path as missing: a query it answers is refused as well when it
        // reads the object, its count too (found by a black-box probe: o3 was listed).
        try orders.createIndex(IndexDefinition("customer.visits.city"))
        for condition: Condition in [Field("customer.visits.city").exists(false), Field("customer.visits.city") == .null || Field.id == "o3"] {
            #expect(throws: SatchelError.self) { _ = try orders.findAll(where: condition) }
            #expect(throws: SatchelError.self) { _ = try orders.count(where: condition) }
        }
        #expect(try orders.dropIndex(IndexDefinition("customer.visits.city")))
        _ = try orders.delete("o3")
        // Paths through nested objects, and through arrays with [], answer as before.
        #expect(try orders.findAll(where: "customer.city" == "Rome").map(\.id) == ["o2"])
        #expect(try orders.findAll(where: "items[].product" == "p1").map(\.id) == ["o1"])
        #expect(try orders.findAll(where: "customer.city" == "Oslo" || "items[].product" == "p9").map(\.id) == ["o1"])
    }

    @Test(
        "an array deeper down is refused whatever the plan: with an index on the path, a limit met first, or behind [] (found by a black-box probe: the index answered a.b.c = 1)"
    )
    func deepArrayRefusedWhateverThePlan() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("store")
        do {
            let store = try Store(path: path)
            defer { try? store.close() }
            let things = try store.register(ModelDefinition(name: "P", syncType: .none))
            _ = try things.put(["object": "1", "a": ["b": [["c": 1]]], "i": [["b": [["c": 1]]]]])
            _ = try things.put(["object": "2", "a": ["b": ["c": 1]], "i": [["b": ["c": 1]]]])
            try things.createIndex(IndexDefinition("a.b.c"))
            try things.createIndex(.elements(of: "i[].b.c"))
        }
        // Across a reopen: the counts are stored.
        let store = try Store(path: path)
        defer { try? store.close() }
        let things = try store.model("P")
        let refused: [(Query, String)] = [
            (Query(where: "a.b.c" == 1), "write 'a.b[].c'"),
            (Query(where: "a.b.c" == 1, limit: 1), "write 'a.b[].c'"),
            (Query(where: Field.id == "2" && "a.b.c" == 1), "write 'a.b[].c'"),
            (Query(where: "i[].b.c" == 1), "write 'i[].b[].c'"),
            (Query(where: Field("i[].b.c").exists(false)), "write 'i[].b[].c'"),
        ]
        for (query, meant) in refused {
            #expect {
                _ = try things.findAll(query)
            } throws: { error in
                let error = try #require(error as? SatchelError)
                return error.code == .invalidArgument && error.message.contains("1 object holds an array there") && error.message.contains(meant)
            }
            #expect(throws: SatchelError.self) { _ = try things.count(where: query.condition) }
        }
        // The paths written as the error says answer, and the path that ends at the array.
        #expect(try things.findAll(where: "a.b[].c" == 1).map(\.id).sorted() == ["1", "2"], "a value not an array is its own one element")
        #expect(try things.findAll(where: "i[].b[].c" == 1).map(\.id).sorted() == ["1", "2"])
        #expect(try things.findAll(where: Field("a.b").exists()).map(\.id).sorted() == ["1", "2"])
        #expect(try store.verify().isHealthy)
        // `check` compares the counts with the data, and names the places.
        let counted = try store.entry("P").statistics
        store.catalog.withLock { $0.models[NameKey("P")]?.statistics.nestedArrays = [:] }
        let problems = try store.verify().problems
        #expect(problems.contains { $0.contains("differ from the data") && $0.contains("arrays [a.b: 1, i: 2, i[].b: 1])") }, "\(problems)")
        store.catalog.withLock { $0.models[NameKey("P")]?.statistics = counted }
        // Once no object holds an array there, the path answers, from the index as from a scan.
        _ = try things.update("1", with: ["a": ["b": ["c": 1]], "i": .null])
        for query in [Query(where: "a.b.c" == 1), Query(where: "i[].b.c" == 1)] {
            let indexed = try things.findAll(query).map(\.id).sorted()
            let scanned = try things.findAll().filter { query.condition.matches($0) }.map(\.id).sorted()
            #expect(indexed == scanned && !indexed.isEmpty, "\(query.condition): \(indexed) against \(scanned)")
        }
        #expect(try store.verify().isHealthy)
    }

    @Test("statistics an earlier version wrote without their arrays are counted when the store opens")
    func uncountedArrays() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("store")
        do {
            let store = try Store(path: path)
            defer { try? store.close() }
            let orders = try store.register(ModelDefinition(name: "Order", syncType: .none))
            _ = try orders.put(["object": "o1", "items": [["product": "p1"]]])
            _ = try orders.put(["object": "o2", "items": "p2", "customer": ["visits": [["city": "Oslo"]]]])
            // The statistics record as an earlier version wrote it: no "arrays", no "nestedArrays".
            let entry = try store.entry("Order")
            var earlier = try JSONObject(parsing: entry.statistics.encoded)
            #expect(earlier["arrays"] == ["items": 1])
            #expect(earlier["nestedArrays"] == [[["customer", "visits"], 1]])
            earlier["arrays"] = nil
            earlier["nestedArrays"] = nil
            var batch = LevelDBWriteBatch()
            batch.put(Keys.modelStatistics("Order"), earlier.jsonBytes)
            try store.database(entry.definition.partition).write(batch, sync: true)
        }
        let store = try Store(path: path)
        defer { try? store.close() }
        #expect(try store.verify().isHealthy)
        #expect(throws: SatchelError.self) { _ = try store.model("Order").findAll(where: "items.product" == "p1") }
        #expect(try store.entry("Order").statistics.nestedArrays == [[NameKey("customer"), NameKey("visits")]: 1])
        #expect(try store.model("Order").findAll(where: "items[]" == "p2").map(\.id) == ["o2"])
    }
}
