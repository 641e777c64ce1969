public import Foundation

/// A Swift value that stands for a JSON value: what conditions (`"price" < maxPrice`),
/// attribute dictionaries (`update(id, with: ["price": newPrice])`) and `in` lists take, so that
/// app code passes its variables as they are.
///
/// Strings, numbers, `Bool`, `Date`, `Data`, `URL`, `UUID`, arrays and string-keyed dictionaries
/// of such values, and optionals of them (`nil` is null, which removes an attribute) conform,
/// as do ``JSONValue`` and ``JSONObject``. They convert as ``JSONValueEncoder`` encodes them: a
/// date as its ISO 8601 text with milliseconds, data as base64, a URL as its absolute string.
/// An `Encodable` type of the app's conforms by declaring it, with nothing to implement:
///
/// ```swift
/// enum Status: String, Codable, JSONValueConvertible { case draft, live }
/// try products.findAll(where: "status" == status && "price" < maxPrice)
/// ```
public protocol JSONValueConvertible {
    /// The value as JSON.
    var jsonValue: JSONValue { get }
}

extension JSONValueConvertible where Self: Encodable {
    /// The value as ``JSONValueEncoder`` encodes it (null for a value it cannot encode, such as
    /// a non-finite number).
    public var jsonValue: JSONValue { (try? JSONValueEncoder().encode(self)) ?? .null }
}

extension JSONValue: JSONValueConvertible {
    public var jsonValue: JSONValue { self }
}

extension JSONObject: JSONValueConvertible {
    public var jsonValue: JSONValue { .object(self) }
}

extension String: JSONValueConvertible {
    public var jsonValue: JSONValue { .string(self) }
}

extension Substring: JSONValueConvertible {
    public var jsonValue: JSONValue { .string(String(self)) }
}

extension Bool: JSONValueConvertible {
    public var jsonValue: JSONValue { .bool(self) }
}

extension Int: JSONValueConvertible {
    public var jsonValue: JSONValue { .int(Int64(self)) }
}

extension Int8: JSONValueConvertible {
    public var jsonValue: JSONValue { .int(Int64(self)) }
}

extension Int16: JSONValueConvertible {
    public var jsonValue: JSONValue { .int(Int64(self)) }
}

extension Int32: JSONValueConvertible {
    public var jsonValue: JSONValue { .int(Int64(self)) }
}

extension Int64: JSONValueConvertible {
    public var jsonValue: JSONValue { .int(self) }
}

extension UInt8: JSONValueConvertible {
    public var jsonValue: JSONValue { .int(Int64(self)) }
}

extension UInt16: JSONValueConvertible {
    public var jsonValue: JSONValue { .int(Int64(self)) }
}

extension UInt32: JSONValueConvertible {
    public var jsonValue: JSONValue { .int(Int64(self)) }
}

extension UInt: JSONValueConvertible {
    /// An integer beyond `Int64.max` becomes the nearest double, as JSON text of it would.
    public var jsonValue: JSONValue { Int64(exactly: self).map(JSONValue.int) ?? .double(Double(self)) }
}

extension UInt64: JSONValueConvertible {
    /// An integer beyond `Int64.max` becomes the nearest double, as JSON text of it would.
    public var jsonValue: JSONValue { Int64(exactly: self).map(JSONValue.int) ?? .double(Double(self)) }
}

extension Double: JSONValueConvertible {
    public var jsonValue: JSONValue { .double(self) }
}

extension Float: JSONValueConvertible {
    public var jsonValue: JSONValue { .double(Double(self)) }
}

extension Date: JSONValueConvertible {
    public var jsonValue: JSONValue { .string(CodableDates.format(self)) }
}

extension Data: JSONValueConvertible {
    public var jsonValue: JSONValue { .string(base64EncodedString()) }
}

extension URL: JSONValueConvertible {
    public var jsonValue: JSONValue { .string(absoluteString) }
}

extension UUID: JSONValueConvertible {
    public var jsonValue: JSONValue { .string(uuidString) }
}

extension Optional: JSONValueConvertible where Wrapped: JSONValueConvertible {
    /// `nil` is null: written to an attribute, it removes it.
    public var jsonValue: JSONValue { map(\.jsonValue) ?? .null }
}

extension Array: JSONValueConvertible where Element: JSONValueConvertible {
    public var jsonValue: JSONValue { .array(map(\.jsonValue)) }
}

extension Dictionary: JSONValueConvertible where Key == String, Value: JSONValueConvertible {
    public var jsonValue: JSONValue { .object(JSONObject(map { ($0.key, $0.value.jsonValue) })) }
}

extension JSONObject {
    /// The attributes of a dictionary of Swift values (``JSONValueConvertible``).
    public init(converting attributes: [String: any JSONValueConvertible]) {
        self.init(attributes.map { ($0.key, $0.value.jsonValue) })
    }
}
