import Foundation

/// A Swift type whose values are stored as objects of one model: the app works with its own
/// types over Satchel's property bags.
///
/// ```swift
/// struct Product: ModelRecord {
///     static let modelName = "Product"
///     var id: String            // the object id (`object`), by default the property named `id`
///     var name: String
///     var price: Double?        // nil removes the attribute when saved (the null rule)
/// }
/// let products = try store.model(for: Product.self)
/// try products.save(Product(id: "p1", name: "Lamp", price: 12))
/// let lamp = try products.find("p1", as: Product.self)
/// ```
///
/// Values are encoded by ``JSONValueEncoder`` and decoded by ``JSONValueDecoder``. Saving merges
/// per attribute: the attributes the type declares are written (an `Optional` that is `nil`
/// removes its attribute), and the others the object holds stay — a property bag keeps what a
/// type does not know.
public protocol ModelRecord: Codable {
    /// The model the type's values are stored in.
    static var modelName: String { get }
    /// The coding key of the property holding the object id, a `String` (default `"id"`). It is
    /// the object's id, not an attribute.
    static var idKey: String { get }
}

extension ModelRecord {
    public static var idKey: String { "id" }
}

extension Store {
    /// The model `T`'s values are stored in (registered as a property bag when new).
    public func model<T: ModelRecord>(for type: T.Type) throws -> Model { try model(T.modelName) }
}

extension Model {
    /// Object `id` as a `T`, or nil when there is none.
    ///
    /// - Throws: ``SatchelError`` `.invalidObject` when the object does not decode as a `T`,
    ///   naming the model, the object id and the attribute path.
    public func find<T: ModelRecord>(_ id: String, as type: T.Type) throws -> T? {
        try find(id).map { try Self.decode($0, as: type, model: name) }
    }

    /// The objects `query` selects, as `T`s, in its order.
    public func findAll<T: ModelRecord>(_ query: Query = Query(), as type: T.Type) throws -> [T] {
        try findAll(query).map { try Self.decode($0, as: type, model: name) }
    }

    /// The objects matching `condition`, as `T`s.
    public func findAll<T: ModelRecord>(
        where condition: Condition, order: [SortKey] = [], limit: Int? = nil, offset: Int = 0, as type: T.Type
    ) throws -> [T] {
        try findAll(Query(where: condition, order: order, limit: limit, offset: offset), as: type)
    }

    /// The first object matching `condition` in `order`, as a `T`.
    public func findFirst<T: ModelRecord>(where condition: Condition, order: [SortKey] = [], as type: T.Type) throws -> T? {
        try findAll(Query(where: condition, order: order, limit: 1), as: type).first
    }

    /// Saves `value` as the object with its id, in one transaction: created when missing, else
    /// updated per attribute (the type's attributes written, a `nil` one removed, the object's
    /// other attributes kept). Logged for sync like any write.
    ///
    /// - Returns: the object as stored, as a `T` (nil when the null rule deleted it).
    /// - Throws: ``SatchelError`` `.invalidObject` when the id property is not a non-empty
    ///   string, `.schemaViolation` from a fixed-schema or choices check, or what a write throws.
    @discardableResult
    public func save<T: ModelRecord>(_ value: T) throws -> T? {
        let (id, attributes) = try Self.encode(value, model: name)
        let stored = try store.bulkUpdate { tx -> Object? in
            if try tx.find(id, in: self) == nil {
                var created = attributes.removingNulls()
                created[Object.idAttribute] = .string(id)
                return created.count > 1 ? try tx.create(created, in: self) : nil
            }
            return try tx.update(id, with: attributes, in: self)
        }
        return try stored.map { try Self.decode($0, as: T.self, model: name) }
    }

    /// Deletes `value`'s object; false when there was none.
    @discardableResult
    public func delete<T: ModelRecord>(_ value: T) throws -> Bool { try delete(try Self.encode(value, model: name).id) }

    // MARK: - Mapping

    static func decode<T: ModelRecord>(_ object: Object, as type: T.Type, model: String) throws -> T {
        var json = object.attributes
        json[T.idKey] = .string(object.id)
        do {
            return try JSONValueDecoder().decode(type, from: .object(json))
        } catch let error as DecodingError {
            throw SatchelError(
                .invalidObject, "object '\(object.id)' of model '\(model)' is not a \(type): \(Self.describe(error))", model: model,
                objectID: object.id)
        }
    }

    static func encode<T: ModelRecord>(_ value: T, model: String) throws -> (id: String, attributes: JSONObject) {
        let encoded: JSONValue
        do {
            encoded = try JSONValueEncoder().encode(value)
        } catch let error as EncodingError {
            throw SatchelError(.invalidObject, "a \(T.self) does not encode for model '\(model)': \(error)", model: model)
        }
        guard case .object(var attributes) = encoded else {
            throw SatchelError(.invalidObject, "a \(T.self) encodes as \(encoded.kindName), not an object", model: model)
        }
        guard let id = attributes.removeValue(forKey: T.idKey)?.stringValue, !id.isEmpty else {
            throw SatchelError(.invalidObject, "the id property '\(T.idKey)' of a \(T.self) must be a non-empty string", model: model)
        }
        attributes.removeValue(forKey: Object.idAttribute)
        return (id, attributes)
    }

    /// A decoding error in one line: the attribute path, then what went wrong.
    static func describe(_ error: DecodingError) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            keys.map(\.stringValue).joined(separator: ".").replacingOccurrences(of: ".[", with: "[")
        }
        switch error {
        case .typeMismatch(_, let context), .dataCorrupted(let context):
            return "attribute '\(path(context.codingPath))': \(context.debugDescription)"
        case .valueNotFound(_, let context):
            return "attribute '\(path(context.codingPath))' is missing"
        case .keyNotFound(let key, let context):
            return "attribute '\(path(context.codingPath + [key]))' is missing"
        @unknown default:
            return "\(error)"
        }
    }
}
