/// Satchel's JSON decoder: bytes in, ``JSONValue`` out, without going through `Any`.
///
/// Strict RFC 8259: no comments, no trailing commas, no leading zeros, no NaN or infinities; the
/// input must be valid UTF-8 and strings may not hold raw control characters or lone surrogates.
/// Nesting is limited to ``JSONValue/maxDepth`` levels, so hostile input cannot overflow the
/// stack. Integers without fraction or exponent that fit in 64 bits stay exact (`.int`); other
/// numbers become doubles. A name given twice in one object keeps its last value. A caller that
/// reads untrusted input of any size (a server's answer) may also cap the number of values, so
/// that a small text of many tiny values (`[0,0,0,…]`) cannot grow into a huge tree.
struct JSONParser: ~Copyable {
    /// Where parsing failed and why.
    struct Failure: Error {
        var offset: Int
        var reason: String
    }

    private let base: UnsafePointer<UInt8>
    private let end: Int
    private var pos = 0
    private var depth = 0
    private let maxDepth: Int
    /// The array elements and object members that may still be read, and the cap they count
    /// down from.
    private var valuesLeft: Int
    private let maxValues: Int

    private init(_ buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int, maxValues: Int) {
        // An empty buffer may have no base address; point at a valid dummy byte.
        self.base = buffer.baseAddress ?? UnsafePointer(Self.emptyByte)
        self.end = buffer.count
        self.maxDepth = maxDepth
        self.maxValues = maxValues
        self.valuesLeft = maxValues
    }

    nonisolated(unsafe) private static let emptyByte: UnsafeMutablePointer<UInt8> = {
        let p = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
        p.initialize(to: 0)
        return p
    }()

    /// Parses exactly one JSON value (surrounded by optional whitespace), with at most
    /// `maxValues` array elements and object members in all.
    static func parse(
        _ buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int = JSONValue.maxDepth, maxValues: Int = .max
    ) throws(Failure) -> JSONValue {
        var parser = JSONParser(buffer, maxDepth: maxDepth, maxValues: maxValues)
        parser.skipWhitespace()
        let value = try parser.parseValue()
        parser.skipWhitespace()
        if parser.pos != parser.end { throw parser.fail("unexpected data after the JSON value") }
        return value
    }

    // MARK: - Values

    private func fail(_ reason: String, at offset: Int? = nil) -> Failure {
        Failure(offset: offset ?? pos, reason: reason)
    }

    @inline(__always)
    private mutating func skipWhitespace() {
        while pos < end {
            switch base[pos] {
            case 0x20, 0x0A, 0x0D, 0x09: pos += 1
            default: return
            }
        }
    }

    private mutating func parseValue() throws(Failure) -> JSONValue {
        guard pos < end else { throw fail("unexpected end of input") }
        switch base[pos] {
        case UInt8(ascii: "{"): return .object(try parseObject())
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail(Self.describeUnexpected(base[pos]))
        }
    }

    private static func describeUnexpected(_ byte: UInt8) -> String {
        if byte >= 0x21 && byte < 0x7F { return "unexpected character '\(Character(Unicode.Scalar(byte)))'" }
        return "unexpected byte 0x\(String(byte, radix: 16, uppercase: true))"
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(Failure) {
        let count = literal.utf8CodeUnitCount
        guard end - pos >= count else { throw fail("unexpected end of input") }
        let p = literal.utf8Start
        for i in 0..<count where base[pos + i] != p[i] { throw fail("invalid literal") }
        pos += count
    }

    private mutating func enter() throws(Failure) {
        depth += 1
        if depth > maxDepth { throw fail("nesting deeper than \(maxDepth) levels") }
    }

    /// Counts one array element or object member against the cap.
    @inline(__always)
    private mutating func countValue() throws(Failure) {
        valuesLeft -= 1
        if valuesLeft < 0 { throw fail("more than \(maxValues) values") }
    }

    private mutating func parseObject() throws(Failure) -> JSONObject {
        try enter()
        pos += 1  // {
        skipWhitespace()
        var members: [JSONObject.Member] = []
        if pos < end && base[pos] == UInt8(ascii: "}") {
            pos += 1
            depth -= 1
            return JSONObject()
        }
        members.reserveCapacity(8)
        // Whether the names arrive sorted and unique (Satchel's own output always does), checked
        // on the raw bytes of unescaped names; then no sort is needed.
        var inOrder = true
        var previous: UnsafeBufferPointer<UInt8>? = nil
        while true {
            guard pos < end else { throw fail("unterminated object") }
            guard base[pos] == UInt8(ascii: "\"") else { throw fail("expected a string key in an object") }
            let keyStart = pos + 1
            let name = try parseString()
            if inOrder {
                let raw = UnsafeBufferPointer(start: base + keyStart, count: pos - 1 - keyStart)
                if raw.contains(UInt8(ascii: "\\")) {
                    inOrder = false  // escaped: let JSONObject sort by the decoded bytes
                } else {
                    if let previous, UTF8Order.compareBytes(previous, raw) >= 0 { inOrder = false }
                    previous = raw
                }
            }
            skipWhitespace()
            guard pos < end, base[pos] == UInt8(ascii: ":") else { throw fail("expected ':' after an object key") }
            pos += 1
            skipWhitespace()
            try countValue()
            let value = try parseValue()
            members.append(JSONObject.Member(name: name, value: value))
            skipWhitespace()
            guard pos < end else { throw fail("unterminated object") }
            switch base[pos] {
            case UInt8(ascii: ","):
                pos += 1
                skipWhitespace()
            case UInt8(ascii: "}"):
                pos += 1
                depth -= 1
                return inOrder ? JSONObject(sortedUniqueMembers: members) : JSONObject(unsortedMembers: members)
            default:
                throw fail("expected ',' or '}' in an object")
            }
        }
    }

    private mutating func parseArray() throws(Failure) -> JSONValue {
        try enter()
        pos += 1  // [
        skipWhitespace()
        var elements: [JSONValue] = []
        if pos < end && base[pos] == UInt8(ascii: "]") {
            pos += 1
            depth -= 1
            return .array(elements)
        }
        while true {
            try countValue()
            elements.append(try parseValue())
            skipWhitespace()
            guard pos < end else { throw fail("unterminated array") }
            switch base[pos] {
            case UInt8(ascii: ","):
                pos += 1
                skipWhitespace()
            case UInt8(ascii: "]"):
                pos += 1
                depth -= 1
                return .array(elements)
            default:
                throw fail("expected ',' or ']' in an array")
            }
        }
    }

    // MARK: - Strings

    private mutating func parseString() throws(Failure) -> String {
        let open = pos
        pos += 1
        let start = pos
        var ascii = true
        // Eight bytes at a time while none is a quote, a backslash, a control character or
        // non-ASCII; the byte loop below takes over at the first such byte.
        while end - pos >= 8 {
            let word = UnsafeRawPointer(base + pos).loadUnaligned(as: UInt64.self)
            let high: UInt64 = 0x8080_8080_8080_8080
            let ones: UInt64 = 0x0101_0101_0101_0101
            let quote = word ^ 0x2222_2222_2222_2222
            let backslash = word ^ 0x5C5C_5C5C_5C5C_5C5C
            let special =
                word | ((word &- 0x2020_2020_2020_2020) & ~word)  // >= 0x80, or < 0x20
                | ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash)
            if special & high != 0 { break }
            pos += 8
        }
        while pos < end {
            let c = base[pos]
            if c == UInt8(ascii: "\"") {
                let bytes = UnsafeBufferPointer(start: base + start, count: pos - start)
                pos += 1
                if ascii { return String(decoding: bytes, as: UTF8.self) }
                guard let s = String(validating: bytes, as: UTF8.self) else {
                    throw fail("invalid UTF-8 in a string", at: start)
                }
                return s
            }
            if c == UInt8(ascii: "\\") { return try parseEscapedString(contentStart: start) }
            if c < 0x20 { throw fail("unescaped control character in a string") }
            if c >= 0x80 { ascii = false }
            pos += 1
        }
        throw fail("unterminated string", at: open)
    }

    /// The slow path for strings with escapes: builds the bytes, then validates them as UTF-8.
    private mutating func parseEscapedString(contentStart start: Int) throws(Failure) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(pos - start + 16)
        bytes.append(contentsOf: UnsafeBufferPointer(start: base + start, count: pos - start))
        while pos < end {
            let c = base[pos]
            switch c {
            case UInt8(ascii: "\""):
                pos += 1
                guard let s = String(validating: bytes, as: UTF8.self) else {
                    throw fail("invalid UTF-8 in a string", at: start)
                }
                return s
            case UInt8(ascii: "\\"):
                pos += 1
                guard pos < end else { throw fail("unterminated string") }
                let e = base[pos]
                pos += 1
                switch e {
                case UInt8(ascii: "\""): bytes.append(0x22)
                case UInt8(ascii: "\\"): bytes.append(0x5C)
                case UInt8(ascii: "/"): bytes.append(0x2F)
                case UInt8(ascii: "b"): bytes.append(0x08)
                case UInt8(ascii: "f"): bytes.append(0x0C)
                case UInt8(ascii: "n"): bytes.append(0x0A)
                case UInt8(ascii: "r"): bytes.append(0x0D)
                case UInt8(ascii: "t"): bytes.append(0x09)
                case UInt8(ascii: "u"): try appendUnicodeEscape(to: &bytes)
                default: throw fail("invalid escape sequence", at: pos - 2)
                }
            default:
                if c < 0x20 { throw fail("unescaped control character in a string") }
                bytes.append(c)
                pos += 1
            }
        }
        throw fail("unterminated string", at: start - 1)
    }

    private mutating func readHex4() throws(Failure) -> UInt32 {
        guard end - pos >= 4 else { throw fail("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let c = base[pos]
            let digit: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw fail("invalid hex digit in a \\u escape")
            }
            value = value << 4 | digit
            pos += 1
        }
        return value
    }

    private mutating func appendUnicodeEscape(to bytes: inout [UInt8]) throws(Failure) {
        let escapeStart = pos - 2
        var scalar = try readHex4()
        if (0xD800...0xDBFF).contains(scalar) {
            guard end - pos >= 6, base[pos] == UInt8(ascii: "\\"), base[pos + 1] == UInt8(ascii: "u") else {
                throw fail("lone high surrogate in a \\u escape", at: escapeStart)
            }
            pos += 2
            let low = try readHex4()
            guard (0xDC00...0xDFFF).contains(low) else { throw fail("invalid surrogate pair", at: escapeStart) }
            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        } else if (0xDC00...0xDFFF).contains(scalar) {
            throw fail("lone low surrogate in a \\u escape", at: escapeStart)
        }
        guard let unicode = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape", at: escapeStart) }
        bytes.append(contentsOf: UTF8.encode(unicode)!)
    }

    // MARK: - Numbers

    private mutating func parseNumber() throws(Failure) -> JSONValue {
        let start = pos
        var negative = false
        if base[pos] == UInt8(ascii: "-") {
            negative = true
            pos += 1
        }
        guard pos < end, isDigit(base[pos]) else { throw fail("expected a digit") }
        // Integer part, accumulated in a UInt64 while it fits.
        var magnitude: UInt64 = 0
        var overflow = false
        if base[pos] == UInt8(ascii: "0") {
            pos += 1
            if pos < end && isDigit(base[pos]) { throw fail("leading zeros are not allowed", at: start) }
        } else {
            while pos < end && isDigit(base[pos]) {
                let digit = UInt64(base[pos] - UInt8(ascii: "0"))
                let (m, o1) = magnitude.multipliedReportingOverflow(by: 10)
                let (a, o2) = m.addingReportingOverflow(digit)
                overflow = overflow || o1 || o2
                magnitude = a
                pos += 1
            }
        }
        var isInteger = true
        if pos < end && base[pos] == UInt8(ascii: ".") {
            isInteger = false
            pos += 1
            guard pos < end, isDigit(base[pos]) else { throw fail("expected a digit after '.'") }
            while pos < end && isDigit(base[pos]) { pos += 1 }
        }
        if pos < end && (base[pos] == UInt8(ascii: "e") || base[pos] == UInt8(ascii: "E")) {
            isInteger = false
            pos += 1
            if pos < end && (base[pos] == UInt8(ascii: "+") || base[pos] == UInt8(ascii: "-")) { pos += 1 }
            guard pos < end, isDigit(base[pos]) else { throw fail("expected a digit in the exponent") }
            while pos < end && isDigit(base[pos]) { pos += 1 }
        }
        if isInteger && !overflow {
            if !negative && magnitude <= UInt64(Int64.max) { return .int(Int64(magnitude)) }
            if negative && magnitude <= UInt64(Int64.max) + 1 { return .int(Int64(truncatingIfNeeded: 0 &- magnitude)) }
        }
        let text = String(decoding: UnsafeBufferPointer(start: base + start, count: pos - start), as: UTF8.self)
        guard let d = Double(text), d.isFinite else { throw fail("number out of range", at: start) }
        return .double(d)
    }

    @inline(__always)
    private func isDigit(_ c: UInt8) -> Bool { c &- UInt8(ascii: "0") < 10 }
}

// MARK: - Public entry points

extension JSONValue {
    /// The deepest nesting of arrays and objects Satchel reads or writes (256 levels).
    public static let maxDepth = 256

    /// Parses JSON text.
    ///
    /// - Throws: ``SatchelError`` `.malformedJSON` with the byte offset and the reason.
    public init(parsing bytes: some Sequence<UInt8>) throws {
        try self.init(parsing: bytes, maximumValues: .max)
    }

    /// Parses JSON text of untrusted size: more than `maximumValues` array elements and object
    /// members in all is an error, as is nesting deeper than ``maxDepth``, so the tree built
    /// stays within a known multiple of the cap (the sync adapters read server answers so).
    ///
    /// - Throws: ``SatchelError`` `.malformedJSON` with the byte offset and the reason.
    public init(parsing bytes: some Sequence<UInt8>, maximumValues: Int) throws {
        let result: Result<JSONValue, JSONParser.Failure> =
            bytes.withContiguousStorageIfAvailable { buffer in
                Result { () throws(JSONParser.Failure) in try JSONParser.parse(buffer, maxValues: maximumValues) }
            }
            ?? Array(bytes).withUnsafeBufferPointer { buffer in
                Result { () throws(JSONParser.Failure) in try JSONParser.parse(buffer, maxValues: maximumValues) }
            }
        switch result {
        case .success(let value): self = value
        case .failure(let failure): throw SatchelError(.malformedJSON, "malformed JSON at byte \(failure.offset): \(failure.reason)")
        }
    }

    /// Parses JSON text.
    ///
    /// - Throws: ``SatchelError`` `.malformedJSON` with the byte offset and the reason.
    public init(parsing text: String) throws {
        var text = text
        self = try text.withUTF8 { try JSONValue(parsing: $0) }
    }
}

extension JSONObject {
    /// Parses JSON text that must be an object.
    ///
    /// - Throws: ``SatchelError`` `.malformedJSON` for bad JSON, `.invalidObject` when the text
    ///   is valid JSON but not an object.
    public init(parsing bytes: some Sequence<UInt8>) throws {
        let value = try JSONValue(parsing: bytes)
        guard case .object(let object) = value else {
            throw SatchelError(.invalidObject, "expected a JSON object, got \(value.kindName)")
        }
        self = object
    }

    /// Parses JSON text that must be an object.
    public init(parsing text: String) throws {
        var text = text
        self = try text.withUTF8 { try JSONObject(parsing: $0) }
    }
}

extension JSONValue {
    /// "null", "a boolean", "a number", "a string", "an array" or "an object", for messages.
    var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .int, .double: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}
