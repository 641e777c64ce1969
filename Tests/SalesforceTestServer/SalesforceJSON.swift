import Foundation

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
    static func parse(_ data: Data) -> JSON? {
        var reader = JSONReader(bytes: Array(data))
        guard let value = reader.value() else { return nil }
        reader.skipSpace()
        return reader.atEnd ? value : nil
    }

    /// Parses a string as JSON text.
    static func parse(_ text: String) -> JSON? { parse(Data(text.utf8)) }

    /// The value as compact JSON text, members in their order.
    var text: String {
        var out = ""
        write(to: &out)
        return out
    }

    /// The value as UTF-8 JSON text.
    var data: Data { Data(text.utf8) }

    private func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let value): out += value ? "true" : "false"
        case .int(let value): out += String(value)
        case .double(let value): out += Self.format(value)
        case .string(let value): Self.quote(value, into: &out)
        case .array(let values):
            out += "["
            for (index, value) in values.enumerated() {
                if index > 0 { out += "," }
                value.write(to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (index, key) in members.keys.enumerated() {
                if index > 0 { out += "," }
                Self.quote(key, into: &out)
                out += ":"
                members[key]!.write(to: &out)
            }
            out += "}"
        }
    }

    /// A decimal as Java prints a `double` in Salesforce's JSON: always with a fraction
    /// (`5000.0`); non-finite values (never stored) as `null`.
    private static func format(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        return value.description
    }

    private static func quote(_ text: String, into out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
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

/// A strict recursive-descent reader of JSON text.
private struct JSONReader {
    let bytes: [UInt8]
    var index = 0

    var atEnd: Bool { index == bytes.count }

    mutating func skipSpace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    mutating func value() -> JSON? {
        skipSpace()
        guard index < bytes.count else { return nil }
        switch bytes[index] {
        case UInt8(ascii: "{"): return object()
        case UInt8(ascii: "["): return array()
        case UInt8(ascii: "\""): return string().map(JSON.string)
        case UInt8(ascii: "t"): return literal("true", .bool(true))
        case UInt8(ascii: "f"): return literal("false", .bool(false))
        case UInt8(ascii: "n"): return literal("null", .null)
        default: return number()
        }
    }

    private mutating func literal(_ word: String, _ value: JSON) -> JSON? {
        let word = Array(word.utf8)
        guard bytes.count - index >= word.count, Array(bytes[index..<index + word.count]) == word else { return nil }
        index += word.count
        return value
    }

    private mutating func consume(_ byte: UInt8) -> Bool {
        skipSpace()
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    private mutating func object() -> JSON? {
        index += 1
        var members = JSONObject()
        if consume(UInt8(ascii: "}")) { return .object(members) }
        repeat {
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), let key = string(), consume(UInt8(ascii: ":")),
                  let value = value() else { return nil }
            members[key] = value
        } while consume(UInt8(ascii: ","))
        return consume(UInt8(ascii: "}")) ? .object(members) : nil
    }

    private mutating func array() -> JSON? {
        index += 1
        var values: [JSON] = []
        if consume(UInt8(ascii: "]")) { return .array(values) }
        repeat {
            guard let value = value() else { return nil }
            values.append(value)
        } while consume(UInt8(ascii: ","))
        return consume(UInt8(ascii: "]")) ? .array(values) : nil
    }

    private mutating func string() -> String? {
        index += 1
        var scalars = String.UnicodeScalarView()
        var run: [UInt8] = []
        func flush() {
            scalars.append(contentsOf: String(decoding: run, as: UTF8.self).unicodeScalars)
            run.removeAll()
        }
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                flush()
                return String(scalars)
            case UInt8(ascii: "\\"):
                flush()
                guard index < bytes.count else { return nil }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    guard var code = hex4() else { return nil }
                    if (0xD800..<0xDC00).contains(code), bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"),
                       bytes[index + 1] == UInt8(ascii: "u") {
                        index += 2
                        guard let low = hex4(), (0xDC00..<0xE000).contains(low) else { return nil }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    scalars.append(Unicode.Scalar(code) ?? "\u{FFFD}")
                default: return nil
                }
            case 0..<0x20: return nil
            default: run.append(byte)
            }
        }
        return nil
    }

    private mutating func hex4() -> UInt32? {
        guard bytes.count - index >= 4, let code = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16)
        else { return nil }
        index += 4
        return code
    }

    /// A number by JSON's grammar: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`; an integer
    /// when it has neither fraction nor exponent and fits 64 bits.
    private mutating func number() -> JSON? {
        let start = index
        var integral = true
        func digits() -> Int {
            let first = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            return index - first
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        let integer = index
        guard digits() > 0 else { return nil }
        if bytes[integer] == UInt8(ascii: "0"), index - integer > 1 { return nil }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            integral = false
            guard digits() > 0 else { return nil }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            integral = false
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { return nil }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if integral, let value = Int64(text) { return .int(value) }
        guard let value = Double(text), value.isFinite else { return nil }
        return .double(value)
    }
}
