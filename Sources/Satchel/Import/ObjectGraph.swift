/// A nested JSON object graph decomposed into flat objects of several models (CRParse's object
/// graphs): each nested object that names its class and its id becomes an object of that class's
/// model, and its parent keeps only its id.
///
/// ```swift
/// let graph = try ObjectGraph.decompose([
///     "id": "o1", "total": 30,
///     "customer": ["class": "Customer", "id": "c1", "name": "Ann"],
///     "items": [["className": "Product", "objectId": "p1", "name": "Lamp"]],
/// ], model: "Order")
/// // graph.objects["Order"]?["o1"]       == ["customer": "c1", "items": ["p1"], "total": 30]
/// // graph.objects["Customer"]?["c1"]    == ["name": "Ann"]
/// // graph.associations["Order"]         == ["customer": "Customer", "items": "Product"]
/// try store.importGraph(graph)
/// ```
///
/// What names a class and an id:
///
/// - **The class**: `className`, else `class`, holding a non-empty string (an empty one is an
///   ``SatchelError/Code/invalidName`` error). With Parse's `__type`, only `"Object"` and
///   `"Pointer"` objects name a class (through `className`); any other `__type` (`Date`, `File`,
///   `Relation`, …) is a value, kept as it is. A class key holding anything but a string names
///   nothing and stays an attribute.
/// - **The id**: the first non-null of `object` (``Object/idAttribute``), `objectId` and `id`.
///   A string is the id as it is; an integer is the id as its decimal text (`42` → `"42"`); any
///   other value is an ``SatchelError/Code/invalidObject`` error, as is an empty string.
///
/// The class key and the id key used are not kept as attributes, nor is `__type`; another class
/// or id key is dropped when it says the same, and kept as an attribute when it says something
/// else (a Parse object with both `objectId` and an `id` column keeps the column). `object` is
/// never an attribute.
///
/// `ObjectGraph` is a `Sendable` value type; ``decompose(_:model:makeID:)`` reads and writes
/// nothing, and `Store.importGraph(_:)` stores the result.
public struct ObjectGraph: Sendable, Hashable {
    /// model → object id → attributes. An object that appears more than once is merged: later
    /// appearances override earlier ones per attribute (an object counts before the objects nested
    /// in it). The class and id keys are not kept. An object that carried no attribute but its
    /// class and id (a reference) has empty attributes here.
    public var objects: [String: [String: JSONObject]]
    /// model → attribute → the model it points to: each attribute that held a nested object
    /// (to-one: now its id) or an array of them (to-many: now the array of their ids).
    public var associations: [String: [String: String]]
    /// The ids of the top-level objects, in order, one per top-level item (an object given twice
    /// is listed twice). Each is an object of the model ``decompose(_:model:makeID:)`` was given,
    /// unless the item named another class.
    public var roots: [String]

    /// An empty graph.
    public init() {
        objects = [:]
        associations = [:]
        roots = []
    }

    /// Decomposes `value`: one object, or an array of objects.
    ///
    /// A top-level object goes to `model` unless it names its class, under its id, or under
    /// `makeID()` when it has none. A nested object (an attribute's value, or an element of an
    /// attribute's array) that names its class and its id goes to the model of that class under
    /// that id, and its parent keeps its id instead (to-one); an array whose elements all name a
    /// class and an id becomes the array of their ids (to-many); the attribute becomes an
    /// association of the parent's model. This goes on recursively. A nested object lacking a
    /// class or an id stays as nested JSON, untouched. An object may appear more than once — the
    /// same product in two orders, or a cycle by id (A → B → A) — and its appearances merge.
    ///
    /// - Parameters:
    ///   - value: the graph.
    ///   - model: the model of top-level objects that name no class.
    ///   - makeID: the id of a top-level object that has none (default ``ObjectID/generate()``).
    /// - Throws: ``SatchelError`` `.invalidObject` for a top-level item that is not an object, a
    ///   top-level object with neither an id nor a non-null attribute, a bad id, or an array that
    ///   mixes objects with a class and an id with other values or classes; `.invalidName` for an
    ///   empty model or class name; `.modelConflict` when an attribute of one model points to two
    ///   classes. Each message names the item.
    public static func decompose(
        _ value: JSONValue, model: String, makeID: () -> String = { ObjectID.generate() }
    ) throws(SatchelError) -> ObjectGraph {
        var graph = ObjectGraph()
        switch value {
        case .object(let object):
            try within("the top-level object") { () throws(SatchelError) in try graph.add(object, model: model, makeID: makeID) }
        case .array(let items):
            for (index, item) in items.enumerated() {
                guard case .object(let object) = item else {
                    throw SatchelError(.invalidObject, "item \(index + 1): expected a JSON object, got \(item.kindName)", model: model)
                }
                try within("item \(index + 1)") { () throws(SatchelError) in try graph.add(object, model: model, makeID: makeID) }
            }
        default:
            throw SatchelError(.invalidObject, "expected a JSON object or an array of objects, got \(value.kindName)", model: model)
        }
        return graph
    }

    // MARK: - Building

    /// Adds one top-level object: to `model` unless it names its class.
    mutating func add(_ object: JSONObject, model: String, makeID: () -> String) throws(SatchelError) {
        let (named, attributes) = try Self.split(object, needsClass: false)
        let model = named.model ?? model
        let id: String
        if let given = named.id {
            id = given
        } else {
            guard attributes.contains(where: { !$0.value.isNull }) else {
                throw SatchelError(.invalidObject, "an object without an id needs at least one non-null attribute", model: model)
            }
            id = makeID()
        }
        roots.append(id)
        try visit(Node(model: model, id: id, attributes: attributes), depth: 1)
    }

    /// One object of the graph: its model, its id, and its attributes as given (nested objects
    /// still in place).
    private struct Node {
        var model: String
        var id: String
        var attributes: JSONObject
    }

    /// Merges the attributes of `node`, its nested objects replaced by their ids, then visits
    /// those nested objects: they come after their parent, so their attributes win.
    private mutating func visit(_ node: Node, depth: Int) throws(SatchelError) {
        guard depth <= JSONValue.maxDepth else {
            throw SatchelError(
                .malformedJSON, "the graph nests deeper than \(JSONValue.maxDepth) objects", model: node.model, objectID: node.id)
        }
        var flat = node.attributes
        var nested: [Node] = []
        for (attribute, value) in node.attributes {
            let place = "\(node.model) '\(node.id)', attribute '\(attribute)'"
            switch value {
            case .object(let object):
                guard let child = try Self.node(object, at: place) else { continue }
                try associate(node.model, attribute, child.model, at: place)
                flat[attribute] = .string(child.id)
                nested.append(child)
            case .array(let elements):
                var children: [Node] = []
                for case .object(let object) in elements {
                    if let child = try Self.node(object, at: place) { children.append(child) }
                }
                guard let target = children.first?.model else { continue }
                guard children.count == elements.count else {
                    throw SatchelError(
                        .invalidObject, "\(place): an array mixes objects that name a class and an id with other values",
                        model: node.model, objectID: node.id)
                }
                if let other = children.first(where: { !UTF8Order.equal($0.model, target) }) {
                    throw SatchelError(
                        .invalidObject, "\(place): an array holds objects of two classes, '\(target)' and '\(other.model)'",
                        model: node.model, objectID: node.id)
                }
                try associate(node.model, attribute, target, at: place)
                flat[attribute] = .array(children.map { .string($0.id) })
                nested += children
            default:
                continue
            }
        }
        objects[node.model, default: [:]][node.id, default: JSONObject()].merge(flat)
        for child in nested { try visit(child, depth: depth + 1) }
    }

    /// Records that `attribute` of `model` points to `target`.
    private mutating func associate(_ model: String, _ attribute: String, _ target: String, at place: String) throws(SatchelError) {
        if let known = associations[model]?[attribute] {
            guard UTF8Order.equal(known, target) else {
                throw SatchelError(.modelConflict, "\(place): the attribute points to both '\(known)' and '\(target)'", model: model)
            }
            return
        }
        associations[model, default: [:]][attribute] = target
    }

    // MARK: - Class and id

    /// The class and id keys, in the order they are looked for.
    static let classKeys = ["className", "class"]
    static let idKeys = [Object.idAttribute, "objectId", "id"]

    /// A nested object as a node of the graph, or nil when it lacks a class or an id (it then
    /// stays nested JSON).
    private static func node(_ object: JSONObject, at place: String) throws(SatchelError) -> Node? {
        let named: (model: String?, id: String?)
        let attributes: JSONObject
        do {
            (named, attributes) = try split(object, needsClass: true)
        } catch {
            throw SatchelError(error.code, "\(place): \(error.message)", model: error.model, objectID: error.objectID)
        }
        guard let model = named.model, let id = named.id else { return nil }
        return Node(model: model, id: id, attributes: attributes)
    }

    /// The class and id `object` names, and its other members. With `needsClass`, an object that
    /// names no class is returned whole, its id keys unread: it is plain JSON.
    static func split(_ object: JSONObject, needsClass: Bool) throws(SatchelError) -> ((model: String?, id: String?), JSONObject) {
        var rest = object
        var model: String?
        let type = object["__type"]
        let typed = type?.stringValue == "Object" || type?.stringValue == "Pointer"
        if type == nil || typed {
            for key in typed ? ["className"] : classKeys {
                guard case .string(let name)? = object[key] else { continue }
                guard !name.isEmpty else { throw SatchelError(.invalidName, "a class name ('\(key)') cannot be empty") }
                model = name
                for other in classKeys where other == key || rest[other]?.stringValue.map({ UTF8Order.equal($0, name) }) == true {
                    rest[other] = nil
                }
                if typed { rest["__type"] = nil }
                break
            }
        }
        if needsClass && model == nil { return ((nil, nil), object) }
        var id: String?
        if let key = idKeys.first(where: { object[$0].map { !$0.isNull } ?? false }), let value = object[key] {
            let given = try Self.id(value, key: key)
            id = given
            for other in idKeys {
                guard let value = rest[other] else { continue }
                if other == key || (try? Self.id(value, key: other)).map({ UTF8Order.equal($0, given) }) == true { rest[other] = nil }
            }
        }
        rest[Object.idAttribute] = nil
        return ((model, id), rest)
    }

    /// The id an id key holds: a non-empty string, or an integer as its decimal text.
    private static func id(_ value: JSONValue, key: String) throws(SatchelError) -> String {
        switch value {
        case .string(let id) where !id.isEmpty: return id
        case .string: throw SatchelError(.invalidObject, "the id ('\(key)') cannot be empty")
        case .int(let n): return String(n)
        case .double(let d):
            guard let n = JSONNumber.exactInt64(d) else {
                throw SatchelError(.invalidObject, "the id ('\(key)') must be a string or an integer, got \(value)")
            }
            return String(n)
        default: throw SatchelError(.invalidObject, "the id ('\(key)') must be a string or an integer, got \(value.kindName)")
        }
    }

    /// Runs `body`, prefixing its error's message with `label`.
    static func within(_ label: String, _ body: () throws(SatchelError) -> Void) throws(SatchelError) {
        do { try body() } catch { throw SatchelError(error.code, "\(label): \(error.message)", model: error.model, objectID: error.objectID) }
    }
}

extension JSONObject {
    /// Sets every member of `other` (explicit nulls included) over this object's.
    mutating func merge(_ other: JSONObject) {
        if isEmpty {
            self = other
            return
        }
        for (name, value) in other { self[name] = value }
    }
}
