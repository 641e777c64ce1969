import Foundation
import LoopbackSupport

/// A JSON value as Parse Server reads and writes it: numbers are doubles (Parse is JavaScript),
/// objects are unordered and serialize with sorted keys, so every answer is deterministic.
///
/// ``JSON/parse(_:)`` is strict, as `JSON.parse` is: no trailing commas, no comments, no
/// `NaN`; anything else is `nil` (the server's `107 Invalid JSON`).
indirect enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSON])
    case object([String: JSON])

    // MARK: - Access

    var string: String? { if case .string(let value) = self { value } else { nil } }
    var number: Double? { if case .number(let value) = self { value } else { nil } }
    var bool: Bool? { if case .bool(let value) = self { value } else { nil } }
    var array: [JSON]? { if case .array(let value) = self { value } else { nil } }
    var object: [String: JSON]? { if case .object(let value) = self { value } else { nil } }

    /// The member `key` of an object (nil for other values).
    subscript(key: String) -> JSON? { object?[key] }

    /// The value's `__type` (`Date`, `Pointer`, `File`, …) when it is one of Parse's wrappers.
    var parseType: String? { self["__type"]?.string }

    /// Whether JavaScript would take the value as true (`count=1`, `count=true`, …).
    var isTruthy: Bool {
        switch self {
        case .null: false
        case .bool(let value): value
        case .number(let value): value != 0 && !value.isNaN
        case .string(let value): !value.isEmpty
        case .array, .object: true
        }
    }

    // MARK: - Text

    /// Parses JSON text (any value at the top, as `JSON.parse` allows); nil when malformed.
    static func parse(_ data: Data) -> JSON? { JSONText.parse(data, as: JSON.self) }

    /// Parses a string as JSON text.
    static func parse(_ text: String) -> JSON? { parse(Data(text.utf8)) }

    /// Compact JSON text with sorted keys: every answer is deterministic.
    var shape: JSONShape<JSON> {
        switch self {
        case .null: .null
        case .bool(let value): .bool(value)
        case .number(let value): .number(Self.format(value))
        case .string(let value): .string(value)
        case .array(let values): .array(values)
        case .object(let members): .object(members.keys.sorted().map { ($0, members[$0]!) })
        }
    }

    /// A number as JavaScript prints it: integers without a fraction.
    private static func format(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        if value == value.rounded(), abs(value) < 9_007_199_254_740_992 { return String(Int64(value)) }
        return value.description
    }

}

extension JSON: JSONBuilding, JSONWriting {
    static func number(_ text: String, integral: Bool) -> JSON? {
        guard let value = Double(text), value.isFinite else { return nil }
        return .number(value)
    }

    static func object(_ members: [(String, JSON)]) -> JSON { .object(Dictionary(members, uniquingKeysWith: { _, last in last })) }
}
