package import Foundation

/// What ``JSONText`` builds values of: each loopback server's own JSON type (Parse's, whose
/// numbers are all doubles, as JavaScript's are; Salesforce's, which tells integers from
/// decimals and keeps members in order).
package protocol JSONBuilding {
    static var null: Self { get }
    static func bool(_ value: Bool) -> Self
    /// A number, from its literal text (already checked against JSON's grammar); nil when the
    /// type cannot hold it.
    static func number(_ text: String, integral: Bool) -> Self?
    static func string(_ value: String) -> Self
    static func array(_ values: [Self]) -> Self
    /// An object, its members in the order the text gives them (a later duplicate key wins).
    static func object(_ members: [(String, Self)]) -> Self
}

/// A JSON value's shape, as ``JSONText/write(_:into:)`` writes it: each loopback server's JSON
/// type gives its own numbers' text (JavaScript's for Parse, Java's for Salesforce) and its
/// objects' member order (sorted for Parse, as written for Salesforce).
package enum JSONShape<Value> {
    case null
    case bool(Bool)
    /// A number, as its text.
    case number(String)
    case string(String)
    case array([Value])
    case object([(String, Value)])
}

/// What ``JSONText`` writes: each loopback server's own JSON type.
package protocol JSONWriting {
    var shape: JSONShape<Self> { get }
}

extension JSONWriting {
    /// The value as compact JSON text.
    package var text: String {
        var out = ""
        JSONText.write(self, into: &out)
        return out
    }

    /// The value as UTF-8 JSON text.
    package var data: Data { Data(text.utf8) }
}

/// JSON text for the loopback test servers: a strict reader (no trailing commas, no comments, no
/// `NaN`, nothing after the value) and the quoting of strings. The servers share it; the
/// adapters they test use Satchel's own codec, never this.
package enum JSONText {
    /// Parses JSON text (any value at the top); nil when it is malformed.
    package static func parse<Value: JSONBuilding>(_ data: Data, as type: Value.Type) -> Value? {
        var reader = Reader<Value>(bytes: Array(data))
        guard let value = reader.value() else { return nil }
        reader.skipSpace()
        return reader.atEnd ? value : nil
    }

    /// Appends `value` as compact JSON text.
    package static func write<Value: JSONWriting>(_ value: Value, into out: inout String) {
        switch value.shape {
        case .null: out += "null"
        case .bool(let flag): out += flag ? "true" : "false"
        case .number(let text): out += text
        case .string(let text): quote(text, into: &out)
        case .array(let values):
            out += "["
            for (index, element) in values.enumerated() {
                if index > 0 { out += "," }
                write(element, into: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (index, (key, member)) in members.enumerated() {
                if index > 0 { out += "," }
                quote(key, into: &out)
                out += ":"
                write(member, into: &out)
            }
            out += "}"
        }
    }

    /// Appends `text` as a JSON string literal.
    package static func quote(_ text: String, into out: inout String) {
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

    /// A strict recursive-descent reader.
    struct Reader<Value: JSONBuilding> {
        let bytes: [UInt8]
        var index = 0

        var atEnd: Bool { index == bytes.count }

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        mutating func value() -> Value? {
            skipSpace()
            guard index < bytes.count else { return nil }
            switch bytes[index] {
            case UInt8(ascii: "{"): return object()
            case UInt8(ascii: "["): return array()
            case UInt8(ascii: "\""): return string().map(Value.string)
            case UInt8(ascii: "t"): return literal("true", .bool(true))
            case UInt8(ascii: "f"): return literal("false", .bool(false))
            case UInt8(ascii: "n"): return literal("null", .null)
            default: return number()
            }
        }

        private mutating func literal(_ word: String, _ value: Value) -> Value? {
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

        private mutating func object() -> Value? {
            index += 1
            var members: [(String, Value)] = []
            if consume(UInt8(ascii: "}")) { return .object(members) }
            repeat {
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), let key = string(), consume(UInt8(ascii: ":")),
                    let value = value()
                else { return nil }
                members.append((key, value))
            } while consume(UInt8(ascii: ","))
            return consume(UInt8(ascii: "}")) ? .object(members) : nil
        }

        private mutating func array() -> Value? {
            index += 1
            var values: [Value] = []
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
                            bytes[index + 1] == UInt8(ascii: "u")
                        {
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

        /// A number by JSON's grammar: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
        private mutating func number() -> Value? {
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
            return .number(String(decoding: bytes[start..<index], as: UTF8.self), integral: integral)
        }
    }
}
