import Foundation
import SatchelTestSupport
import Testing

@testable import Satchel

/// `model.aggregate`: random objects, conditions, groupings and functions, against a naive
/// evaluator (NaiveEvaluator's matching and ReferenceOrder's order, both written apart from
/// the store), without indexes and with them (so that the statistics, an index's ends and an
/// index walk answer too).
@Suite("Aggregates")
struct AggregateTests {
    static let fields = ["a", "b", "c", "n.x", "m"]

    /// The naive answer: groups as lists of objects, in ReferenceOrder of their values.
    static func naive(_ objects: [Object], _ condition: TestCondition, groupBy: [String], _ functions: [AggregateFunction]) -> [[JSONValue?]:
        [JSONValue]]
    {
        let matching = objects.filter { NaiveEvaluator.matches(condition, $0) }
        var groups: [(key: [JSONValue?], members: [Object])] = []
        for object in matching {
            let key = groupBy.map { NaiveEvaluator.value(object, $0) }
            if let i = groups.firstIndex(where: { same($0.key, key) }) {
                groups[i].members.append(object)
            } else {
                groups.append((key, [object]))
            }
        }
        if groupBy.isEmpty && groups.isEmpty { groups = [([], [])] }
        var answer: [[JSONValue?]: [JSONValue]] = [:]
        for (key, members) in groups {
            answer[key] = functions.map { function in
                switch function {
                case .count: return .int(Int64(members.count))
                case .sum(let field), .avg(let field):
                    let numbers = members.compactMap { NaiveEvaluator.value($0, field.description) }.filter(NaiveEvaluator.isNumber)
                    guard !numbers.isEmpty else { return .null }
                    // Exactly, in rationals of 128-bit integers and doubles summed pairwise
                    // largest-magnitude last: what a compensated sum gets within rounding.
                    let integers = numbers.compactMap { n -> Int128? in if case .int(let i) = n { Int128(i) } else { nil } }.reduce(0, +)
                    let doubles = numbers.compactMap { n -> Double? in if case .double(let d) = n { d } else { nil } }
                        .sorted { abs($0) < abs($1) }.reduce(0.0, +)
                    let total = doubles + Double(integers)
                    if case .avg = function { return .double(total / Double(numbers.count)) }
                    let allIntegers = numbers.allSatisfy { if case .int = $0 { true } else { false } }
                    if allIntegers, let exact = Int64(exactly: integers) { return .int(exact) }
                    return .double(total)
                case .min(let field), .max(let field):
                    let values = members.compactMap { NaiveEvaluator.value($0, field.description) }
                    guard var best = values.first else { return .null }
                    for v in values.dropFirst() {
                        let c = ReferenceOrder.compare(v, best)
                        if case .min = function, c < 0 { best = v }
                        if case .max = function, c > 0 { best = v }
                    }
                    return best
                }
            }
        }
        return answer
    }

    static func same(_ a: [JSONValue?], _ b: [JSONValue?]) -> Bool {
        a.count == b.count
            && zip(a, b).allSatisfy { x, y in
                switch (x, y) {
                case (nil, nil): true
                case (let x?, let y?): NaiveEvaluator.equal(x, y)
                default: false
                }
            }
    }

    /// Sums and means as the store computes them (integer or double, doubles within rounding of
    /// another summation order); other values equal under the query semantics.
    static func close(_ function: AggregateFunction, _ a: JSONValue, _ b: JSONValue) -> Bool {
        switch (function, a, b) {
        case (_, .null, .null): return true
        case (_, .double(let x), .double(let y)): return x == y || abs(x - y) <= 1e-6 * Swift.max(abs(x), abs(y), 1)
        case (.sum, .double, .int), (.sum, .int, .double), (.avg, _, _): return false
        default: return NaiveEvaluator.equal(a, b)
        }
    }

    @Test("random groupings and functions: the store's groups, in order, hold the naive evaluator's results", arguments: [UInt64(7), 2029])
    func differential(seed: UInt64) throws {
        var generator = QueryGenerator(rng: SplitMix64(seed: seed))
        generator.arraysOnDottedPaths = false  // conditions on n.x answer (QueryDifferentialTests covers the refusal)
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        defer { try? store.close() }
        let model = try store.register(ModelDefinition(name: "Thing", syncType: .none))
        var objects: [Object] = []
        for i in 0..<300 {
            if let object = try model.put(generator.object(i)) { objects.append(object) }
        }
        var served: Set<String> = []
        for round in 0..<2 {
            if round == 1 {
                try model.createIndex(IndexDefinition("a"))
                try model.createIndex(IndexDefinition("b", "c"))
            }
            for _ in 0..<150 {
                let condition: TestCondition = generator.chance(0.3) ? .and([]) : generator.condition()
                let groupBy = (0..<Int.random(in: 0...2, using: &generator.rng)).map { _ in generator.pick(Self.fields) }
                var functions: [AggregateFunction] = generator.chance(0.6) ? [.count] : []
                for _ in 0..<Int.random(in: (functions.isEmpty ? 1 : 0)...3, using: &generator.rng) {
                    let field = Field(generator.pick(Self.fields))
                    functions.append(generator.pick([.sum(field), .min(field), .max(field), .avg(field), .count]))
                }
                if round == 1 && generator.chance(0.3) {
                    // The shapes the indexes serve.
                    functions = generator.chance(0.5) ? [.count] : [.min("a"), .max("a"), .count]
                }
                let groups = try model.aggregate(where: condition.condition, groupBy: groupBy.map { Field($0) }, functions)
                served.insert(
                    String(try model.explainAggregate(where: condition.condition, groupBy: groupBy.map { Field($0) }, functions).prefix(12)))
                let expected = Self.naive(objects, condition, groupBy: groupBy, functions)
                let what = "\(condition) group by \(groupBy) \(functions)"
                #expect(groups.count == expected.count, "\(what): \(groups.count) groups, expected \(expected.count)")
                for group in groups {
                    guard let want = expected.first(where: { Self.same($0.key, group.key) })?.value else {
                        Issue.record("\(what): a group \(group.key) the naive evaluator does not have")
                        continue
                    }
                    for (i, (function, value)) in group.results.enumerated() {
                        #expect(Self.close(function, value, want[i]), "\(what): \(function) of \(group.key) is \(value), expected \(want[i])")
                    }
                }
                // Ascending order of the group values.
                for (x, y) in zip(groups, groups.dropFirst()) {
                    let order = zip(x.key, y.key).lazy.map { ReferenceOrder.compare($0 ?? .null, $1 ?? .null) }.first { $0 != 0 } ?? 0
                    #expect(order < 0, "\(what): \(x.key) before \(y.key)")
                }
            }
        }
        #expect(served.count >= 4, "statistics, index ends, index walk and queries all answered: \(served.sorted())")
    }

    @Test("no function is an error; explain names what serves the aggregate")
    func explain() throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        defer { try? store.close() }
        let model = try store.register(ModelDefinition(name: "Thing", syncType: .none))
        _ = try model.put(["object": "t1", "brand": "Acme", "price": 3])
        #expect(throws: SatchelError.self) { _ = try model.aggregate([]) }
        #expect(try model.explainAggregate([.count]).hasPrefix("count from the model's statistics"))
        #expect(try model.explainAggregate(groupBy: ["brand"], [.count]).hasPrefix("scan"))
        try model.createIndex(IndexDefinition("brand"))
        #expect(try model.explainAggregate(groupBy: ["brand"], [.count]).hasPrefix("group by brand: one walk of index brand"))
        #expect(try model.explainAggregate([.min("brand"), .max("brand")]).hasPrefix("min and max of brand from the ends of index brand"))
        #expect(try model.explainAggregate(where: "brand" == "Acme", [.sum("price")]).hasPrefix("index brand"))
    }

    @Test("sums of doubles near the top of their range: exact where the result is within it, refused beyond (found by a black-box probe: nan)")
    func largeDoubles() throws {
        try withTemporaryStore { store in
            let max = Double.greatestFiniteMagnitude
            let cases: [(values: [Double], sum: Double?, mean: Double)] = [
                ([1e308, 1e308, -1e308], 1e308, 1e308 / 3), ([max, max, -max, -max], 0, 0), ([max, max, -max, -max, 1.5], 1.5, 0.3),
                ([1e308, 1e308], nil, 1e308), ([max, max], nil, max),
            ]
            for (n, item) in cases.enumerated() {
                let model = try store.model("M\(n)")
                for (i, value) in item.values.enumerated() { _ = try model.put(["object": .string("o\(i)"), "x": .double(value)]) }
                #expect(try model.aggregate([.avg("x")]).first?[.avg("x")] == .double(item.mean), "\(item.values)")
                if let sum = item.sum {
                    #expect(try model.aggregate([.sum("x")]).first?[.sum("x")] == .double(sum), "\(item.values)")
                } else {
                    #expect {
                        _ = try model.aggregate([.sum("x")])
                    } throws: { error in
                        (error as? SatchelError)?.code == .invalidArgument && "\(error)".contains("beyond the range of a double")
                    }
                }
            }
        }
    }

    @Test("large integers beside doubles keep their low digits in a sum (a black-box probe: 2^63 - 1 twice, -2^64 and 1 summed to 0)")
    func largeIntegersBesideDoubles() throws {
        try withTemporaryStore { store in
            let model = try store.model("M")
            let values: [JSONValue] = [.int(.max), .int(.max), .double(-0x1p64), .int(1)]
            for (i, value) in values.enumerated() { _ = try model.put(["object": .string("o\(i)"), "v": value]) }
            let result = try #require(try model.aggregate([.sum("v"), .avg("v")]).first)
            #expect(result[.sum("v")] == .double(-1) && result[.avg("v")] == .double(-0.25))
        }
    }

    @Test(
        "min, max and group values served by an index are the objects' own, as a scan gives them: 2.0 stays 2.0, -0.0 keeps its sign (a black-box probe: 2, 5 and 0)"
    )
    func indexServedValuesKeepTheirForm() throws {
        try withTemporaryStore { store in
            let values: [(String, JSONValue, JSONValue)] = [("a", .double(5), .double(-0.0)), ("b", .double(2), .int(0)), ("c", .int(2), .int(7))]
            // Compared as printed: JSONValue's == holds 2 and 2.0 equal.
            var answers: [[[String?]]] = []
            for indexed in [false, true] {
                let model = try store.model(indexed ? "Indexed" : "Scanned")
                for (id, v, w) in values { _ = try model.put(["object": .string(id), "v": v, "w": w]) }
                if indexed {
                    try model.createIndex(IndexDefinition("v"))
                    try model.createIndex(IndexDefinition("w"))
                    #expect(try model.explainAggregate([.min("v"), .max("v")]).contains("from the ends of index"))
                    #expect(try model.explainAggregate(groupBy: ["v"], [.count]).contains("one walk of index"))
                }
                let ends = try #require(try model.aggregate([.min("v"), .max("v")]).first)
                let w = try #require(try model.aggregate([.min("w"), .max("w")]).first)
                let groups = try model.aggregate(groupBy: ["v"], [.count]).map { $0.key }
                let printed = [[ends[.min("v")], ends[.max("v")], w[.min("w")], w[.max("w")]]] + groups
                answers.append(printed.map { $0.map { $0?.description } })
            }
            #expect(answers[0] == answers[1])
            let first = try #require(answers.first?.first)
            #expect(first == ["2.0", "5.0", "-0.0", "7"], "the scan's own answer")
            #expect(Array(answers[1].dropFirst()) == [["2.0"], ["5.0"]])
        }
    }

    @Test(
        "equal numbers of different forms print as the object of least id holds them, whatever order an index of several fields reads them in (found by a black-box probe: -0.0 and 1.0 after index v,g)"
    )
    func equalNumbersTakeTheLeastIDsForm() throws {
        try withTemporaryStore { store in
            let objects: [(String, JSONValue, String)] = [
                ("a", .int(0), "y"), ("b", .double(-0.0), "x"), ("c", .int(1), "y"), ("d", .double(1), "x"),
            ]
            var answers: [[String]] = []
            for indexed in [false, true] {
                let model = try store.model(indexed ? "Indexed" : "Scanned")
                for (id, v, g) in objects { _ = try model.put(["object": .string(id), "v": v, "g": .string(g)]) }
                if indexed { try model.createIndex(IndexDefinition(["v", "g"])) }
                var printed: [String] = []
                for condition: Condition in [.all, "v" >= 0] {
                    let ends = try #require(try model.aggregate(where: condition, [.min("v"), .max("v")]).first)
                    printed += [ends[.min("v")], ends[.max("v")]].map { $0?.description ?? "nil" }
                    printed += try model.aggregate(where: condition, groupBy: ["v"], [.count]).map { "\($0.key) \($0[.count] ?? .null)" }
                }
                answers.append(printed)
            }
            #expect(answers[0] == answers[1], "\(answers)")
            #expect(answers[0].prefix(4) == ["0", "1", "[Optional(0)] 2", "[Optional(1)] 2"], "\(answers[0])")
        }
    }

    @Test(
        "numbers inside an array or an object print as the object holds them whether an index answers or a scan (found by a black-box probe: [1.0,{\"x\":2.0}] read back as [1,{\"x\":2}] from the index)"
    )
    func numbersInsideValuesKeepTheirForm() throws {
        try withTemporaryStore { store in
            let values: [(String, JSONValue)] = [
                ("a", [.double(1), ["x": .double(2)]]), ("b", [.double(.leastNonzeroMagnitude), .double(-0.0)]), ("c", .double(-0.5)),
            ]
            var answers: [[String]] = []
            for indexed in [false, true] {
                let model = try store.model(indexed ? "Indexed" : "Scanned")
                for (id, v) in values { _ = try model.put(["object": .string(id), "v": v]) }
                if indexed { try model.createIndex(IndexDefinition(["v"])) }
                let ends = try #require(try model.aggregate(where: .all, [.min("v"), .max("v")]).first)
                var printed = [ends[.min("v")], ends[.max("v")]].map { $0.map { String(decoding: $0.jsonBytes, as: UTF8.self) } ?? "nil" }
                printed += try model.aggregate(where: .all, groupBy: ["v"], [.count]).map { group in
                    group.key.map { $0.map { String(decoding: $0.jsonBytes, as: UTF8.self) } ?? "nil" }.joined() + " \(group[.count] ?? .null)"
                }
                answers.append(printed)
            }
            #expect(answers[0] == answers[1], "\(answers)")
            #expect(answers[1].contains { $0.hasPrefix(#"[1.0,{"x":2.0}]"#) }, "\(answers[1])")
        }
    }

    @Test("a function over a path into arrays takes every value the path reaches; a group-by keeps the array whole")
    func pathsIntoArrays() throws {
        try withTemporaryStore { store in
            let model = try store.register(ModelDefinition(name: "Order", syncType: .none))
            // Lines of random quantities (some doubles, some not numbers), products and shops.
            var generator = SplitMix64(seed: 5)
            var orders: [JSONObject] = []
            for n in 0..<40 {
                var lines: [JSONValue] = []
                for _ in 0..<Int.random(in: 0...3, using: &generator) {
                    let qty: JSONValue =
                        switch Int.random(in: 0..<5, using: &generator) {
                        case 0: .double(Double(Int.random(in: 1...9, using: &generator)) + 0.5)
                        case 1: .string("many")
                        default: .int(Int64.random(in: 1...9, using: &generator))
                        }
                    lines.append(.object(["qty": qty, "product": .string("p\(Int.random(in: 1...6, using: &generator))")]))
                }
                let order: JSONObject = ["object": .string("o\(n)"), "shop": .string(n % 3 == 0 ? "north" : "south"), "items": .array(lines)]
                orders.append(order)
                _ = try model.put(order)
            }
            let groups = try model.aggregate(
                groupBy: ["shop"], [.count, .sum("items[].qty"), .avg("items[].qty"), .min("items[].product"), .max("items[].product")])
            #expect(groups.map { $0.key[0]?.stringValue } == ["north", "south"])
            for group in groups {
                let members = orders.filter { $0["shop"] == group.key[0] }
                let lines = members.flatMap { $0["items"]?.arrayValue ?? [] }.compactMap(\.objectValue)
                let numbers = lines.compactMap { $0["qty"]?.doubleValue }
                let products = lines.compactMap { $0["product"]?.stringValue }.sorted()
                #expect(group.count == members.count)
                #expect(group[.sum("items[].qty")]?.doubleValue == numbers.reduce(0, +))
                #expect(group[.avg("items[].qty")]?.doubleValue == numbers.reduce(0, +) / Double(numbers.count))
                #expect(group[.min("items[].product")]?.stringValue == products.first)
                #expect(group[.max("items[].product")]?.stringValue == products.last)
            }
            // Grouped by the path itself: one group per whole array of products reached.
            let byProducts = try model.aggregate(groupBy: ["items[].product"], [.count])
            let distinct = Set(orders.map { Field("items[].product").value(in: $0) })
            #expect(byProducts.count == distinct.count)
            #expect(byProducts.map(\.count).reduce(0, +) == orders.count)
        }
    }
}
