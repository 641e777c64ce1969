/// A path to an attribute: a top-level name, or names joined by dots that reach into nested
/// objects (`"address.city"`). The path `object` is the object id.
///
/// `Field` is what the query operators are built on:
///
/// ```swift
/// let cheapAcme = Field("price") < 100 && Field("brand") == "Acme"
/// let same: Condition = "price" < 100 && "brand" == "Acme"   // string literals work too
/// let tagged = Field("tags").contains("sale") || Field("name").beginsWith("Acme")
/// ```
public struct Field: Sendable, Hashable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// The names along the path.
    public let components: [String]

    /// A path written with dots: `"address.city"`.
    public init(_ path: String) {
        components = path.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    }

    /// A path from its names, for attribute names that themselves contain dots.
    public init(components: [String]) {
        precondition(!components.isEmpty, "a field path needs at least one name")
        self.components = components
    }

    public init(stringLiteral value: String) { self.init(value) }

    /// The path with dots.
    public var description: String { components.joined(separator: ".") }

    /// The path of the object id, `object`.
    public static let id = Field(components: [Object.idAttribute])

    /// Whether the path is the object id.
    var isID: Bool { components.count == 1 && UTF8Order.equal(components[0], Object.idAttribute) }

    public static func == (a: Field, b: Field) -> Bool {
        a.components.count == b.components.count && zip(a.components, b.components).allSatisfy { UTF8Order.equal($0, $1) }
    }

    public func hash(into hasher: inout Hasher) {
        for component in components { UTF8Order.hash(component, into: &hasher) }
    }

    /// The value at this path in `object`, or nil when missing.
    func value(in object: Object) -> JSONValue? {
        if isID { return .string(object.id) }
        return value(in: object.attributes)
    }

    /// The value at this path in `attributes`, or nil when missing.
    public func value(in attributes: JSONObject) -> JSONValue? {
        var current = attributes[components[0]]
        for name in components.dropFirst() {
            guard case .object(let object)? = current else { return nil }
            current = object[name]
        }
        return current
    }
}

/// A condition on objects: comparisons of fields with values, combined with and, or and not.
///
/// Semantics (the same in the Swift API and the CLI):
/// - `==` is equality of the whole value; numbers compare numerically and exactly, strings by
///   Unicode scalars. `!=` matches objects that have the field with another value. A missing
///   field never matches any condition but `exists(false)`; `== null` matches nothing.
/// - `<` `<=` `>` `>=` compare within one type class: numbers with numbers, strings with
///   strings (UTF-8 byte order), booleans with booleans.
/// - `isIn` matches a value equal to any listed one; `beginsWith` applies to strings;
///   `contains` matches a string holding the substring or an array holding an equal element.
///   An array is one whole value for every other operator.
///
/// `Condition` is a `Sendable` value; its description is stable and used by `explain`.
public struct Condition: Sendable, Hashable, CustomStringConvertible {
    indirect enum Node: Sendable, Hashable {
        case always
        case compare(Field, Operator, JSONValue)
        case oneOf(Field, [JSONValue])
        case beginsWith(Field, String)
        case contains(Field, JSONValue)
        case exists(Field, Bool)
        case and([Node])
        case or([Node])
        case not(Node)
    }

    let node: Node

    init(_ node: Node) { self.node = node }

    /// Matches every object.
    public static let all = Condition(.always)

    /// Matches no object.
    public static let none = Condition(.not(.always))

    /// Objects whose fields equal the given values (RhoConnect's `find_all(conditions)`).
    public init(equalities: JSONObject) {
        let nodes = equalities.map { Node.compare(Field(components: [$0.key]), .equal, $0.value) }
        self.node = nodes.isEmpty ? .always : nodes.count == 1 ? nodes[0] : .and(nodes)
    }

    /// Whether `object` satisfies the condition.
    public func matches(_ object: Object) -> Bool { Self.evaluate(node, object) }

    public var description: String { Self.describe(node) }

    // MARK: - Evaluation

    static func evaluate(_ node: Node, _ object: Object) -> Bool {
        switch node {
        case .always: return true
        case .compare(let field, let op, let operand):
            guard let value = field.value(in: object) else { return false }
            return compare(value, op, operand)
        case .oneOf(let field, let values):
            guard let value = field.value(in: object) else { return false }
            return values.contains(value)
        case .beginsWith(let field, let prefix):
            guard case .string(let s)? = field.value(in: object) else { return false }
            return UTF8Order.hasPrefix(s, prefix)
        case .contains(let field, let operand):
            return contains(field.value(in: object), operand)
        case .exists(let field, let present):
            return (field.value(in: object) != nil) == present
        case .and(let nodes): return nodes.allSatisfy { evaluate($0, object) }
        case .or(let nodes): return nodes.contains { evaluate($0, object) }
        case .not(let inner): return !evaluate(inner, object)
        }
    }

    static func compare(_ value: JSONValue, _ op: Operator, _ operand: JSONValue) -> Bool {
        switch op {
        case .equal: return value == operand
        case .notEqual: return value != operand
        case .less, .lessOrEqual, .greater, .greaterOrEqual:
            guard let order = ValueOrder.compareWithinClass(value, operand) else { return false }
            switch op {
            case .less: return order < 0
            case .lessOrEqual: return order <= 0
            case .greater: return order > 0
            default: return order >= 0
            }
        }
    }

    static func contains(_ value: JSONValue?, _ operand: JSONValue) -> Bool {
        switch (value, operand) {
        case (.string(let s)?, .string(let needle)): return ValueOrder.utf8Contains(s, needle)
        case (.array(let elements)?, _): return elements.contains(operand)
        default: return false
        }
    }

    // MARK: - Description

    static func describe(_ node: Node) -> String {
        switch node {
        case .always: return "true"
        case .compare(let field, let op, let value): return "\(field) \(op.rawValue) \(value)"
        case .oneOf(let field, let values): return "\(field) in \(JSONValue.array(values))"
        case .beginsWith(let field, let prefix): return "\(field) beginsWith \(JSONValue.string(prefix))"
        case .contains(let field, let value): return "\(field) contains \(value)"
        case .exists(let field, let present): return present ? "\(field) exists" : "\(field) missing"
        case .and(let nodes): return nodes.map { wrap($0) }.joined(separator: " && ")
        case .or(let nodes): return nodes.map { wrap($0) }.joined(separator: " || ")
        case .not(let inner): return "!" + wrap(inner)
        }
    }

    private static func wrap(_ node: Node) -> String {
        switch node {
        case .and, .or: "(\(describe(node)))"
        default: describe(node)
        }
    }
}

// MARK: - Builders

extension Field {
    /// The field equals any of `values`.
    public func isIn(_ values: [JSONValue]) -> Condition { Condition(.oneOf(self, values)) }
    /// The field is a string starting with `prefix`.
    public func beginsWith(_ prefix: String) -> Condition { Condition(.beginsWith(self, prefix)) }
    /// The field is a string holding `value` as a substring, or an array holding an element equal to it.
    public func contains(_ value: JSONValue) -> Condition { Condition(.contains(self, value)) }
    /// The field is present (or, with `false`, missing).
    public func exists(_ present: Bool = true) -> Condition { Condition(.exists(self, present)) }
}

public func == (field: Field, value: JSONValue) -> Condition { Condition(.compare(field, .equal, value)) }
public func != (field: Field, value: JSONValue) -> Condition { Condition(.compare(field, .notEqual, value)) }
public func < (field: Field, value: JSONValue) -> Condition { Condition(.compare(field, .less, value)) }
public func <= (field: Field, value: JSONValue) -> Condition { Condition(.compare(field, .lessOrEqual, value)) }
public func > (field: Field, value: JSONValue) -> Condition { Condition(.compare(field, .greater, value)) }
public func >= (field: Field, value: JSONValue) -> Condition { Condition(.compare(field, .greaterOrEqual, value)) }

/// Both conditions hold.
public func && (lhs: Condition, rhs: Condition) -> Condition {
    switch (lhs.node, rhs.node) {
    case (.always, _): return rhs
    case (_, .always): return lhs
    case (.and(let a), .and(let b)): return Condition(.and(a + b))
    case (.and(let a), let b): return Condition(.and(a + [b]))
    case (let a, .and(let b)): return Condition(.and([a] + b))
    case (let a, let b): return Condition(.and([a, b]))
    }
}

/// Either condition holds.
public func || (lhs: Condition, rhs: Condition) -> Condition {
    switch (lhs.node, rhs.node) {
    case (.or(let a), .or(let b)): return Condition(.or(a + b))
    case (.or(let a), let b): return Condition(.or(a + [b]))
    case (let a, .or(let b)): return Condition(.or([a] + b))
    case (let a, let b): return Condition(.or([a, b]))
    }
}

/// The condition does not hold.
public prefix func ! (condition: Condition) -> Condition { Condition(.not(condition.node)) }

// MARK: - The tree, for translators

extension Condition {
    /// A comparison's operator.
    public enum Operator: String, Sendable, Hashable {
        case equal = "==", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
    }

    /// One node of a condition, for code that translates conditions into another query language
    /// (a server's, for `SyncEngine.search`): what each case means is the semantics above.
    public indirect enum Expression: Sendable, Hashable {
        /// Every object.
        case all
        case compare(Field, Operator, JSONValue)
        case isIn(Field, [JSONValue])
        case beginsWith(Field, String)
        case contains(Field, JSONValue)
        /// The field is present (`true`) or missing (`false`).
        case exists(Field, Bool)
        case and([Condition])
        case or([Condition])
        case not(Condition)
    }

    /// The condition's top node.
    public var expression: Expression {
        switch node {
        case .always: .all
        case .compare(let field, let op, let value): .compare(field, op, value)
        case .oneOf(let field, let values): .isIn(field, values)
        case .beginsWith(let field, let prefix): .beginsWith(field, prefix)
        case .contains(let field, let value): .contains(field, value)
        case .exists(let field, let present): .exists(field, present)
        case .and(let nodes): .and(nodes.map(Condition.init))
        case .or(let nodes): .or(nodes.map(Condition.init))
        case .not(let inner): .not(Condition(inner))
        }
    }
}
