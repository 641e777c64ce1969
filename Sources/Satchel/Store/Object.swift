/// One object of a model: its id and its attributes.
///
/// The id is RhoConnect's `object` attribute. It is kept apart from ``attributes`` (which never
/// contain `object`) and added back by ``json``, the form the CLI prints.
///
/// ```swift
/// let widget = try products.create(["name": "Widget", "price": 9.5])
/// print(widget.id, widget["price"] ?? .null)
/// ```
///
/// `Object` is a `Sendable` value type.
public struct Object: Sendable, Hashable, CustomStringConvertible {
    /// The reserved attribute name that holds the object id.
    public static let idAttribute = "object"

    /// The object id.
    public let id: String
    /// The attributes, without the id. Never contains explicit nulls.
    public var attributes: JSONObject

    public init(id: String, attributes: JSONObject) {
        self.id = id
        var attributes = attributes
        attributes[Object.idAttribute] = nil
        self.attributes = attributes
    }

    /// An object from stored attributes, which never hold the id.
    init(id: String, storedAttributes: JSONObject) {
        self.id = id
        self.attributes = storedAttributes
    }

    /// The value of attribute `name`.
    public subscript(name: String) -> JSONValue? {
        get { attributes[name] }
        set { attributes[name] = newValue }
    }

    /// The object as JSON: its attributes plus the id under `object`.
    public var json: JSONObject {
        var object = attributes
        object[Object.idAttribute] = .string(id)
        return object
    }

    /// The object as compact JSON text with sorted keys, e.g. `{"name":"Widget","object":"p1"}`.
    public var description: String { json.description }

    public static func == (a: Object, b: Object) -> Bool { UTF8Order.equal(a.id, b.id) && a.attributes == b.attributes }

    public func hash(into hasher: inout Hasher) {
        UTF8Order.hash(id, into: &hasher)
        hasher.combine(attributes)
    }
}
