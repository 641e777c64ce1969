import Foundation
import SatchelTestSupport
import Testing

@testable import Satchel

/// A query written for the test: turned into Satchel's `Condition` through the public builders,
/// and evaluated by the naive evaluator below, which implements docs/QUERIES.md on its own.
indirect enum TestCondition: CustomStringConvertible {
    case compare(String, String, JSONValue)  // field path, operator, operand
    case oneOf(String, [JSONValue])
    case beginsWith(String, String)
    case contains(String, JSONValue)
    case exists(String, Bool)
    case and([TestCondition])
    case or([TestCondition])
    case not(TestCondition)

    var condition: Condition {
        switch self {
        case .compare(let f, let op, let v):
            let field = Field(f)
            switch op {
            case "==": return field == v
            case "!=": return field != v
            case "<": return field < v
            case "<=": return field <= v
            case ">": return field > v
            default: return field >= v
            }
        case .oneOf(let f, let values): return Field(f).isIn(values)
        case .beginsWith(let f, let p): return Field(f).beginsWith(p)
        case .contains(let f, let v): return Field(f).contains(v)
        case .exists(let f, let present): return Field(f).exists(present)
        case .and(let parts): return parts.map(\.condition).reduce(Condition.all, &&)
        case .or(let parts): return parts.dropFirst().map(\.condition).reduce(parts[0].condition, ||)
        case .not(let inner): return !inner.condition
        }
    }

    var description: String { condition.description }
}

/// The semantics of docs/QUERIES.md, written plainly over objects.
enum NaiveEvaluator {
    static func value(_ object: Object, _ path: String) -> JSONValue? {
        if path == "object" { return .string(object.id) }
        var current: JSONValue? = .object(object.attributes)
        for name in path.split(separator: ".", omittingEmptySubsequences: false) {
            guard case .object(let object)? = current else { return nil }
            current = object.first { Array($0.key.utf8) == Array(name.utf8) }?.value
        }
        // A null inside a nested object is missing, as a null attribute is never stored.
        if case .null? = current { return nil }
        return current
    }

    static func isNumber(_ v: JSONValue) -> Bool {
        if case .int = v { return true }
        if case .double = v { return true }
        return false
    }

    static func equal(_ a: JSONValue, _ b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case (.bool(let x), .bool(let y)): return x == y
        case (.string(let x), .string(let y)): return Array(x.utf8) == Array(y.utf8)
        case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy { equal($0, $1) }
        case (.object(let x), .object(let y)):
            return x.count == y.count && zip(x, y).allSatisfy { Array($0.key.utf8) == Array($1.key.utf8) && equal($0.value, $1.value) }
        default:
            return isNumber(a) && isNumber(b) && ReferenceOrder.compare(a, b) == 0
        }
    }

    /// Within one type class only (arrays element by element, objects member by member, as the
    /// total order has them).
    static func order(_ a: JSONValue, _ b: JSONValue) -> Int? {
        switch (a, b) {
        case (.string(let x), .string(let y)): return ReferenceOrder.compareBytes(Array(x.utf8), Array(y.utf8))
        case (.bool(let x), .bool(let y)): return x == y ? 0 : (x ? 1 : -1)
        case (.array, .array), (.object, .object): return ReferenceOrder.compare(a, b)
        default: return isNumber(a) && isNumber(b) ? ReferenceOrder.compare(a, b) : nil
        }
    }

    static func matches(_ p: TestCondition, _ d: Object) -> Bool {
        switch p {
        case .compare(let f, let op, let operand):
            guard let v = value(d, f) else { return false }
            switch op {
            case "==": return equal(v, operand)
            case "!=": return !equal(v, operand)
            default:
                guard let c = order(v, operand) else { return false }
                switch op {
                case "<": return c < 0
                case "<=": return c <= 0
                case ">": return c > 0
                default: return c >= 0
                }
            }
        case .oneOf(let f, let values):
            guard let v = value(d, f) else { return false }
            return values.contains { equal(v, $0) }
        case .beginsWith(let f, let prefix):
            guard case .string(let s)? = value(d, f) else { return false }
            return Array(s.utf8).starts(with: Array(prefix.utf8))
        case .contains(let f, let operand):
            switch (value(d, f), operand) {
            case (.string(let s)?, .string(let needle)):
                let h = Array(s.utf8), n = Array(needle.utf8)
                if n.isEmpty { return true }
                return h.count >= n.count && (0...(h.count - n.count)).contains { Array(h[$0..<$0 + n.count]) == n }
            case (.array(let elements)?, _): return elements.contains { equal($0, operand) }
            default: return false
            }
        case .exists(let f, let present): return (value(d, f) != nil) == present
        case .and(let parts): return parts.allSatisfy { matches($0, d) }
        case .or(let parts): return parts.contains { matches($0, d) }
        case .not(let inner): return !matches(inner, d)
        }
    }

    /// The objects in query order: the total order null (and missing) < false < true <
    /// numbers < strings < arrays < objects, ties by id in the last key's direction.
    static func sorted(_ objects: [Object], _ order: [(String, Bool)]) -> [Object] {
        let tieDescending = order.last?.1 ?? false
        return objects.sorted { a, b in
            for (path, descending) in order {
                let c = ReferenceOrder.compare(value(a, path) ?? .null, value(b, path) ?? .null)
                if c != 0 { return descending ? c > 0 : c < 0 }
            }
            let c = ReferenceOrder.compareBytes(Array(a.id.utf8), Array(b.id.utf8))
            return tieDescending ? c > 0 : c < 0
        }
    }
}

/// Random objects and queries over a small vocabulary, so that conditions often match.
struct QueryGenerator {
    var rng: SplitMix64

    static let strings: [String] = ["", "a", "ab", "abc", "b", "ba", "é", "e\u{301}", "caf\u{E9}", "cafe\u{301}", "日本", "a\0", "Z", "😀", "10"]
    static let fields = ["a", "b", "c", "tags", "n.x", "n.y", "m", "object"]

    /// Whether `n` (of the dotted paths `n.x`, `n.y`) may hold an array, which refuses every
    /// question on those paths.
    var arraysOnDottedPaths = true

    mutating func pick<T>(_ values: [T]) -> T { values[Int.random(in: 0..<values.count, using: &rng)] }
    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &rng) < p }

    mutating func scalar() -> JSONValue {
        switch Int.random(in: 0..<10, using: &rng) {
        case 0, 1, 2: return .int(Int64.random(in: -4...4, using: &rng))
        case 3: return .double(Double(Int.random(in: -8...8, using: &rng)) / 2)
        case 4: return pick([.int(9_007_199_254_740_993), .double(9_007_199_254_740_992.0), .int(.max), .int(.min), .double(-0.0)])
        case 5, 6, 7: return .string(pick(Self.strings))
        default: return .bool(chance(0.5))
        }
    }

    mutating func value() -> JSONValue {
        switch Int.random(in: 0..<10, using: &rng) {
        case 0: return .array((0..<Int.random(in: 0...3, using: &rng)).map { _ in scalar() })
        case 1: return .object(["x": scalar()])
        default: return scalar()
        }
    }

    mutating func object(_ i: Int) -> JSONObject {
        var attributes = JSONObject()
        if chance(0.85) { attributes["a"] = chance(0.8) ? .int(Int64.random(in: -4...4, using: &rng)) : value() }
        if chance(0.85) { attributes["b"] = chance(0.8) ? .string(pick(Self.strings)) : value() }
        if chance(0.6) { attributes["c"] = chance(0.8) ? .bool(chance(0.5)) : value() }
        if chance(0.6) {
            attributes["tags"] =
                chance(0.8) ? .array((0..<Int.random(in: 0...4, using: &rng)).map { _ in .string(pick(["x", "y", "z", "xy", "é"])) }) : value()
        }
        if chance(0.6) {
            var n = JSONObject()
            if chance(0.8) { n["x"] = chance(0.1) ? .null : .int(Int64.random(in: 0...5, using: &rng)) }
            if chance(0.6) { n["y"] = chance(0.1) ? .null : .string(pick(Self.strings)) }
            var other = value()
            if case .array = other, !arraysOnDottedPaths { other = scalar() }
            attributes["n"] = chance(0.9) ? .object(n) : other
        }
        if chance(0.5) { attributes["m"] = value() }
        if attributes.isEmpty { attributes["a"] = .int(Int64(i % 5)) }
        attributes["object"] = .string("o\(i)-" + pick(["", "é", "a"]))
        return attributes
    }

    mutating func leaf() -> TestCondition {
        let field = pick(Self.fields)
        switch Int.random(in: 0..<9, using: &rng) {
        case 0, 1, 2: return .compare(field, pick(["==", "==", "!=", "<", "<=", ">", ">="]), chance(0.9) ? scalar() : value())
        case 3: return .compare(field, pick(["<", "<=", ">", ">="]), scalar())
        case 4: return .oneOf(field, (0..<Int.random(in: 0...3, using: &rng)).map { _ in scalar() })
        case 5: return .beginsWith(field, pick(["", "a", "ab", "é", "e", "caf", "a\0", "日"]))
        case 6: return .contains(field, chance(0.5) ? .string(pick(["x", "y", "", "b", "é", "xy"])) : scalar())
        case 7: return .exists(field, chance(0.6))
        default: return .compare(field, "==", scalar())
        }
    }

    mutating func condition(depth: Int = 0) -> TestCondition {
        if depth >= 2 || chance(0.5) { return leaf() }
        switch Int.random(in: 0..<5, using: &rng) {
        case 0, 1, 2: return .and((0..<Int.random(in: 2...3, using: &rng)).map { _ in condition(depth: depth + 1) })
        case 3: return .or((0..<2).map { _ in condition(depth: depth + 1) })
        default: return .not(condition(depth: depth + 1))
        }
    }

    mutating func order() -> [(String, Bool)] {
        if chance(0.5) { return [] }
        return (0..<Int.random(in: 1...2, using: &rng)).map { _ in (pick(Self.fields), chance(0.5)) }
    }
}

@Suite("Queries against a naive evaluator")
struct QueryDifferentialTests {
    /// Covering and keys-only value indexes, composite ones, a dotted path, an element index.
    static let indexes: [IndexDefinition] = [
        IndexDefinition("a"), IndexDefinition(["b"], storesObjects: false), IndexDefinition("b", "a"),
        IndexDefinition(["n.x"], storesObjects: false), IndexDefinition("c", "n.x", "b"), .elements(of: "tags"), IndexDefinition("m"),
    ]

    /// Async, yielding after each round: the test runs for seconds of CPU, and holding one of the
    /// concurrency pool's threads (two, on two cores) that long starves the in-process HTTP
    /// servers of the tests running meanwhile, whose clients then time out.
    @Test("random queries give the naive evaluator's answers, with and without indexes", arguments: [UInt64(1), 2, 3, 4])
    func differential(seed: UInt64) async throws {
        var generator = QueryGenerator(rng: SplitMix64(seed: seed))
        generator.arraysOnDottedPaths = seed % 2 == 1  // the even seeds ask n.x and n.y, the odd ones are refused
        let objects = (0..<400).map { generator.object($0) }
        let plain = TemporaryDirectory(), indexed = TemporaryDirectory()
        let plainStore = try Store(path: plain.child("s")), indexedStore = try Store(path: indexed.child("s"))
        defer {
            try? plainStore.close()
            try? indexedStore.close()
        }
        let plainModel = try plainStore.model("Doc"), indexedModel = try indexedStore.model("Doc")
        // Half the indexes exist before the data (maintained on write), half are built after (backfill).
        for index in Self.indexes.prefix(3) { try indexedModel.createIndex(index) }
        for store in [plainStore, indexedStore] {
            await Task.yield()
            try await store.bulkUpdate { tx in for d in objects { try tx.create(d, in: store === plainStore ? plainModel : indexedModel) } }
        }
        for index in Self.indexes.dropFirst(3) {
            await Task.yield()
            try indexedModel.createIndex(index, batchSize: 64)
        }
        let all = try plainModel.findAll()
        #expect(all.count == objects.count)

        var indexUses = 0
        var refusals = 0
        let refusesDottedPaths = all.contains { if case .array = $0.attributes["n"] { true } else { false } }
        for round in 0..<600 {
            await Task.yield()
            let test = generator.condition()
            let order = generator.order()
            let limit: Int? = generator.chance(0.4) ? Int.random(in: 0...15, using: &generator.rng) : nil
            let offset = generator.chance(0.3) ? Int.random(in: 0...20, using: &generator.rng) : 0
            let query = Query(where: test.condition, order: order.map { SortKey(Field($0.0), descending: $0.1) }, limit: limit, offset: offset)
            let matching = all.filter { NaiveEvaluator.matches(test, $0) }
            let context = "round \(round): \(test) order \(order) limit \(String(describing: limit)) offset \(offset)"
            // A dotted path where an object holds an array: refused, whatever the plan or limit.
            if refusesDottedPaths && !Condition.dottedFields(test.condition.node).isEmpty {
                for model in [plainModel, indexedModel] {
                    #expect(throws: SatchelError.self, "\(context)") { _ = try model.findAll(query) }
                    #expect(throws: SatchelError.self, "\(context)") { _ = try model.count(where: test.condition) }
                }
                refusals += 1
                continue
            }

            for model in [plainModel, indexedModel] {
                let result = try model.findAll(query)
                if !order.isEmpty {
                    var expected = Array(NaiveEvaluator.sorted(matching, order).dropFirst(offset))
                    if let limit { expected = Array(expected.prefix(limit)) }
                    #expect(result.map(\.id) == expected.map(\.id), "\(context)")
                } else {
                    // Unordered: some subset of the matches, of the right size, without duplicates.
                    let expectedCount = min(limit ?? .max, max(0, matching.count - offset))
                    #expect(result.count == expectedCount, "\(context)")
                    #expect(Set(result.map(\.id)).count == result.count, "\(context)")
                    #expect(Set(result).isSubset(of: Set(matching)), "\(context)")
                }
                #expect(try model.count(where: test.condition) == matching.count, "\(context)")
            }
            if case .index = try indexedModel.explain(query).access { indexUses += 1 }
        }
        #expect(indexUses > 100, "the indexed store should answer many of the random queries from an index")
        #expect(
            refusesDottedPaths == generator.arraysOnDottedPaths && refusesDottedPaths == (refusals > 0),
            "questions on n.x and n.y are refused exactly when an object holds an array at n")
        #expect(try indexedStore.verify().isHealthy)
    }

    @Test("a random mix of writes, bulk updates, rollbacks and index changes leaves check clean")
    func randomWrites() throws {
        var generator = QueryGenerator(rng: SplitMix64(seed: 99))
        try withTemporaryStore { store in
            let model = try store.model("Doc")
            try model.createIndex(IndexDefinition("a"))
            try model.createIndex(.elements(of: "tags"))
            var known: [String] = []
            struct Rollback: Error {}
            for step in 0..<400 {
                switch Int.random(in: 0..<10, using: &generator.rng) {
                case 0, 1:
                    let d = generator.object(step)
                    if try model.find(d["object"]!.stringValue!) == nil {
                        known.append(try model.create(d).id)
                    }
                case 2, 3:
                    if let id = known.randomElement(using: &generator.rng), try model.find(id) != nil {
                        var changes = JSONObject()
                        changes[generator.pick(["a", "b", "tags", "n", "m"])] = generator.chance(0.3) ? .null : generator.value()
                        try model.update(id, with: changes)
                    }
                case 4:
                    if let id = known.randomElement(using: &generator.rng) { try model.delete(id) }
                case 5, 6:
                    try store.bulkUpdate { tx in
                        for i in 0..<5 {
                            let d = generator.object(step * 10 + i)
                            if try tx.find(d["object"]!.stringValue!, in: model) == nil { known.append(try tx.create(d, in: model).id) }
                        }
                        if let id = known.randomElement(using: &generator.rng) { try tx.delete(id, in: model) }
                    }
                case 7:
                    // A rolled-back bulk update: none of it may show, in data or indexes.
                    try? store.bulkUpdate { tx in
                        for i in 0..<5 { try tx.create(generator.object(100_000 + step * 10 + i), in: model) }
                        if let id = known.randomElement(using: &generator.rng) { try tx.update(id, with: ["a": 99], in: model) }
                        throw Rollback()
                    }
                case 8:
                    try model.delete(where: "a" == .int(Int64.random(in: -4...4, using: &generator.rng)))
                default:
                    let index = generator.pick([IndexDefinition("b"), IndexDefinition(["n.x", "a"], storesObjects: false), IndexDefinition("m")])
                    if try model.indexes.contains(where: { $0.definition == index }) {
                        try model.dropIndex(index)
                    } else {
                        try model.createIndex(index, batchSize: 7)
                    }
                }
            }
            let report = try store.verify()
            #expect(report.isHealthy, "\(report.problems)")
            #expect(try model.findAll(where: "a" == 99).isEmpty)
            // Index answers equal scan answers after all that.
            for value in -4...4 {
                let viaIndex = try model.findAll(where: "a" == .int(Int64(value)))
                let viaScan = try model.findAll().filter { $0["a"] == .int(Int64(value)) }
                #expect(Set(viaIndex) == Set(viaScan))
            }
        }
    }

    @Test(
        "a null inside a nested object, or reached through an array, is missing: the same answers, counts and groups with and without an index (found by a black-box probe)"
    )
    func nestedNulls() throws {
        let objects: [JSONObject] = [
            ["object": "x", "a": ["b": .null], "items": [["product": .null], ["product": "p1"]]],
            ["object": "y", "a": ["b": 1], "items": [["product": "p2"]]],
            ["object": "z", "a": [:], "items": [["product": .null]]],
        ]
        let plain = TemporaryDirectory(), indexed = TemporaryDirectory()
        let plainStore = try Store(path: plain.child("s")), indexedStore = try Store(path: indexed.child("s"))
        defer {
            try? plainStore.close()
            try? indexedStore.close()
        }
        for store in [plainStore, indexedStore] { for object in objects { try store.model("N").create(object) } }
        try indexedStore.model("N").createIndex(IndexDefinition("a.b"))
        try indexedStore.model("N").createIndex(.elements(of: "items[].product"))
        let questions: [(Condition, [String])] = [
            (Field("a.b") == .null, []), (Field("a.b").exists(), ["y"]), (Field("a.b").exists(false), ["x", "z"]),
            (Field("a.b").isIn([.null, 1]), ["y"]), (Field("items[].product") == .null, []),
            (Field("items[].product").exists(false), ["z"]), (Field("items[].product").isIn([.null, "p1"]), ["x"]),
        ]
        for (condition, expected) in questions {
            for store in [plainStore, indexedStore] {
                let model = try store.model("N")
                #expect(try model.findAll(where: condition).map(\.id).sorted() == expected, "\(condition)")
                #expect(try model.count(where: condition) == expected.count, "\(condition)")
            }
        }
        for store in [plainStore, indexedStore] {
            let model = try store.model("N")
            let groups = try model.aggregate(groupBy: [Field("a.b")], [.count])
            #expect(groups.map(\.key) == [[nil], [.int(1)]], "the null and the missing value are one group")
            #expect(groups.first?.count == 2)
            #expect(try model.aggregate([.min(Field("a.b")), .max(Field("items[].product"))]).first?.values == [.int(1), .string("p2")])
        }
    }
}
