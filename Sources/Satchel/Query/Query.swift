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
    /// Keep only these attributes (the id is always kept); nil for all.
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

    public func offset(_ count: Int) -> Query {
        var copy = self
        copy.offset = count
        return copy
    }

    public func select(_ fields: Field...) -> Query {
        var copy = self
        copy.projection = fields
        return copy
    }

    func validate() throws(SatchelError) {
        if let limit, limit < 0 { throw SatchelError(.invalidArgument, "the limit cannot be negative") }
        if offset < 0 { throw SatchelError(.invalidArgument, "the offset cannot be negative") }
    }

    /// `object` reduced to the projection.
    func project(_ object: Object) -> Object {
        guard let projection else { return object }
        var attributes = JSONObject()
        for field in projection where !field.isID {
            guard let value = field.value(in: object.attributes) else { continue }
            attributes.setValue(value, at: field.components[...])
        }
        return Object(id: object.id, attributes: attributes)
    }
}

extension JSONObject {
    /// Sets `value` at a path of names, creating nested objects on the way.
    mutating func setValue(_ value: JSONValue, at path: ArraySlice<String>) {
        guard let first = path.first else { return }
        if path.count == 1 {
            self[first] = value
            return
        }
        var child = self[first]?.objectValue ?? JSONObject()
        child.setValue(value, at: path.dropFirst())
        self[first] = .object(child)
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
