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
    /// False when checking (``checkPrefix(_:maxDepth:maxValues:)``): the input is checked as
    /// strictly, but no string, array or object is built; values come back empty, of their kind.
    private let building: Bool
    /// Whether the top-level object's members are noted (``shape``, ``idMember``): a check, or
    /// ``parseItem(_:maxValues:)``.
    private let notingMembers: Bool
    /// What a check found of the top-level object's members.
    private var shape = Shape(kind: .null)
    /// Whether the text read so far is exactly what ``JSONWriter`` writes of its value: no
    /// whitespace, no escape, names in byte order, integers only, no top-level null.
    private var canonical = true
    /// The bytes of the top-level `object` member, with the comma that joins it to the others.
    private var idMember: Range<Int>? = nil
    /// Set when a string with an escape is read: an object's reader clears it before each name,
    /// then knows without looking at the name's bytes again whether it was escaped.
    private var sawEscape = false

    private init(_ buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int, maxValues: Int, building: Bool = true, notingMembers: Bool = false) {
        // An empty buffer may have no base address; point at a valid dummy byte.
        self.base = buffer.baseAddress ?? UnsafePointer(Self.emptyByte)
        self.end = buffer.count
        self.maxDepth = maxDepth
        self.maxValues = maxValues
        self.valuesLeft = maxValues
        self.building = building
        self.notingMembers = notingMembers || !building
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

    /// What a check tells of a value without building it: its kind, and for an object, its
    /// `object` member and whether it has any other member that is not null.
    struct Shape {
        /// A value of the checked value's kind (empty when a string, array or object).
        var kind: JSONValue
        /// The `object` member's value (empty when a string), nil when there is none.
        var id: JSONValue? = nil
        /// Whether a member other than `object` holds something other than null.
        var hasAttribute = false
        /// False when the members' names did not come in strictly increasing byte order (a
        /// name given twice, an escaped name): `id` and `hasAttribute` may then be wrong, and
        /// only a parse can tell.
        var exact = true
    }

    /// Checks the one JSON value that starts `buffer` (its first byte, no whitespace before), and
    /// stops after it whatever follows, as strictly as ``parseItem(_:maxValues:)`` parses it,
    /// building nothing: its shape and the number of bytes it took. A failure is the parse's.
    static func checkPrefix(
        _ buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int = JSONValue.maxDepth, maxValues: Int = .max
    ) throws(Failure) -> (shape: Shape, count: Int) {
        var parser = JSONParser(buffer, maxDepth: maxDepth, maxValues: maxValues, building: false)
        let value = try parser.parseValue()
        parser.shape.kind = value
        return (parser.shape, parser.pos)
    }

    /// Parses the one JSON value that starts `buffer` (its first byte, no whitespace before), an
    /// import's item, and stops after it whatever follows: the value, the number of bytes it took,
    /// and whether its text is already the stored form of its attributes: when
    /// `storedForm` is not nil, the text with the bytes at `storedForm.idMember` cut out (the
    /// `object` member, when there is one) is exactly what ``JSONWriter`` writes of the object
    /// without its id, so that an import need not encode it again.
    static func parseItem(
        _ buffer: UnsafeBufferPointer<UInt8>, maxValues: Int = .max
    ) throws(Failure) -> (value: JSONValue, count: Int, storedForm: StoredForm?) {
        var parser = JSONParser(buffer, maxDepth: JSONValue.maxDepth, maxValues: maxValues, notingMembers: true)
        let value = try parser.parseValue()
        guard case .object = value, parser.canonical else { return (value, parser.pos, nil) }
        return (value, parser.pos, StoredForm(idMember: parser.idMember))
    }

    /// Where an import item's text differs from the stored form of its attributes.
    struct StoredForm {
        /// The `object` member and its comma, to cut out (nil: none).
        var idMember: Range<Int>?
    }

    // MARK: - Values

    private func fail(_ reason: String, at offset: Int? = nil) -> Failure {
        Failure(offset: offset ?? pos, reason: reason)
    }

    @inline(__always)
    private mutating func skipWhitespace() {
        while pos < end {
            switch base[pos] {
            case 0x20, 0x0A, 0x0D, 0x09:
                pos += 1
                canonical = false
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
        if building { members.reserveCapacity(8) }
        // Whether the names arrive sorted and unique (Satchel's own output always does), checked
        // on the raw bytes of unescaped names; then no sort is needed.
        var inOrder = true
        var previous: UnsafeBufferPointer<UInt8>? = nil
        var memberCount = 0
        while true {
            guard pos < end else { throw fail("unterminated object") }
            guard base[pos] == UInt8(ascii: "\"") else { throw fail("expected a string key in an object") }
            let keyStart = pos + 1
            sawEscape = false
            let name = try parseString()
            if inOrder {
                let raw = UnsafeBufferPointer(start: base + keyStart, count: pos - 1 - keyStart)
                if sawEscape {
                    inOrder = false  // escaped: let JSONObject sort by the decoded bytes
                } else {
                    if let previous {
                        // Names mostly differ in their first byte: memcmp only when they do not.
                        let ordered: Bool
                        if let p = previous.first, let r = raw.first, p != r {
                            ordered = p < r
                        } else {
                            ordered = UTF8Order.compareBytes(previous, raw) < 0
                        }
                        if !ordered { inOrder = false }
                    }
                    previous = raw
                }
            }
            let nameEnd = pos - 1
            skipWhitespace()
            guard pos < end, base[pos] == UInt8(ascii: ":") else { throw fail("expected ':' after an object key") }
            pos += 1
            skipWhitespace()
            try countValue()
            let value = try parseValue()
            if notingMembers && depth == 1 {
                noteMember(
                    name: name, raw: UnsafeBufferPointer(start: base + keyStart, count: nameEnd - keyStart), value: value,
                    start: keyStart - 1, first: memberCount == 0)
            }
            memberCount += 1
            if building { members.append(JSONObject.Member(name: name, value: value)) }
            skipWhitespace()
            guard pos < end else { throw fail("unterminated object") }
            switch base[pos] {
            case UInt8(ascii: ","):
                pos += 1
                skipWhitespace()
            case UInt8(ascii: "}"):
                pos += 1
                depth -= 1
                if !inOrder { canonical = false }
                if !building {
                    if depth == 0 { shape.exact = inOrder }
                    return JSONObject()
                }
                return inOrder ? JSONObject(sortedUniqueMembers: members) : JSONObject(unsortedMembers: members)
            default:
                throw fail("expected ',' or '}' in an object")
            }
        }
    }

    /// Notes one member of the top-level object, which starts at byte `start` (its name's
    /// quote) and ends where the parse is. An unescaped name is its raw bytes; an escaped one
    /// was decoded (`name`).
    private mutating func noteMember(name: String, raw: UnsafeBufferPointer<UInt8>, value: JSONValue, start: Int, first: Bool) {
        let isID =
            raw.contains(UInt8(ascii: "\\"))
            ? UTF8Order.equal(name, Object.idAttribute)
            : raw.count == Self.idName.utf8CodeUnitCount
                && UTF8Order.compareBytes(raw, UnsafeBufferPointer(start: Self.idName.utf8Start, count: raw.count)) == 0
        if isID {
            shape.id = value
            // With its comma: the one before it, or, first, the one after it (when another follows).
            idMember = first ? start..<(pos < end && base[pos] == UInt8(ascii: ",") ? pos + 1 : pos) : (start - 1)..<pos
        } else if !value.isNull {
            shape.hasAttribute = true
        }
        if value.isNull { canonical = false }  // a write drops it
    }

    /// ``Object/idAttribute``, as bytes.
    private static let idName: StaticString = "object"

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
            let element = try parseValue()
            if building { elements.append(element) }
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
        while true {
            // Eight bytes at a time while none is a quote, a backslash, a control character or
            // non-ASCII; then straight to the first such byte.
            while end - pos >= 8 {
                let word = UInt64(littleEndian: UnsafeRawPointer(base + pos).loadUnaligned(as: UInt64.self))
                let high: UInt64 = 0x8080_8080_8080_8080
                let ones: UInt64 = 0x0101_0101_0101_0101
                let quote = word ^ 0x2222_2222_2222_2222
                let backslash = word ^ 0x5C5C_5C5C_5C5C_5C5C
                // A byte's high bit set when it is >= 0x80, < 0x20, a quote or a backslash; a
                // borrow may also flag bytes after such a byte, never one before it.
                let special =
                    (word | ((word &- 0x2020_2020_2020_2020) & ~word)
                        | ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash)) & high
                if special != 0 {
                    pos += special.trailingZeroBitCount >> 3
                    break
                }
                pos += 8
            }
            guard pos < end else { break }
            let c = base[pos]
            if c == UInt8(ascii: "\"") {
                let bytes = UnsafeBufferPointer(start: base + start, count: pos - start)
                pos += 1
                if ascii { return building ? String(decoding: bytes, as: UTF8.self) : "" }
                guard let s = String(validating: bytes, as: UTF8.self) else {
                    throw fail("invalid UTF-8 in a string", at: start)
                }
                return building ? s : ""
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
        canonical = false
        sawEscape = true
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
            if negative && magnitude <= UInt64(Int64.max) + 1 {
                if magnitude == 0 { canonical = false }  // -0 is written 0
                return .int(Int64(truncatingIfNeeded: 0 &- magnitude))
            }
        }
        canonical = false  // a double: its text may not be the shortest
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
    /// members in all is an error, as is nesting deeper than `maximumDepth` (``maxDepth``), so
    /// the tree built stays within a known multiple of the cap (the sync adapters read server
    /// answers so, a few levels deeper: an answer keeps objects as deep as a store holds inside
    /// levels of its own).
    ///
    /// - Throws: ``SatchelError`` `.malformedJSON` with the byte offset and the reason.
    public init(parsing bytes: some Sequence<UInt8>, maximumValues: Int, maximumDepth: Int = JSONValue.maxDepth) throws {
        let result: Result<JSONValue, JSONParser.Failure> =
            bytes.withContiguousStorageIfAvailable { buffer in
                Result { () throws(JSONParser.Failure) in try JSONParser.parse(buffer, maxDepth: maximumDepth, maxValues: maximumValues) }
            }
            ?? Array(bytes).withUnsafeBufferPointer { buffer in
                Result { () throws(JSONParser.Failure) in try JSONParser.parse(buffer, maxDepth: maximumDepth, maxValues: maximumValues) }
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

    /// Parses JSON text that must be an object, nested at most `maximumDepth` levels: a file
    /// that keeps values of up to ``JSONValue/maxDepth`` levels inside levels of its own.
    ///
    /// - Throws: as ``init(parsing:)-(Sequence<UInt8>)``.
    package init(parsing bytes: some Sequence<UInt8>, maximumDepth: Int) throws {
        let parse = { (buffer: UnsafeBufferPointer<UInt8>) in
            Result { () throws(JSONParser.Failure) in try JSONParser.parse(buffer, maxDepth: maximumDepth) }
        }
        let result = bytes.withContiguousStorageIfAvailable(parse) ?? Array(bytes).withUnsafeBufferPointer(parse)
        let value: JSONValue
        switch result {
        case .success(let parsed): value = parsed
        case .failure(let failure): throw SatchelError(.malformedJSON, "malformed JSON at byte \(failure.offset): \(failure.reason)")
        }
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

    /// Parses a stored record of the store's own that keeps an object's attributes (up to
    /// ``JSONValue/maxDepth`` levels) one level down: a pending change, a change in flight, a
    /// refused change.
    init(parsingRecord bytes: some Sequence<UInt8>) throws {
        try self.init(parsing: bytes, maximumDepth: JSONValue.maxDepth + 1)
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
