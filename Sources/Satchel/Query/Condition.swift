/// A path to an attribute: a top-level name, or names joined by dots that reach into nested
/// objects (`"address.city"`). A name ending in `[]` reaches into each element of an array
/// (`"items[].product"`: the product of every line of an order); a condition on such a path
/// matches when any of the values it reaches does. The path `object` is the object id.
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
    /// Whether a name of the path ends in `[]`: the path reaches every element of an array.
    public let reachesIntoArrays: Bool

    /// A path written with dots: `"address.city"`, `"items[].product"`.
    public init(_ path: String) {
        self.init(checked: path.split(separator: ".", omittingEmptySubsequences: false).map(String.init))
    }

    /// A path from its names, for attribute names that themselves contain dots.
    public init(components: [String]) {
        precondition(!components.isEmpty, "a field path needs at least one name")
        self.init(checked: components)
    }

    private init(checked components: [String]) {
        self.components = components
        reachesIntoArrays = components.contains(where: Self.isArrayStep)
    }

    /// Whether a name of a path reaches into each element of an array: `items[]`.
    static func isArrayStep(_ name: String) -> Bool { name.hasSuffix("[]") && name.utf8.count > 2 }

    /// What is wrong with the path as written, in one line (nil: nothing): an empty name, `[]`
    /// other than at the end of a name, or a position in an array (`items[0]`), which no path
    /// takes. A query through such a path answers nothing; the CLI and a migration's steps
    /// refuse it.
    public var malformation: String? {
        // The id is a string (a black-box probe: `object[]=a` answered nothing, in silence).
        if let first = components.first, components.count > 1 || Self.isArrayStep(first),
            (Self.isArrayStep(first) ? String(first.dropLast(2)) : first) == Object.idAttribute
        {
            return "'\(description)': \(Object.idAttribute) is the object's id, a string: no path goes below it"
        }
        for name in components {
            if name.isEmpty { return "'\(description)' has an empty name: a path is names joined by dots, e.g. address.city" }
            if name == "[]" || (Self.isArrayStep(name) ? name.dropLast(2) : name[...]).contains("[]") {
                return "'\(description)': [] ends the name of an array, as in items[].product"
            }
            if name.hasSuffix("]"), let open = name.lastIndex(of: "["), open > name.startIndex {
                let inside = name[name.index(after: open)..<name.index(before: name.endIndex)]
                if !inside.isEmpty && inside.allSatisfy(\.isNumber) {
                    return "'\(description)': a path takes no position in an array (\(name)): write \(name[..<open])[] to reach every element"
                }
            }
        }
        return nil
    }

    public init(stringLiteral value: String) { self.init(value) }

    /// A path as the CLI's options and a migration's steps write it: a JSON string is one
    /// attribute's name, whatever it holds (`"a.b"`, `"unit price"`) but a `[]` at its end,
    /// which a path reads as its elements; anything else a path with dots.
    ///
    /// - Throws: ``SatchelError`` `.invalidArgument`, saying why in one line, for a JSON string
    ///   that does not parse, names nothing (`""`) or ends in `[]`.
    package init(written text: String) throws(SatchelError) {
        guard text.hasPrefix("\"") else {
            self.init(text)
            return
        }
        guard case .string(let name)? = try? JSONValue(parsing: text), !name.isEmpty else {
            throw SatchelError(
                .invalidArgument, "\(text) is not an attribute's name in double quotes: write it as a JSON string, as in \"unit price\"")
        }
        guard !name.hasSuffix("[]") else {
            throw SatchelError(
                .invalidArgument, "\(text) ends in []: no path names an attribute whose name ends so ([] reaches into an array's elements)")
        }
        self.init(components: [name])
    }

    /// `text` cut at each comma outside double quotes (`a,"b,c"` is `a` and `"b,c"`): a list of
    /// paths as options and a migration's index steps write them.
    package static func list(_ text: String) -> [String] {
        var items: [String] = []
        var current = ""
        var quoted = false
        var escaped = false
        for character in text {
            if quoted {
                if escaped {
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "\"" {
                    quoted = false
                }
            } else if character == "\"" {
                quoted = true
            } else if character == "," {
                items.append(current)
                current = ""
                continue
            }
            current.append(character)
        }
        items.append(current)
        return items
    }

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

    /// The value at this path in `attributes`, or nil when missing. A null reached inside a
    /// nested object (`{"a":{"b":null}}` at `a.b`) is missing too, as a null attribute is never
    /// stored at the top: `== null` matches nothing whatever the depth, and an index holds it
    /// as it holds a missing value. For a path that reaches into arrays, the array of every
    /// value it reaches but nulls (nil when that leaves none): what ordering and grouping see.
    public func value(in attributes: JSONObject) -> JSONValue? {
        if reachesIntoArrays {
            let reached = values(in: attributes).filter { !$0.isNull }
            return reached.isEmpty ? nil : .array(reached)
        }
        return reachedValue(in: attributes)
    }

    /// ``value(in:)``, but for a path that reaches into arrays, the array of every value it
    /// reaches, nulls too: the elements an array-element index holds entries for (a null
    /// element's entry answers no query, and the stored layout keeps it).
    func reachedValue(in attributes: JSONObject) -> JSONValue? {
        if reachesIntoArrays {
            let reached = values(in: attributes)
            return reached.isEmpty ? nil : .array(reached)
        }
        var current = attributes[components[0]]
        for name in components.dropFirst() {
            guard case .object(let object)? = current else { return nil }
            current = object[name]
        }
        if case .null? = current { return nil }
        return current
    }

    /// The path written to reach into the elements of the array its first `step` names hold:
    /// `items.product` at 1 is `items[].product`.
    func reachingIntoArray(at step: Int) -> Field {
        Field(components: components[..<step].dropLast() + [components[step - 1] + "[]"] + components[step...])
    }

    /// The number of names of the path that reach, in `attributes`, a place holding an array
    /// before the path ends, by a name without `[]` (where the path cannot go on), or nil. A
    /// name with `[]` goes on in each element.
    func arrayOnTheWay(in attributes: JSONObject) -> Int? {
        guard components.count > 1 else { return nil }
        // `element`: the value is an element of an array a name with `[]` reached, where an
        // array is an element that is not an object (reached only by a path ending there).
        func search(_ value: JSONValue?, from step: Int, element: Bool = false) -> Int? {
            guard step < components.count else { return nil }
            switch value {
            case .object(let object)?:
                let name = components[step]
                guard Self.isArrayStep(name) else { return search(object[name], from: step + 1) }
                switch object[String(name.dropLast(2))] {
                case .array(let elements)?:
                    for value in elements { if let found = search(value, from: step + 1, element: true) { return found } }
                    return nil
                case let single: return search(single, from: step + 1)
                }
            case .array?: return element ? nil : step
            default: return nil
            }
        }
        return search(.object(attributes), from: 0)
    }

    /// Every value the path reaches in `attributes`: one at most for a plain path; for a path
    /// with `[]`, the values reached through each element of each array on the way (a value
    /// that is not an array is its own one element; an element that is not an object is
    /// reached only by a path that ends there).
    func values(in attributes: JSONObject) -> [JSONValue] {
        var reached: [JSONValue] = []
        collect(.object(attributes), from: 0, into: &reached)
        return reached
    }

    private func collect(_ value: JSONValue, from index: Int, into reached: inout [JSONValue]) {
        guard index < components.count else {
            reached.append(value)
            return
        }
        guard case .object(let object) = value else { return }
        let name = components[index]
        if Self.isArrayStep(name) {
            switch object[String(name.dropLast(2))] {
            case .array(let elements)?: for element in elements { collect(element, from: index + 1, into: &reached) }
            case let single?: collect(single, from: index + 1, into: &reached)  // a value that is not an array: its own one element
            case nil: return
            }
        } else if let next = object[name] {
            collect(next, from: index + 1, into: &reached)
        }
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
    ///
    /// Each key is one top-level attribute name, taken as written: a dot or `[]` in it is part of
    /// the name. Reach into nested objects and arrays with a ``Field`` path instead
    /// (`Field("items[].sku") == "p2"`).
    public init(equalities: JSONObject) {
        let nodes = equalities.map { Node.compare(Field(components: [$0.key]), .equal, $0.value) }
        self.node = nodes.isEmpty ? .always : nodes.count == 1 ? nodes[0] : .and(nodes)
    }

    /// Whether `object` satisfies the condition.
    public func matches(_ object: Object) -> Bool { Self.evaluate(node, object) }

    /// Whether `object` (of model `model`) satisfies the condition, refusing, as a query does, a
    /// dotted path that meets an array in it (`items.product` where `items` is an array: write
    /// `items[].product`). A server search's answer is held to the condition so.
    ///
    /// - Throws: ``SatchelError`` `.invalidArgument` naming the path to write.
    public func matches(_ object: Object, model: String) throws(SatchelError) -> Bool {
        try Self.refuseArrays(on: Self.dottedFields(node), in: object, model: model)
        return Self.evaluate(node, object)
    }

    public var description: String { Self.describe(node) }

    // MARK: - Evaluation

    /// The paths of more than one name that `node` compares.
    static func dottedFields(_ node: Node) -> [Field] {
        switch node {
        case .always: return []
        case .compare(let field, _, _), .oneOf(let field, _), .beginsWith(let field, _), .contains(let field, _), .exists(let field, _):
            return field.components.count > 1 ? [field] : []
        case .and(let nodes), .or(let nodes): return nodes.flatMap(dottedFields)
        case .not(let inner): return dottedFields(inner)
        }
    }

    /// Refuses a question whose path goes on, by a name without `[]`, past a place that holds
    /// an array in any object of the model (`statistics`): such a path reaches nothing there,
    /// and whoever asked meant the array's elements (`items[].product`, `a.b[].c`).
    /// Deterministic: whatever the plan, the indexes, the limit or the objects read.
    func refuseArrayCrossings(_ statistics: StoredStatistics, model: String) throws(SatchelError) {
        try Self.refuseArrayCrossings(of: Self.dottedFields(node), statistics, model: model)
    }

    /// ``refuseArrayCrossings(_:model:)`` for `fields`, whatever asks through them (a
    /// condition, an aggregate's function).
    static func refuseArrayCrossings(of fields: [Field], _ statistics: StoredStatistics, model: String) throws(SatchelError) {
        guard !statistics.arrays.isEmpty || !statistics.nestedArrays.isEmpty else { return }
        for field in fields where field.components.count > 1 {
            var path: [NameKey] = []
            for step in 1..<field.components.count {
                let name = field.components[step - 1]
                path.append(NameKey(name))
                if Field.isArrayStep(name) { continue }
                guard let count = step == 1 ? statistics.arrays[path[0]] : statistics.nestedArrays[path] else { continue }
                throw Self.arrayCrossing(
                    field, at: step, model: model, where: "\(count) object\(count == 1 ? "" : "s") hold\(count == 1 ? "s" : "") an array there")
            }
        }
    }

    private static func arrayCrossing(_ field: Field, at step: Int, model: String, where place: String) -> SatchelError {
        let meant = field.reachingIntoArray(at: step)
        return SatchelError(
            .invalidArgument,
            "the path '\(field)' meets an array at '\(field.components[..<step].joined(separator: "."))' (\(place)): write '\(meant)' to reach into its elements",
            model: model)
    }

    /// The paths of `node` an array may cross below their first name (`a.b.c`, `i[].b.c`),
    /// checked again on each object a query reads (``refuseArrays(on:in:model:)``): the model's
    /// statistics (``refuseArrayCrossings(_:model:)``) count the arrays of its objects as they
    /// are now, and a ``Snapshot`` reads them as they were.
    static func deepDottedFields(_ node: Node) -> [Field] { dottedFields(node).filter { $0.components.count > 2 } }

    /// Refuses a question whose dotted path meets an array in `object` before its end: such a
    /// path reaches nothing there, and whoever asked meant the array's elements (`items[]`).
    static func refuseArrays(on fields: [Field], in object: Object, model: String) throws(SatchelError) {
        for field in fields {
            guard let step = field.arrayOnTheWay(in: object.attributes) else { continue }
            throw arrayCrossing(field, at: step, model: model, where: "object '\(object.id)'")
        }
    }

    static func evaluate(_ node: Node, _ object: Object) -> Bool {
        switch node {
        case .always: return true
        case .compare(let field, let op, let operand):
            if field.reachesIntoArrays { return any(field, node, object) }
            guard let value = field.value(in: object) else { return false }
            return compare(value, op, operand)
        case .oneOf(let field, let values):
            if field.reachesIntoArrays { return any(field, node, object) }
            guard let value = field.value(in: object) else { return false }
            return values.contains(value)
        case .beginsWith(let field, let prefix):
            if field.reachesIntoArrays { return any(field, node, object) }
            guard case .string(let s)? = field.value(in: object) else { return false }
            return UTF8Order.hasPrefix(s, prefix)
        case .contains(let field, let operand):
            if field.reachesIntoArrays { return any(field, node, object) }
            return contains(field.value(in: object), operand)
        case .exists(let field, let present):
            if field.reachesIntoArrays { return field.values(in: object.attributes).contains { !$0.isNull } == present }
            return (field.value(in: object) != nil) == present
        case .and(let nodes): return nodes.allSatisfy { evaluate($0, object) }
        case .or(let nodes): return nodes.contains { evaluate($0, object) }
        case .not(let inner): return !evaluate(inner, object)
        }
    }

    /// Whether any value a path with `[]` reaches satisfies the comparison (a null reached is
    /// missing, as at the end of a dotted path).
    private static func any(_ field: Field, _ node: Node, _ object: Object) -> Bool {
        field.values(in: object.attributes).contains { !$0.isNull && matches(node, value: $0) }
    }

    /// Whether one value of a comparison's field satisfies it.
    private static func matches(_ node: Node, value: JSONValue) -> Bool {
        switch node {
        case .compare(_, let op, let operand): return compare(value, op, operand)
        case .oneOf(_, let values): return values.contains(value)
        case .beginsWith(_, let prefix):
            guard case .string(let s) = value else { return false }
            return UTF8Order.hasPrefix(s, prefix)
        case .contains(_, let operand): return contains(value, operand)
        case .exists(_, let present): return present
        case .always, .and, .or, .not: return false
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
    /// The field equals any of `values`, Swift values of any ``JSONValueConvertible`` type.
    public func isIn<S: Sequence>(_ values: S) -> Condition where S.Element: JSONValueConvertible { isIn(values.map(\.jsonValue)) }
    /// ``contains(_:)-(JSONValue)`` with a Swift value.
    public func contains<V: JSONValueConvertible>(_ value: V) -> Condition { contains(value.jsonValue) }
}

public func == (field: Field, value: JSONValue) -> Condition { Condition(.compare(field, .equal, value)) }
public func != (field: Field, value: JSONValue) -> Condition { Condition(.compare(field, .notEqual, value)) }
public func < (field: Field, value: JSONValue) -> Condition { Condition(.compare(field, .less, value)) }
public func <= (field: Field, value: JSONValue) -> Condition { Condition(.compare(field, .lessOrEqual, value)) }
public func > (field: Field, value: JSONValue) -> Condition { Condition(.compare(field, .greater, value)) }
public func >= (field: Field, value: JSONValue) -> Condition { Condition(.compare(field, .greaterOrEqual, value)) }

// The same with values of the app's variables (`"brand" == brand && "price" < maxPrice`): any
// ``JSONValueConvertible`` value, converted as ``JSONValueConvertible/jsonValue`` says.
public func == <V: JSONValueConvertible>(field: Field, value: V) -> Condition { field == value.jsonValue }
public func != <V: JSONValueConvertible>(field: Field, value: V) -> Condition { field != value.jsonValue }
public func < <V: JSONValueConvertible>(field: Field, value: V) -> Condition { field < value.jsonValue }
public func <= <V: JSONValueConvertible>(field: Field, value: V) -> Condition { field <= value.jsonValue }
public func > <V: JSONValueConvertible>(field: Field, value: V) -> Condition { field > value.jsonValue }
public func >= <V: JSONValueConvertible>(field: Field, value: V) -> Condition { field >= value.jsonValue }

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
