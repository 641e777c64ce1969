/// One key of a query's order: a field, ascending or descending.
public struct SortKey: Sendable, Hashable, CustomStringConvertible {
    public var field: Field
    public var descending: Bool

    public init(_ field: Field, descending: Bool = false) {
        self.field = field
        self.descending = descending
    }

    public static func ascending(_ field: Field) -> SortKey { SortKey(field) }
    public static func descending(_ field: Field) -> SortKey { SortKey(field, descending: true) }

    public var description: String { descending ? "\(field) desc" : "\(field) asc" }
}

/// A query: which objects, in which order, how many, and which attributes.
///
/// ```swift
/// let query = Query(where: "brand" == "Acme" && "price" < 100)
///     .order(by: "price", descending: true)
///     .limit(20)
///     .select("name", "price")
/// let page = try products.findAll(query)
/// print(try products.explain(query))
/// ```
///
/// Order follows the total order null (and missing) < false < true < numbers < strings <
/// arrays < objects; ties are broken by object id, ascending when the last order key is
/// ascending, descending otherwise. Without an order, results come in an unspecified order and
/// `limit`/`offset` return some subset of that size.
public struct Query: Sendable, Hashable {
    public var condition: Condition
    public var order: [SortKey]
    /// At most this many objects; nil for all.
    public var limit: Int?
    /// Skip this many objects first.
    public var offset: Int
    /// Keep only these attributes (the id is always kept); nil for all. A dotted path keeps
    /// nested objects with only that path in them; a path through `[]` (`items[].product`)
    /// keeps the array, each element reduced to the rest of the path, and leaves out the
    /// elements that path reaches nothing in.
    public var projection: [Field]?
    /// Refuse to run (``SatchelError/Code/unindexedQuery``) rather than scan every object of the
    /// model: for queries that must stay fast as the model grows. `satchel find --require-index`.
    public var requiresIndex = false

    public init(where condition: Condition = .all, order: [SortKey] = [], limit: Int? = nil, offset: Int = 0, select projection: [Field]? = nil) {
        self.condition = condition
        self.order = order
        self.limit = limit
        self.offset = offset
        self.projection = projection
    }

    /// Objects whose attributes equal `conditions` (RhoConnect's `find_all(conditions)`).
    public init(where conditions: JSONObject) { self.init(where: Condition(equalities: conditions)) }

    /// The query, refusing to scan a whole model (see ``requiresIndex``).
    public func requiringIndex() -> Query {
        var copy = self
        copy.requiresIndex = true
        return copy
    }

    /// Adds an order key.
    public func order(by field: Field, descending: Bool = false) -> Query {
        var copy = self
        copy.order.append(SortKey(field, descending: descending))
        return copy
    }

    public func limit(_ count: Int) -> Query {
        var copy = self
        copy.limit = count
        return copy
    }

    /// How many matches the query reads before it skips its offset: `offset + limit`, nil
    /// without a limit, `Int.max` when the sum goes past it.
    var window: Int? {
        limit.map { limit in
            let (sum, overflow) = limit.addingReportingOverflow(offset)
            return overflow ? .max : sum
        }
    }

    public func offset(_ count: Int) -> Query {
        var copy = self
        copy.offset = count
        return copy
    }

    /// The query keeping only `fields` of each object (see ``projection``).
    public func select(_ fields: Field...) -> Query {
        var copy = self
        copy.projection = fields
        return copy
    }

    func validate() throws(SatchelError) {
        if let limit, limit < 0 { throw SatchelError(.invalidArgument, "the limit cannot be negative") }
        if offset < 0 { throw SatchelError(.invalidArgument, "the offset cannot be negative") }
    }
}

/// A projection's paths as a tree of names, built once per query: a node is a whole value
/// kept, or the names to keep within it. Each path keeps what it names, nested paths as nested
/// objects; a path through `[]` keeps the array, each element reduced to the rest of the path
/// (elements it reaches nothing in are left out, and so is an array with none).
struct ProjectionTree {
    var whole = false
    var children: [(name: String, tree: ProjectionTree)] = []

    init() {}

    /// The tree of `fields` (the id, always kept, takes no place in it).
    init(_ fields: [Field]) {
        for field in fields where !field.isID { add(field.components[...]) }
    }

    /// `object` reduced to the tree's paths.
    func project(_ object: Object) -> Object { Object(id: object.id, attributes: reduce(object.attributes)) }

    mutating func add(_ path: ArraySlice<String>) {
        guard let first = path.first else {
            whole = true
            return
        }
        if let i = children.firstIndex(where: { UTF8Order.equal($0.name, first) }) {
            children[i].tree.add(path.dropFirst())
        } else {
            var child = ProjectionTree()
            child.add(path.dropFirst())
            children.append((first, child))
        }
    }

    /// What of `attributes` the tree keeps.
    func reduce(_ attributes: JSONObject) -> JSONObject {
        var kept = JSONObject()
        for (name, tree) in children {
            let isArrayStep = Field.isArrayStep(name)
            let key = isArrayStep ? String(name.dropLast(2)) : name
            guard let value = attributes[key] else { continue }
            let reached: JSONValue?
            if isArrayStep, case .array(let elements) = value {
                let left = elements.compactMap(tree.reduce)
                reached = left.isEmpty ? nil : .array(left)
            } else {
                reached = tree.reduce(value)  // a value that is not an array is its own one element
            }
            guard let reached else { continue }
            // `items` and `items[]...` both reach the same attribute: the whole value wins, and
            // two reductions of one object are one.
            kept[key] = kept[key].map { Self.union($0, reached, of: value) } ?? reached
        }
        return kept
    }

    /// Two reductions of `original` as one: the whole value when either is whole, the names of
    /// both when both are objects.
    static func union(_ a: JSONValue, _ b: JSONValue, of original: JSONValue) -> JSONValue {
        guard case .object(let x) = a, case .object(let y) = b, case .object(let whole) = original, a != original, b != original else {
            return b == original ? b : a
        }
        var both = x
        for (name, value) in y {
            both[name] = x[name].map { union($0, value, of: whole[name] ?? value) } ?? value
        }
        return .object(both)
    }

    /// What of `value` the tree keeps, nil for nothing.
    func reduce(_ value: JSONValue) -> JSONValue? {
        if whole { return value }
        guard case .object(let object) = value else { return nil }
        let kept = reduce(object)
        return kept.isEmpty ? nil : .object(kept)
    }
}

/// How a query runs, as ``Model/explain(_:)`` tells it.
public struct QueryPlan: Sendable, CustomStringConvertible {
    /// How the objects are found.
    public enum Access: Sendable, Hashable {
        /// Direct gets by object id.
        case idLookup
        /// A scan of one index's key ranges.
        case index(IndexDefinition)
        /// A scan of the model's objects (possibly within an id range).
        case scan
    }

    public var access: Access
    /// Whether the access delivers the objects in the query's order (no sort needed, so a
    /// `limit` stops the read early).
    public var deliversOrder: Bool
    /// What the access does, what is checked on each object, and how the result is ordered.
    public var description: String
}
