/// Satchel's JSON encoder: compact output (no whitespace), object keys in byte order (the order
/// ``JSONObject`` keeps), non-ASCII text as raw UTF-8, and only `"`, `\` and control characters
/// escaped. Doubles print in Swift's shortest round-trip form, so every value reads back exactly,
/// and a double always reads back as a double (`1.0`, `1e+16`).
///
/// This is the byte layout of stored objects.
struct JSONWriter {
    private(set) var bytes: [UInt8] = []
    private let maxDepth: Int

    init(capacity: Int = 256, maxDepth: Int = JSONValue.maxDepth) {
        bytes.reserveCapacity(capacity)
        self.maxDepth = maxDepth
    }

    /// Compact JSON of `value`, with no depth limit (for descriptions of values built in code).
    static func encode(_ value: JSONValue) -> [UInt8] {
        var writer = JSONWriter(maxDepth: .max)
        try! writer.write(value, depth: 0)  // cannot throw without a depth limit
        return writer.bytes
    }

    /// Compact JSON of `object`, refusing nesting deeper than ``JSONValue/maxDepth``.
    static func encodeChecked(_ object: JSONObject) throws(SatchelError) -> [UInt8] {
        var writer = JSONWriter()
        try writer.write(object, depth: 1)
        return writer.bytes
    }

    mutating func write(_ value: JSONValue, depth: Int) throws(SatchelError) {
        switch value {
        case .null: append("null")
        case .bool(let b): append(b ? "true" : "false")
        case .int(let i): writeInt(i)
        case .double(let d): writeDouble(d)
        case .string(let s): writeString(s)
        case .array(let elements):
            try checkDepth(depth + 1)
            bytes.append(UInt8(ascii: "["))
            var first = true
            for element in elements {
                if !first { bytes.append(UInt8(ascii: ",")) }
                first = false
                try write(element, depth: depth + 1)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let object):
            try write(object, depth: depth + 1)
        }
    }

    mutating func write(_ object: JSONObject, depth: Int) throws(SatchelError) {
        try checkDepth(depth)
        bytes.append(UInt8(ascii: "{"))
        var first = true
        for (name, value) in object {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            writeString(name)
            bytes.append(UInt8(ascii: ":"))
            try write(value, depth: depth)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    @inline(__always)
    private func checkDepth(_ depth: Int) throws(SatchelError) {
        if depth > maxDepth {
            throw SatchelError(.malformedJSON, "value nests deeper than \(maxDepth) levels")
        }
    }

    @inline(__always)
    private mutating func append(_ literal: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    private mutating func writeInt(_ value: Int64) {
        if value >= 0 && value < 10 {
            bytes.append(UInt8(ascii: "0") + UInt8(value))
            return
        }
        // Digits into a small stack buffer, least significant first.
        var magnitude = value.magnitude
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            var n = 0
            repeat {
                buffer[n] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                n += 1
            } while magnitude > 0
            if value < 0 { bytes.append(UInt8(ascii: "-")) }
            for i in stride(from: n - 1, through: 0, by: -1) { bytes.append(buffer[i]) }
        }
    }

    private mutating func writeDouble(_ value: Double) {
        // Swift's description is the shortest text that reads back to the same double, and
        // always shows it is not an integer ("1.0", "1e+16"). Finite values only reach here.
        var text = value.description
        text.withUTF8 { bytes.append(contentsOf: $0) }
    }

    private mutating func writeString(_ string: String) {
        bytes.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            var runStart = 0
            var i = 0
            while i < utf8.count {
                // Eight bytes at a time while none needs escaping (non-ASCII bytes never do).
                if utf8.count - i >= 8 {
                    let word = UnsafeRawPointer(utf8.baseAddress! + i).loadUnaligned(as: UInt64.self)
                    let ones: UInt64 = 0x0101_0101_0101_0101
                    let high: UInt64 = 0x8080_8080_8080_8080
                    let quote = word ^ 0x2222_2222_2222_2222
                    let backslash = word ^ 0x5C5C_5C5C_5C5C_5C5C
                    let escape = ((word &- 0x2020_2020_2020_2020) & ~word) | ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash)
                    if escape & high == 0 {
                        i += 8
                        continue
                    }
                }
                let c = utf8[i]
                i += 1
                guard c < 0x20 || c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") else { continue }
                let at = i - 1
                if runStart < at { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<at])) }
                runStart = at + 1
                switch c {
                case UInt8(ascii: "\""): append("\\\"")
                case UInt8(ascii: "\\"): append("\\\\")
                case 0x0A: append("\\n")
                case 0x0D: append("\\r")
                case 0x09: append("\\t")
                case 0x08: append("\\b")
                case 0x0C: append("\\f")
                default:
                    append("\\u00")
                    let hex: StaticString = "0123456789abcdef"
                    bytes.append(hex.utf8Start[Int(c >> 4)])
                    bytes.append(hex.utf8Start[Int(c & 0xF)])
                }
            }
            if runStart < utf8.count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...])) }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

extension JSONValue {
    /// The value as compact JSON bytes (UTF-8), object keys sorted by their bytes.
    public var jsonBytes: [UInt8] { JSONWriter.encode(self) }
}

extension JSONObject {
    /// The object as compact JSON bytes (UTF-8), keys sorted by their bytes.
    public var jsonBytes: [UInt8] { JSONWriter.encode(.object(self)) }
}
