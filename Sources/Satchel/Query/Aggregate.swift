/// A function ``Model/aggregate(where:groupBy:_:)`` computes over each group of objects.
public enum AggregateFunction: Sendable, Hashable, CustomStringConvertible {
    /// The objects in the group.
    case count
    /// The sum of the field's numbers: an integer while every number summed is one and the sum
    /// fits in 64 bits, else a double. Objects lacking the field, or holding something other
    /// than a number there, are left out; null when none is left. A path that reaches into
    /// arrays (`items[].qty`) sums every number it reaches.
    case sum(Field)
    /// The smallest and largest of the field's values, in the order queries sort by (null,
    /// booleans, numbers, strings, arrays, objects); null when no object has the field. A path
    /// that reaches into arrays takes each value it reaches on its own.
    case min(Field)
    case max(Field)
    /// The mean of the field's numbers (a double), leaving out what ``sum(_:)`` leaves out; over
    /// every number reached, for a path that reaches into arrays.
    case avg(Field)

    /// `count`, `sum(price)`, `min(price)`, …: the result's name in the CLI's lines.
    public var description: String {
        switch self {
        case .count: "count"
        case .sum(let field): "sum(\(field))"
        case .min(let field): "min(\(field))"
        case .max(let field): "max(\(field))"
        case .avg(let field): "avg(\(field))"
        }
    }

    var field: Field? {
        switch self {
        case .count: nil
        case .sum(let field), .min(let field), .max(let field), .avg(let field): field
        }
    }
}

/// One group of ``Model/aggregate(where:groupBy:_:)``: its values of the group-by fields and the
/// functions' results.
public struct AggregateGroup: Sendable, Hashable {
    /// The group's value of each group-by field, in order; nil for the objects lacking it (they
    /// form a group of their own).
    public var key: [JSONValue?]
    /// The functions asked, in order, and their results.
    public var results: [(function: AggregateFunction, value: JSONValue)] {
        zip(functions, values).map { ($0, $1) }
    }

    let functions: [AggregateFunction]
    let values: [JSONValue]

    /// The result of `function` (nil when it was not asked).
    public subscript(_ function: AggregateFunction) -> JSONValue? {
        functions.firstIndex(of: function).map { values[$0] }
    }

    /// `count` as an integer (0 when it was not asked).
    public var count: Int { Int(self[.count]?.intValue ?? 0) }

    public static func == (a: AggregateGroup, b: AggregateGroup) -> Bool {
        a.key == b.key && a.functions == b.functions && a.values == b.values
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(key)
        hasher.combine(functions)
        hasher.combine(values)
    }
}

extension Model {
    /// Groups the objects matching `condition` by their values of `groupBy` (one group per
    /// distinct combination, objects lacking a field in the null group, an array one whole
    /// value) and computes `functions` over each group. Groups come in ascending order of their
    /// values, in the order queries sort by; with no `groupBy`, there is one group (with a
    /// count of 0 when nothing matches).
    ///
    /// ```swift
    /// let byBrand = try products.aggregate(where: "price" < 100, groupBy: ["brand"], [.count, .avg("price")])
    /// for group in byBrand { print(group.key[0] ?? .null, group.count, group[.avg("price")] ?? .null) }
    /// ```
    ///
    /// Served by the model's statistics for a count of everything, by the ends of an index for
    /// `min` and `max` of its first field, by one walk of an index's keys for counts grouped by
    /// its first field; otherwise by the query's own plan, the objects aggregated as they are
    /// read. ``explainAggregate(where:groupBy:_:)`` says which.
    ///
    /// - Throws: ``SatchelError`` `.invalidArgument` when `functions` is empty.
    public func aggregate(where condition: Condition = .all, groupBy: [Field] = [], _ functions: [AggregateFunction]) throws -> [AggregateGroup] {
        guard !functions.isEmpty else { throw SatchelError(.invalidArgument, "an aggregate needs at least one function", model: name) }
        // A function's path that meets an array is refused as a condition's is, whatever the
        // plan (a black-box probe: sum(items.qty) answered null); one deeper than the model's
        // statistics count is checked on each object read.
        let measured = functions.compactMap(\.field)
        try Condition.refuseArrayCrossings(of: measured, try store.entry(name).statistics, model: name)
        let deepMeasured = measured.filter { $0.components.count > 2 }
        switch try aggregatePlan(condition, groupBy, functions) {
        case .statistics:
            let count = JSONValue.int(Int64(try self.count()))
            return [AggregateGroup(key: [], functions: functions, values: functions.map { _ in count })]
        case .indexEnds(let index, let field):
            let (least, greatest) = try indexEnds(index, field)
            let count = JSONValue.int(Int64(try self.count()))
            let values: [JSONValue] = functions.map { function in
                switch function {
                case .min(let f) where f == field: least ?? .null
                case .max(let f) where f == field: greatest ?? .null
                default: count
                }
            }
            return [AggregateGroup(key: [], functions: functions, values: values)]
        case .indexWalk(let index):
            return try indexGroups(index, groupBy[0]).map { key, count in
                AggregateGroup(key: [key], functions: functions, values: functions.map { _ in .int(Int64(count)) })
            }
        case .query:
            var groups: [[JSONValue?]: Accumulator] = [:]
            let cursor = try self.cursor(Query(where: condition))
            while let object = try cursor.next() {
                if !deepMeasured.isEmpty { try Condition.refuseArrays(on: deepMeasured, in: object, model: name) }
                let key = groupBy.map { $0.value(in: object) }
                groups[key, default: Accumulator(functions)].add(object, key: key)
            }
            if groupBy.isEmpty && groups.isEmpty { groups[[]] = Accumulator(functions) }
            return try groups.map { key, accumulator in
                AggregateGroup(key: accumulator.key ?? key, functions: functions, values: try accumulator.results())
            }
            .sorted { a, b in
                for (x, y) in zip(a.key, b.key) {
                    let (kx, ky) = (ValueOrder.sortKey(x), ValueOrder.sortKey(y))
                    if kx != ky { return kx.lexicographicallyPrecedes(ky) }
                }
                return false
            }
        }
    }

    /// How ``aggregate(where:groupBy:_:)`` would run, in words.
    public func explainAggregate(where condition: Condition = .all, groupBy: [Field] = [], _ functions: [AggregateFunction]) throws -> String {
        switch try aggregatePlan(condition, groupBy, functions) {
        case .statistics: return "count from the model's statistics (nothing read)"
        case .indexEnds(let index, let field):
            return "min and max of \(field) from the ends of index \(index.definition) (a seek to each end)"
        case .indexWalk(let index):
            return "group by \(index.definition.fields[0]): one walk of index \(index.definition)'s keys, counting"
        case .query(let plan): return "\(plan.description); aggregated as read"
        }
    }

    enum AggregatePlan {
        case statistics
        case indexEnds(StoredIndex, Field)
        case indexWalk(StoredIndex)
        case query(QueryPlan)
    }

    func aggregatePlan(_ condition: Condition, _ groupBy: [Field], _ functions: [AggregateFunction]) throws -> AggregatePlan {
        let everything: Bool = if case .always = condition.node { true } else { false }
        if everything {
            let entry = try store.entry(name)
            /// A ready value index whose first field is `field`.
            func index(on field: Field) -> StoredIndex? {
                guard !field.reachesIntoArrays, !field.isID else { return nil }
                return entry.indexes.first { $0.state == .ready && $0.definition.kind == .value && $0.definition.fields[0] == field }
            }
            if groupBy.isEmpty {
                if functions.allSatisfy({ $0 == .count }) { return .statistics }
                let fields = Set(functions.compactMap(\.field))
                let extremes = functions.allSatisfy { if case .sum = $0 { false } else if case .avg = $0 { false } else { true } }
                if extremes, fields.count == 1, let field = fields.first, let index = index(on: field) { return .indexEnds(index, field) }
            } else if groupBy.count == 1, functions.allSatisfy({ $0 == .count }), let index = index(on: groupBy[0]) {
                return .indexWalk(index)
            }
        }
        return .query(try explain(Query(where: condition)))
    }

    /// The least and greatest values of an index's first field, nulls (missing) aside, as the
    /// objects hold them: an index key keeps a number's value, not its form (`2.0` reads back as
    /// `2`, `-0.0` as `0`), so a number is read from the object a scan would have taken, the
    /// first in id order among equal values.
    private func indexEnds(_ index: StoredIndex, _ field: Field) throws -> (JSONValue?, JSONValue?) {
        let iterator = try store.database(try definition.partition).makeIterator(fillCache: false)
        func entry() throws -> IndexEntry? { try iterator.withKey { try IndexEntry(key: $0) } }
        // Among entries of equal value, the least id: in an index of several fields (`v, g`)
        // they are in the order of the next field, not of their ids (a black-box probe).
        func earlier(_ a: IndexEntry, _ b: IndexEntry?) -> Bool { b.map { UTF8Order.less(a.id, $0.id) } ?? true }
        // The end's first value (nulls, missing, aside), walked through while equal when it is a
        // number (only numbers have forms a key does not keep).
        func end(forward: Bool) throws -> IndexEntry? {
            if forward {
                iterator.seek(index.prefix)
            } else {
                iterator.seek(Keys.prefixEnd(index.prefix))
                if iterator.isValid { iterator.previous() } else { iterator.seekToLast() }
            }
            var found: IndexEntry?
            while iterator.isValid && iterator.keyHasPrefix(index.prefix) {
                defer { if forward { iterator.next() } else { iterator.previous() } }
                guard let next = try entry() else {
                    if found != nil { break }
                    continue
                }
                if let found, !found.isNumber || found.value != next.value { break }
                if earlier(next, found) { found = next }
            }
            return found
        }
        let least = try end(forward: true)
        let greatest = try end(forward: false)
        try iterator.checkError()
        func stored(_ entry: IndexEntry?) throws -> JSONValue? {
            guard let entry else { return nil }
            return entry.isNumber ? try storedValue(entry, field) : entry.value
        }
        return (try stored(least), try stored(greatest))
    }

    /// The distinct values of an index's first field with how many objects hold each, in index
    /// order; missing values (null in the index) as nil. A group of a number takes its first
    /// object's (in id order) form of it, as a scan does.
    private func indexGroups(_ index: StoredIndex, _ field: Field) throws -> [(JSONValue?, Int)] {
        let iterator = try store.database(try definition.partition).makeIterator(fillCache: false)
        var groups: [(JSONValue?, Int)] = []
        var firsts: [IndexEntry?] = []
        iterator.seek(index.prefix)
        while iterator.isValid && iterator.keyHasPrefix(index.prefix) {
            let entry = try iterator.withKey { try IndexEntry(key: $0) }
            if let last = groups.last, last.0 == entry?.value {
                groups[groups.count - 1].1 += 1
                // The least id's form: an index of several fields orders equal values by the next.
                if let entry, let first = firsts[firsts.count - 1], UTF8Order.less(entry.id, first.id) { firsts[firsts.count - 1] = entry }
            } else {
                groups.append((entry?.value, 1))
                firsts.append(entry)
            }
            iterator.next()
        }
        try iterator.checkError()
        for (i, first) in firsts.enumerated() {
            if let first, first.isNumber { groups[i].0 = try storedValue(first, field) }
        }
        return groups
    }

    /// An index entry's first value (nil when null: missing) and object id.
    private struct IndexEntry {
        var value: JSONValue
        var id: String

        /// Whether the value is or holds a number, whose form (`2` or `2.0`, `0` or `-0.0`)
        /// only the object holds: in an array or an object too (a black-box probe: `[1.0]`
        /// read back as `[1]`).
        var isNumber: Bool { Self.holdsNumber(value) }

        private static func holdsNumber(_ value: JSONValue) -> Bool {
            switch value {
            case .int, .double: true
            case .array(let elements): elements.contains(where: holdsNumber)
            case .object(let object): object.contains { holdsNumber($0.value) }
            default: false
            }
        }

        init?(key: UnsafeRawBufferPointer) throws {
            let (_, elements) = try Keys.decode(Array(key))
            guard elements.count > 3, elements[2] != .null, let id = elements.last?.stringValue else { return nil }
            (value, self.id) = (elements[2], id)
        }
    }

    /// The value of `field` that the object of an index entry holds (the entry's own when the
    /// object cannot be read, which `check` reports).
    private func storedValue(_ entry: IndexEntry, _ field: Field) throws -> JSONValue {
        try find(entry.id).flatMap { field.value(in: $0) } ?? entry.value
    }
}

/// The running results of one group.
private struct Accumulator {
    let functions: [AggregateFunction]
    var count = 0
    /// Per function: the integers' sum (exact: 128 bits), the doubles' sum (compensated, so
    /// that the order objects come in barely matters), whether a double was seen, how many numbers.
    var integerSums: [Int128]
    var doubleSums: [CompensatedSum]
    var sawDouble: [Bool]
    var numbers: [Int]
    /// Per function: the least or greatest value so far, its sort key, and the id of the object
    /// holding it.
    var extremes: [(JSONValue, [UInt8], String)?]
    /// The group's values as its object of least id holds them, and that id: values equal as
    /// `==` says (`1` and `1.0`, `0` and `-0.0`) are one group, printed as a scan in id order
    /// finds them first, whatever order the objects come in (an index's: a black-box probe).
    var key: [JSONValue?]?
    var keyID: String?

    init(_ functions: [AggregateFunction]) {
        self.functions = functions
        integerSums = functions.map { _ in 0 }
        doubleSums = functions.map { _ in CompensatedSum() }
        sawDouble = functions.map { _ in false }
        numbers = functions.map { _ in 0 }
        extremes = functions.map { _ in nil }
    }

    mutating func add(_ object: Object, key: [JSONValue?]) {
        count += 1
        if keyID.map({ UTF8Order.less(object.id, $0) }) ?? true { (self.key, keyID) = (key, object.id) }
        for (i, function) in functions.enumerated() {
            switch function {
            case .count: break
            case .sum(let field), .avg(let field):
                Self.forEachOperand(field, of: object) { value in
                    switch value {
                    case .int(let n):
                        numbers[i] += 1
                        integerSums[i] += Int128(n)
                    case .double(let d):
                        numbers[i] += 1
                        doubleSums[i].add(d)
                        sawDouble[i] = true
                    default: break
                    }
                }
            case .min(let field), .max(let field):
                let least = if case .min = function { true } else { false }
                Self.forEachOperand(field, of: object) { value in
                    let key = ValueOrder.sortKey(value)
                    if let (_, best, id) = extremes[i] {
                        // An equal value takes the form of the object of least id.
                        let better = least ? key.lexicographicallyPrecedes(best) : best.lexicographicallyPrecedes(key)
                        guard better || (key == best && UTF8Order.less(object.id, id)) else { return }
                    }
                    extremes[i] = (value, key, object.id)
                }
            }
        }
    }

    /// What a function over `field` takes from `object`: the value at its path; for a path
    /// that reaches into arrays, each value it reaches (`sum(items[].qty)`: every line's).
    private static func forEachOperand(_ field: Field, of object: Object, _ body: (JSONValue) -> Void) {
        if field.reachesIntoArrays {
            for value in field.values(in: object.attributes) where !value.isNull { body(value) }
        } else if let value = field.value(in: object) {
            body(value)
        }
    }

    /// The sum of function `i`'s numbers. The integers' exact sum goes in as a double and what
    /// that double left out, so that no integer's low digits are lost beside a large double
    /// (2^63 - 1 twice, -2^64 and 1 sum to -1, not 0).
    private func total(_ i: Int) -> CompensatedSum {
        var sum = doubleSums[i]
        let integers = integerSums[i]
        let high = Double(integers)
        sum.add(high)
        if let rounded = Int128(exactly: high) { sum.add(Double(integers - rounded)) }
        return sum
    }

    /// The functions' results.
    ///
    /// - Throws: ``SatchelError`` `.invalidArgument` for a sum beyond the range of a double
    ///   (JSON has no infinity).
    func results() throws(SatchelError) -> [JSONValue] {
        var values: [JSONValue] = []
        for (i, function) in functions.enumerated() {
            switch function {
            case .count: values.append(.int(Int64(count)))
            case .sum(let field):
                if numbers[i] == 0 {
                    values.append(.null)
                } else if !sawDouble[i], let exact = Int64(exactly: integerSums[i]) {
                    values.append(.int(exact))
                } else {
                    let sum = total(i).value
                    guard sum.isFinite else {
                        throw SatchelError(.invalidArgument, "sum(\(field)) is beyond the range of a double (±1.8e308)")
                    }
                    values.append(.double(sum))
                }
            case .avg: values.append(numbers[i] > 0 ? .double(total(i).mean(of: numbers[i])) : .null)
            case .min, .max: values.append(extremes[i]?.0 ?? .null)
            }
        }
        return values
    }
}

/// Neumaier's compensated summation: the rounding error of each addition is kept and added back.
/// Once a sum would overflow (1e308 + 1e308, on the way to a sum within range), it goes on
/// in units of 2^64, exactly rescaled.
private struct CompensatedSum {
    var sum = 0.0
    var compensation = 0.0
    /// Whether `sum` and `compensation` count in units of 2^64.
    var scaled = false

    mutating func add(_ value: Double) {
        var x = scaled ? value * 0x1p-64 : value
        var t = sum + x
        if !t.isFinite && !scaled && x.isFinite {
            scaled = true
            sum *= 0x1p-64
            compensation *= 0x1p-64
            x *= 0x1p-64
            t = sum + x
        }
        compensation += abs(sum) >= abs(x) ? (sum - t) + x : (x - t) + sum
        sum = t
    }

    /// The sum: infinite when it is beyond the range of a double.
    var value: Double { scaled ? (sum + compensation) * 0x1p64 : sum + compensation }

    /// The sum divided by `count`, within range whenever the mean is.
    func mean(of count: Int) -> Double {
        scaled ? ((sum + compensation) / Double(count)) * 0x1p64 : (sum + compensation) / Double(count)
    }
}
