import Foundation
import LoopbackSupport

/// A JSON value as the loopback Salesforce reads and writes it.
///
/// Salesforce's JSON is Java's: integers and decimals are distinct (`int` fields print `12`,
/// `double` and `currency` fields `12.0`), and objects keep their members in the order they were
/// written — `attributes` first, then the fields in `SELECT` order. So numbers keep whether they
/// were integers, and ``JSONObject`` remembers its key order.
///
/// ``JSON/parse(_:)`` is strict: no trailing commas, no comments, no `NaN`; anything else is
/// `nil` (the server's `JSON_PARSER_ERROR`).
indirect enum JSON: Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object(JSONObject)

    // MARK: - Access

    var string: String? { if case .string(let value) = self { value } else { nil } }
    var bool: Bool? { if case .bool(let value) = self { value } else { nil } }
    var array: [JSON]? { if case .array(let value) = self { value } else { nil } }
    var object: JSONObject? { if case .object(let value) = self { value } else { nil } }
    var isNull: Bool { if case .null = self { true } else { false } }

    /// The value as a number, whether it was written as an integer or not.
    var number: Double? {
        switch self {
        case .int(let value): Double(value)
        case .double(let value): value
        default: nil
        }
    }

    /// The member `key` of an object (nil for other values or a missing member).
    subscript(key: String) -> JSON? { object?[key] }

    // MARK: - Text

    /// Parses JSON text (any value at the top); nil when malformed.
    static func parse(_ data: Data) -> JSON? { JSONText.parse(data, as: JSON.self) }

    /// Parses a string as JSON text.
    static func parse(_ text: String) -> JSON? { parse(Data(text.utf8)) }

    /// Compact JSON text, members in their order.
    var shape: JSONShape<JSON> {
        switch self {
        case .null: .null
        case .bool(let value): .bool(value)
        case .int(let value): .number(String(value))
        case .double(let value): .number(Self.format(value))
        case .string(let value): .string(value)
        case .array(let values): .array(values)
        case .object(let members): .object(members.keys.map { ($0, members[$0]!) })
        }
    }

    /// A decimal as Java prints a `double` in Salesforce's JSON: always with a fraction
    /// (`5000.0`); non-finite values (never stored) as `null`.
    private static func format(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        return value.description
    }

}

extension JSON: Equatable {
    /// Equality as a validation rule compares values: numbers by value (`12` equals `12.0`),
    /// objects whatever their members' order.
    static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a == b
        default:
            if let a = lhs.number, let b = rhs.number { a == b } else { false }
        }
    }
}

/// A JSON object that keeps its members in insertion order (a member set again keeps its place).
struct JSONObject: Sendable, Equatable, ExpressibleByDictionaryLiteral {
    private(set) var keys: [String] = []
    private var values: [String: JSON] = [:]

    init() {}

    init(dictionaryLiteral elements: (String, JSON)...) {
        for (key, value) in elements { self[key] = value }
    }

    /// The members in order.
    var members: [(key: String, value: JSON)] { keys.map { ($0, values[$0]!) } }

    var isEmpty: Bool { keys.isEmpty }

    subscript(key: String) -> JSON? {
        get { values[key] }
        set {
            if let newValue {
                if values.updateValue(newValue, forKey: key) == nil { keys.append(key) }
            } else if values.removeValue(forKey: key) != nil {
                keys.removeAll { $0 == key }
            }
        }
    }

    static func == (lhs: JSONObject, rhs: JSONObject) -> Bool { lhs.values == rhs.values }
}

extension JSON: JSONBuilding, JSONWriting {
    /// An integer when it has neither fraction nor exponent and fits 64 bits; a double otherwise.
    static func number(_ text: String, integral: Bool) -> JSON? {
        if integral, let value = Int64(text) { return .int(value) }
        guard let value = Double(text), value.isFinite else { return nil }
        return .double(value)
    }

    static func object(_ members: [(String, JSON)]) -> JSON {
        var object = JSONObject()
        for (key, value) in members { object[key] = value }
        return .object(object)
    }
}
