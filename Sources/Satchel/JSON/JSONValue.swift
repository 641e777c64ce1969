/// A JSON value: what an attribute of a Satchel object holds.
///
/// Integers are exact to 64 bits (`.int`); other numbers are doubles (`.double`). Strings are
/// compared by their Unicode scalars (UTF-8 bytes), never by Swift's canonical equivalence, so
/// `"café"` in NFC and `"cafe\u{301}"` are two different values, as they are in the store.
///
/// Equality follows Satchel's query semantics: numbers compare numerically and exactly
/// (`.int(1) == .double(1.0)`, but `9007199254740993 != 9007199254740992.0`, and `-0.0 == 0`);
/// booleans are not numbers; arrays and objects compare element by element. Use
/// ``isIdentical(to:)`` to tell `1` from `1.0`.
///
/// Values are built with literals:
///
/// ```swift
/// let value: JSONValue = ["name": "Widget", "price": 9.5, "tags": ["a", "b"], "discontinued": .null]
/// ```
///
/// `JSONValue` is deliberately not `ExpressibleByNilLiteral`: `nil` always means "absent" (as in
/// `attributes["price"] = nil`), and `.null` is the JSON null that removes an attribute in a write.
/// ```swift
/// ```
///
/// `JSONValue` is a `Sendable` value type.
public enum JSONValue: Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)
}

// MARK: - Accessors

extension JSONValue {
    /// The string, when this is a string.
    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    /// The integer, when this is an integer or a double with an exact integer value.
    public var intValue: Int64? {
        switch self {
        case .int(let i): i
        case .double(let d): JSONNumber.exactInt64(d)
        default: nil
        }
    }
    /// The number as a double (possibly rounded, for large integers), when this is a number.
    public var doubleValue: Double? {
        switch self {
        case .int(let i): Double(i)
        case .double(let d): d
        default: nil
        }
    }
    /// The boolean, when this is a boolean.
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
    /// The elements, when this is an array.
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    /// The members, when this is an object.
    public var objectValue: JSONObject? { if case .object(let o) = self { o } else { nil } }
    /// Whether this is `null`.
    public var isNull: Bool { if case .null = self { true } else { false } }
    /// Whether this is a number (integer or double).
    public var isNumber: Bool {
        switch self {
        case .int, .double: true
        default: false
        }
    }

    /// The member named `key`, when this is an object that has it.
    public subscript(key: String) -> JSONValue? { objectValue?[key] }

    /// Whether the two values are the same JSON text: like `==`, but an integer is never identical
    /// to a double (`1` is not identical to `1.0`).
    public func isIdentical(to other: JSONValue) -> Bool {
        switch (self, other) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.int(let a), .int(let b)): a == b
        case (.double(let a), .double(let b)): a == b && a.sign == b.sign
        case (.string(let a), .string(let b)): UTF8Order.equal(a, b)
        case (.array(let a), .array(let b)): a.count == b.count && zip(a, b).allSatisfy { $0.isIdentical(to: $1) }
        case (.object(let a), .object(let b)): a.isIdentical(to: b)
        default: false
        }
    }

    /// How deeply arrays and objects nest in this value (a scalar is 0, `[]` is 1).
    public var depth: Int {
        switch self {
        case .array(let a): 1 + (a.lazy.map(\.depth).max() ?? 0)
        case .object(let o): 1 + (o.lazy.map(\.value.depth).max() ?? 0)
        default: 0
        }
    }
}

// MARK: - Equality and hashing

extension JSONValue: Hashable {
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.int(let a), .int(let b)): a == b
        case (.double(let a), .double(let b)): a == b
        case (.int(let a), .double(let b)), (.double(let b), .int(let a)): JSONNumber.exactInt64(b) == a
        case (.string(let a), .string(let b)): UTF8Order.equal(a, b)
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a == b
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0 as UInt8)
        case .bool(let b):
            hasher.combine(1 as UInt8)
            hasher.combine(b)
        case .int(let i):
            hasher.combine(2 as UInt8)
            hasher.combine(i)
        case .double(let d):
            // Equal numbers hash alike: a double with an exact Int64 value hashes as that integer.
            hasher.combine(2 as UInt8)
            if let i = JSONNumber.exactInt64(d) { hasher.combine(i) } else { hasher.combine(d) }
        case .string(let s):
            hasher.combine(3 as UInt8)
            UTF8Order.hash(s, into: &hasher)
        case .array(let a):
            hasher.combine(4 as UInt8)
            hasher.combine(a)
        case .object(let o):
            hasher.combine(5 as UInt8)
            hasher.combine(o)
        }
    }
}

// MARK: - Literals

extension JSONValue: ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(JSONObject(elements)) }
}

// MARK: - Text

extension JSONValue: CustomStringConvertible {
    /// The value as compact JSON text.
    public var description: String { String(decoding: JSONWriter.encode(self), as: UTF8.self) }
}

/// Exact conversions between the two number representations.
enum JSONNumber {
    /// The Int64 equal to `d`, when `d` is integral and in range; -0.0 gives 0.
    @inline(__always)
    static func exactInt64(_ d: Double) -> Int64? {
        // 2^63 itself is out of range; every double below it and at or above -2^63 converts exactly
        // when integral.
        guard d >= -9_223_372_036_854_775_808.0, d < 9_223_372_036_854_775_808.0, d == d.rounded(.towardZero)
        else { return nil }
        return Int64(d)
    }
}
