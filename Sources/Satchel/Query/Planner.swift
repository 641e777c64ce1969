import Logging

/// A half-open range of keys, `[start, end)`.
struct KeyRange: Sendable {
    var start: [UInt8]
    var end: [UInt8]
    /// For the string sub-range of an array-element index: only entries whose string holds this.
    var substring: String? = nil

    /// Every key that starts with `prefix`.
    static func prefix(_ prefix: [UInt8]) -> KeyRange { KeyRange(start: prefix, end: Keys.prefixEnd(prefix)) }
}

/// A query's physical plan: where candidates come from, what is left to check on each object,
/// and whether an in-memory sort is needed.
struct Plan {
    enum Source {
        case ids([String])
        case objects(KeyRange, reverse: Bool)
        /// `distinct`: an object may have entries in several of the ranges (an element index
        /// read for several values), and is delivered once.
        case index(StoredIndex, ranges: [KeyRange], valueCount: Int, reverse: Bool, distinct: Bool)
    }

    var source: Source
    /// The part of the condition the source does not guarantee (`.always` when none).
    var residual: Condition.Node
    /// True when the source does not deliver the query's order.
    var sortInMemory: Bool
    /// The plan as `explain` reports it, built only when asked for.
    var explain: () -> QueryPlan
}

/// Chooses how a query runs: an id lookup, an index, or a scan. Rules, in order:
///
/// 1. `object == id` or `object in [ids]`: direct gets.
/// 2. A value index is usable with equality (`==`, or `in` as several seeks) on a leading run of
///    its fields, then at most one range (`<` `<=` `>` `>=` within one type class, `beginsWith`,
///    `exists`) on the next field. An array-element index is usable for `contains`, and for `==` or
///    `in` of strings on the path into its array (`tags[]`); one over a path into arrays
///    (`items[].product`), for `==` or `in` on that path.
/// 3. An index whose order matches the query's order (after the fields fixed by equality) lets
///    a `limit` stop the read early.
/// 4. Otherwise the model is scanned in id order (narrowed by conditions on `object`).
///
/// Among usable indexes, more fields fixed by equality wins, then a range, then the one that
/// delivers the order. With a `limit`, an index that delivers the order is preferred over one
/// that only narrows by a range.
enum Planner {
    struct Candidate {
        var index: StoredIndex
        var ranges: [KeyRange]
        var valueCount: Int
        var consumed: ConjunctSet
        var score: Int
        var deliversOrder: Bool
        var reverse: Bool
        /// Whether an object may have entries in several of the ranges.
        var distinct = false
        /// What the candidate reads, kept as data; put in words only for `explain`.
        var equalities: [(Field, [JSONValue])] = []
        var range: (Field, Bounds)? = nil
        var contains: (Field, JSONValue)? = nil

        var detail: String {
            if let (field, value) = contains {
                let strings = ranges.count > 1 ? ", and string values holding it" : ""
                return "\(field) contains \(value) (elements == \(value)\(strings))"
            }
            var details = equalities.map { field, values in
                values.count == 1 ? "\(field) == \(values[0])" : "\(field) in \(values.count) values"
            }
            if let (field, bounds) = range { details.append(bounds.describe(field)) }
            if consumed.isEmpty { details.append("all entries") }
            return details.joined(separator: ", ") + (ranges.count > 1 ? " (\(ranges.count) seeks)" : "")
        }
    }

    static func plan(_ query: Query, model: String, entry: ModelEntry, objectPrefix: [UInt8]) -> Plan {
        let conjuncts = Self.conjuncts(query.condition.node)
        let tieDescending = query.order.last?.descending ?? false

        // A condition that can never hold (`Condition.none`) reads nothing.
        if conjuncts.contains(where: { if case .not(.always) = $0 { true } else { false } }) {
            return Plan(
                source: .ids([]), residual: .always, sortInMemory: false,
                explain: { QueryPlan(access: .idLookup, deliversOrder: true, description: "nothing to read: the condition never holds") })
        }

        // 1. Id lookups.
        for (i, conjunct) in conjuncts.enumerated() {
            var ids: [String]?
            switch conjunct {
            case .compare(let field, .equal, let value) where field.isID:
                ids = value.stringValue.map { [$0] } ?? []
            case .oneOf(let field, let values) where field.isID:
                ids = Self.uniqueSorted(values.compactMap(\.stringValue))
            default: break
            }
            if let ids {
                let residual = Self.remove(ConjunctSet([i]), from: conjuncts)
                let sorted = !query.order.isEmpty && ids.count > 1
                return Plan(
                    source: .ids(ids), residual: residual, sortInMemory: sorted,
                    explain: {
                        let describedIDs = ids.count == 1 ? "object == \(JSONValue.string(ids[0]))" : "object in \(ids.count) ids"
                        return QueryPlan(
                            access: .idLookup, deliversOrder: !sorted,
                            description: Self.describe(
                                "id lookup: \(describedIDs) (\(ids.count) get\(ids.count == 1 ? "" : "s"))", residual, query, sorted: sorted))
                    })
            }
        }

        // 2. Index candidates.
        func candidate(_ index: StoredIndex) -> Candidate? {
            switch index.definition.kind {
            // A value index on a path into arrays (which earlier versions accepted) holds no
            // entry per element: never used.
            case .value where index.definition.fields.contains(where: \.reachesIntoArrays): nil
            case .value: valueCandidate(index, model: model, conjuncts: conjuncts, query: query, tieDescending: tieDescending)
            case .arrayElements: elementCandidate(index, model: model, conjuncts: conjuncts)
            case .text: nil  // searched by text, not by conditions
            }
        }
        let candidates = entry.indexes.filter { $0.state == .ready }.compactMap(candidate)

        // 3. The scan, narrowed by conditions on the id.
        let idBounds = Self.bounds(for: Field.id, conjuncts: conjuncts)
        var scanRange = KeyRange.prefix(objectPrefix)
        var scanConsumed = ConjunctSet()
        var narrowed: Bounds?
        if let bounds = idBounds, bounds.isStringClass, let range = bounds.range(after: objectPrefix) {
            scanRange = range
            scanConsumed = bounds.consumed
            narrowed = bounds
        }
        let remainingOrder = query.order
        let scanDeliversOrder = remainingOrder.isEmpty || (remainingOrder.count == 1 && remainingOrder[0].field.isID)
        let scanReverse = scanDeliversOrder && tieDescending

        let best = candidates.max { a, b in
            a.score != b.score ? a.score < b.score : (a.deliversOrder != b.deliversOrder ? !a.deliversOrder : a.index.id > b.index.id)
        }
        let orderServing = candidates.filter(\.deliversOrder).max { a, b in a.score != b.score ? a.score < b.score : a.index.id > b.index.id }

        var chosen: Candidate?
        if let best, best.score >= 10 {
            // Equality on at least one field: the most selective choice.
            chosen = best
            if let orderServing, orderServing.score >= best.score { chosen = orderServing }
        } else if !query.order.isEmpty && !scanDeliversOrder, let orderServing, query.limit != nil || best == nil {
            chosen = orderServing  // ordered read that a limit stops early
        } else if let best {
            chosen = best
        }

        if let chosen {
            let residual = Self.remove(chosen.consumed, from: conjuncts)
            let sorted = !query.order.isEmpty && !chosen.deliversOrder
            return Plan(
                source: .index(
                    chosen.index, ranges: chosen.ranges, valueCount: chosen.valueCount, reverse: chosen.reverse, distinct: chosen.distinct),
                residual: residual, sortInMemory: sorted,
                explain: {
                    QueryPlan(
                        access: .index(chosen.index.definition), deliversOrder: !sorted,
                        description: Self.describe(
                            "index \(chosen.index.definition): \(chosen.detail)"
                                + (chosen.deliversOrder && !query.order.isEmpty
                                    ? (chosen.reverse ? ", read in reverse index order" : ", read in index order") : ""),
                            residual, query, sorted: sorted))
                })
        }

        let residual = Self.remove(scanConsumed, from: conjuncts)
        let sorted = !scanDeliversOrder
        let objects = entry.statistics.objects
        let hasIndex = !entry.indexes.isEmpty
        // Unfinished indexes that would have served the conditions or the order.
        let incomplete = entry.indexes.filter { $0.state == .building && candidate($0) != nil }.map { "index \($0.definition) is incomplete" }
        let unserved = !conjuncts.isEmpty && scanConsumed.isEmpty
        return Plan(
            source: .objects(scanRange, reverse: scanReverse), residual: residual, sortInMemory: sorted,
            explain: {
                var detail = "scan \(model) (\(objects) objects)"
                if let narrowed { detail += " within \(narrowed.describe(Field.id))" }
                if !incomplete.isEmpty {
                    // Being built, or a build a kill interrupted: declaring it again finishes it.
                    detail += " (\(incomplete.joined(separator: ", ")): its build is under way or was interrupted; "
                    detail += "declaring it again (createIndex, satchel index) finishes it)"
                } else if unserved {
                    detail += hasIndex ? " (no ready index fits the conditions)" : " (the model has no index)"
                }
                return QueryPlan(access: .scan, deliversOrder: !sorted, description: Self.describe(detail, residual, query, sorted: sorted))
            })
    }

    // MARK: - Candidates

    private static func valueCandidate(
        _ index: StoredIndex, model: String, conjuncts: [Condition.Node], query: Query, tieDescending: Bool
    ) -> Candidate? {
        let fields = index.definition.fields
        var prefixes: [[UInt8]] = [index.prefix]
        var consumed = ConjunctSet()
        var equalities: [(Field, [JSONValue])] = []
        var fixedSingle: [Field] = []
        var k = 0
        // Equality (or `in`) on a leading run of fields.
        while k < fields.count, let (values, used) = equalityValues(for: fields[k], conjuncts: conjuncts) {
            if prefixes.count * max(values.count, 1) > maximumSeeks { break }
            prefixes = prefixes.flatMap { p in values.map { Keys.element(after: p, $0) } }
            consumed.insert(used)
            equalities.append((fields[k], values))
            if values.count == 1 { fixedSingle.append(fields[k]) }
            k += 1
        }
        // Then at most one range on the next field.
        var ranges: [KeyRange] = prefixes.map(KeyRange.prefix)
        var rangeBounds: (Field, Bounds)?
        if k < fields.count, let bounds = bounds(for: fields[k], conjuncts: conjuncts) {
            let narrowed = prefixes.compactMap { bounds.range(after: $0) }
            if narrowed.count == prefixes.count {
                ranges = narrowed
                consumed.formUnion(bounds.consumed)
                rangeBounds = (fields[k], bounds)
            }
        }
        let hasRange = rangeBounds != nil
        // Whether the entries come out in the query's order.
        var deliversOrder = false
        var reverse = false
        if prefixes.count == 1 {
            let remaining = query.order.filter { key in !fixedSingle.contains(key.field) }
            let rest = Array(fields[k...])
            if remaining.isEmpty {
                deliversOrder = rest.isEmpty  // entries of one value run in id order
            } else {
                deliversOrder =
                    remaining.count == rest.count && zip(remaining, rest).allSatisfy { $0.field == $1 }
                    && remaining.allSatisfy { $0.descending == tieDescending }
            }
            reverse = deliversOrder && tieDescending
        }
        guard !consumed.isEmpty || (deliversOrder && !query.order.isEmpty) else { return nil }
        return Candidate(
            index: index, ranges: ranges, valueCount: fields.count, consumed: consumed,
            score: k * 10 + (hasRange ? 5 : 0), deliversOrder: deliversOrder, reverse: reverse,
            equalities: equalities, range: rangeBounds)
    }

    /// The most key ranges an index read seeks (the values of an `in`, by each fixed field's):
    /// past it, the conjunct is left to the residual.
    static let maximumSeeks = 256

    private static func elementCandidate(_ index: StoredIndex, model: String, conjuncts: [Condition.Node]) -> Candidate? {
        let field = index.definition.fields[0]
        let elements = Keys.indexElementsPrefix(index.prefix)
        if field.reachesIntoArrays {
            // `items[].product == v` (or `in`): the objects with an entry for a value, one
            // each per value (an object's entries are distinct). Exact, so the conjunct is
            // consumed; `== null` matches nothing (the index holds the nulls an element reaches).
            guard let (values, i) = equalityValues(for: field, conjuncts: conjuncts), values.count <= maximumSeeks else { return nil }
            return Candidate(
                index: index, ranges: values.map { KeyRange.prefix(Keys.element(after: elements, $0)) }, valueCount: 2,
                consumed: ConjunctSet([i]), score: 9, deliversOrder: false, reverse: false, distinct: values.count > 1,
                equalities: [(field, values)])
        }
        // `tags[] == "x"` (or `in` strings) on an index of `tags`: arrays holding the string,
        // and `tags` that is the string itself (its own one element, kept among the strings).
        // Exact. A number or other value is not served: a scalar one has no entry.
        if let (values, i) = equalityValues(for: field.reachingIntoArray(at: field.components.count), conjuncts: conjuncts),
            2 * values.count <= maximumSeeks, values.allSatisfy({ $0.stringValue != nil })
        {
            let strings = Keys.indexStringsPrefix(index.prefix)
            return Candidate(
                index: index, ranges: values.flatMap { value in [elements, strings].map { KeyRange.prefix(Keys.element(after: $0, value)) } },
                valueCount: 2, consumed: ConjunctSet([i]), score: 9, deliversOrder: false, reverse: false, distinct: values.count > 1,
                equalities: [(field.reachingIntoArray(at: field.components.count), values)])
        }
        for conjunct in conjuncts {
            guard case .contains(let f, let value) = conjunct, f == field else { continue }
            var ranges = [KeyRange.prefix(Keys.element(after: Keys.indexElementsPrefix(index.prefix), value))]
            if case .string(let needle) = value {
                var strings = KeyRange.prefix(Keys.indexStringsPrefix(index.prefix))
                strings.substring = needle
                ranges.append(strings)
            }
            // `contains` stays in the residual: the string range is filtered by substring on the
            // key, and every object is checked again.
            return Candidate(
                index: index, ranges: ranges, valueCount: 2, consumed: ConjunctSet(), score: 9, deliversOrder: false, reverse: false,
                contains: (field, value))
        }
        return nil
    }

    /// Values a field must equal, from an `==` (preferred) or an `in` conjunct.
    private static func equalityValues(for field: Field, conjuncts: [Condition.Node]) -> ([JSONValue], Int)? {
        var found: ([JSONValue], Int)?
        for (i, conjunct) in conjuncts.enumerated() {
            switch conjunct {
            case .compare(let f, .equal, let value) where f == field:
                if value.isNull { return ([], i) }  // `== null` matches nothing
                return ([value], i)
            case .oneOf(let f, let values) where f == field && found == nil:
                // Deduplicate by encoding: 1 and 1.0 are one value.
                var seen = Set<[UInt8]>()
                found = (values.filter { !$0.isNull && seen.insert(KeyEncoder.valueBytes($0)).inserted }, i)
            default: continue
            }
        }
        return found
    }

    // MARK: - Ranges on one field

    struct Bounds {
        typealias TypeClass = Keys.TypeClass
        var typeClass: TypeClass?
        var lower: (value: JSONValue, inclusive: Bool)?
        var upper: (value: JSONValue, inclusive: Bool)?
        var prefix: String?
        var exists: Bool?
        var consumed = ConjunctSet()

        var isStringClass: Bool { typeClass == .string || prefix != nil || (typeClass == nil && exists == true) }

        static func typeClass(of value: JSONValue) -> TypeClass? {
            switch value {
            case .int, .double: .number
            case .string: .string
            case .bool: .bool
            default: nil
            }
        }

        /// The key range of entries after `prefix` whose next element satisfies the bounds
        /// (the key bytes are KeyCodec's).
        func range(after prefix: [UInt8]) -> KeyRange? {
            if let typeClass {
                var (start, end) = Keys.typeClassRange(after: prefix, typeClass)
                if let lower { start = Keys.bound(after: prefix, lower.value, inclusive: lower.inclusive, lower: true) }
                if let upper { end = Keys.bound(after: prefix, upper.value, inclusive: upper.inclusive, lower: false) }
                return KeyRange(start: start, end: end)
            }
            if let prefixString = self.prefix {
                return KeyRange.prefix(Keys.stringPrefix(after: prefix, prefixString))
            }
            if let exists {
                // Missing values are stored as null, the first element of the order.
                let null = Keys.null(after: prefix)
                return exists ? KeyRange(start: Keys.prefixEnd(null), end: Keys.prefixEnd(prefix)) : KeyRange.prefix(null)
            }
            return nil
        }

        func describe(_ field: Field) -> String {
            if typeClass != nil {
                var parts: [String] = []
                if let lower { parts.append("\(field) \(lower.inclusive ? ">=" : ">") \(lower.value)") }
                if let upper { parts.append("\(field) \(upper.inclusive ? "<=" : "<") \(upper.value)") }
                return parts.joined(separator: ", ")
            }
            if let prefix { return "\(field) beginsWith \(JSONValue.string(prefix))" }
            return exists == true ? "\(field) exists" : "\(field) missing"
        }
    }

    /// The range conditions on `field` that one index range can serve exactly: bounds within
    /// one type class (else a `beginsWith`, else an `exists`).
    static func bounds(for field: Field, conjuncts: [Condition.Node]) -> Bounds? {
        var bounds = Bounds()
        var prefixIndex: Int?
        var existsIndex: Int?
        for (i, conjunct) in conjuncts.enumerated() {
            switch conjunct {
            case .compare(let f, let op, let value) where f == field && op != .equal && op != .notEqual:
                guard let typeClass = Bounds.typeClass(of: value), bounds.typeClass == nil || bounds.typeClass == typeClass else { continue }
                switch op {
                case .greater, .greaterOrEqual:
                    if bounds.lower == nil {
                        bounds.lower = (value, op == .greaterOrEqual)
                        bounds.typeClass = typeClass
                        bounds.consumed.insert(i)
                    }
                case .less, .lessOrEqual:
                    if bounds.upper == nil {
                        bounds.upper = (value, op == .lessOrEqual)
                        bounds.typeClass = typeClass
                        bounds.consumed.insert(i)
                    }
                default: break
                }
            case .beginsWith(let f, _) where f == field && prefixIndex == nil:
                prefixIndex = i
            case .exists(let f, _) where f == field && existsIndex == nil:
                existsIndex = i
            default: continue
            }
        }
        if bounds.typeClass != nil { return bounds }
        if let prefixIndex, case .beginsWith(_, let prefix) = conjuncts[prefixIndex] {
            return Bounds(prefix: prefix, consumed: ConjunctSet([prefixIndex]))
        }
        if let existsIndex, case .exists(_, let present) = conjuncts[existsIndex] {
            return Bounds(exists: present, consumed: ConjunctSet([existsIndex]))
        }
        return nil
    }

    // MARK: - Helpers

    static func conjuncts(_ node: Condition.Node) -> [Condition.Node] {
        switch node {
        case .always: []
        case .and(let nodes): nodes.flatMap(conjuncts)
        // Equalities on one field, or'ed, are its `in`, which an index serves (a black-box
        // probe: `brand=Acme or brand=Hooli` was refused as a scan, `brand in Acme,Hooli` served).
        case .or(let nodes): [oneOf(nodes) ?? node]
        default: [node]
        }
    }

    /// `nodes` as one `in`, when each is an equality (or an `in`) on the same field.
    static func oneOf(_ nodes: [Condition.Node]) -> Condition.Node? {
        var field: Field?
        var values: [JSONValue] = []
        for node in nodes {
            switch node {
            case .compare(let f, .equal, let value) where field == nil || field == f:
                field = f
                values.append(value)
            case .oneOf(let f, let more) where field == nil || field == f:
                field = f
                values += more
            default: return nil
            }
        }
        return field.map { .oneOf($0, values) }
    }

    static func remove(_ consumed: ConjunctSet, from conjuncts: [Condition.Node]) -> Condition.Node {
        let rest = conjuncts.enumerated().filter { !consumed.contains($0.offset) }.map(\.element)
        return rest.isEmpty ? .always : rest.count == 1 ? rest[0] : .and(rest)
    }

    static func uniqueSorted(_ ids: [String]) -> [String] {
        var seen = Set<NameKey>()
        return ids.filter { seen.insert(NameKey($0)).inserted }.sorted { UTF8Order.less($0, $1) }
    }

    static func describe(_ access: String, _ residual: Condition.Node, _ query: Query, sorted: Bool) -> String {
        var parts = [access]
        if case .always = residual {} else { parts.append("filter \(Condition.describe(residual))") }
        if sorted {
            let keys = query.order.map(\.description).joined(separator: ", ")
            if let window = query.window {
                parts.append("sort by \(keys), keeping the top \(window)")
            } else {
                parts.append("sort by \(keys)")
            }
        } else if let window = query.window {
            parts.append("stop after \(window)")
        }
        return parts.joined(separator: "; ")
    }
}

/// Which conjuncts a plan consumed: a bit per conjunct (the first 64; later ones are never
/// consumed, so they stay in the residual and are checked on each object).
struct ConjunctSet: Sendable {
    private var bits: UInt64 = 0

    init() {}
    init(_ indexes: [Int]) { for i in indexes { insert(i) } }

    var isEmpty: Bool { bits == 0 }
    mutating func insert(_ i: Int) { if i < 64 { bits |= 1 << UInt64(i) } }
    mutating func formUnion(_ other: ConjunctSet) { bits |= other.bits }
    func contains(_ i: Int) -> Bool { i < 64 && bits & (1 << UInt64(i)) != 0 }
}

extension Planner {
    /// Throws when `plan` scans every object of the model and the query (or the store) asks for
    /// an index: ``SatchelError/Code/unindexedQuery``, naming the attribute to index.
    static func guardScan(_ plan: Plan, _ query: Query, model: Model, storeOption: Bool = true) throws(SatchelError) {
        let configuration = model.store.configuration
        let refuses = query.requiresIndex || (storeOption && configuration.refusesFullScans)
        let warns = storeOption && configuration.warnsOnFullScans
        guard refuses || warns else { return }
        // Every object: no id condition, or one that narrows nothing (`object exists`,
        // `object >= ""`): the range holds every string id.
        let ids = Keys.typeClassRange(after: model.objectPrefix, .string)
        guard case .objects(let range, _) = plan.source,
            UTF8Order.compareBytes(range.start, Keys.element(after: model.objectPrefix, .string(""))) <= 0,
            UTF8Order.compareBytes(range.end, ids.end) >= 0
        else { return }
        // A scan that delivers the order itself (ids', or none) with nothing to filter stops
        // after its window: it reads no more objects than the answer holds (a black-box probe:
        // `--order object --limit 2` was refused, told to index the id).
        if case .always = plan.residual, !plan.sortInMemory, query.window != nil { return }
        let advice: String
        if let name = indexable(query) {
            advice = "index '\(name)' to serve it (satchel index \(model.name) '\(name)')"
        } else {
            advice = "it has no condition or order an index could serve"
        }
        let message = "the query would scan every object of '\(model.name)': \(advice)"
        guard refuses else {
            configuration.logger.warning("\(message)", metadata: ["model": "\(model.name)", "query": "\(Condition.describe(query.condition.node))"])
            return
        }
        throw SatchelError(.unindexedQuery, message, model: model.name)
    }

    /// The index that would serve the query, as `satchel index` takes it: the first condition's
    /// field that an index serves (an array's elements, `tags[]`, for `contains`), else the
    /// order's keys when an index of them in that order serves it (one direction, no id, no
    /// path into arrays). Nil when no index would: naming one that cannot serve the query would
    /// send the user round in a loop (a black-box probe).
    static func indexable(_ query: Query) -> String? {
        func isString(_ value: JSONValue) -> Bool { if case .string = value { true } else { false } }
        func isScalar(_ value: JSONValue) -> Bool {
            switch value {
            case .array, .object: false
            default: true
            }
        }
        for conjunct in conjuncts(query.condition.node) {
            switch conjunct {
            // An index over a path into arrays serves `==` and `in`; on the path into an array
            // itself (`tags[]`), of strings only.
            case .compare(let field, .equal, let value) where field.reachesIntoArrays:
                if !Field.isArrayStep(field.components.last ?? "") || isString(value) { return field.description }
            case .oneOf(let field, let values) where field.reachesIntoArrays:
                if !Field.isArrayStep(field.components.last ?? "") || values.allSatisfy(isString) { return field.description }
            // A range with an array or object bound is served by no index.
            case .compare(let field, let op, let value) where op != .notEqual && !field.isID && !field.reachesIntoArrays:
                if op == .equal || isScalar(value) { return field.description }
            case .oneOf(let field, _) where !field.isID && !field.reachesIntoArrays: return field.description
            case .beginsWith(let field, _) where !field.reachesIntoArrays: return field.description
            case .exists(let field, _) where !field.reachesIntoArrays: return field.description
            case .contains(let field, _) where !field.reachesIntoArrays: return "\(field)[]"
            default: continue
            }
        }
        let keys = query.order
        guard let first = keys.first, keys.allSatisfy({ !$0.field.reachesIntoArrays && !$0.field.isID && $0.descending == first.descending })
        else { return nil }
        return keys.map(\.field.description).joined(separator: ",")
    }
}
