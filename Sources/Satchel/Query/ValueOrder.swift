#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Comparisons of values under Satchel's query semantics.
enum ValueOrder {
    /// Compares two values of the same type class (numbers, strings, booleans or arrays):
    /// negative, zero or positive; nil when the classes differ or are not ordered by ranges
    /// (null, objects). Arrays compare element by element, a prefix first: the order
    /// ``sortKey(_:)`` gives them, which sorting and indexes use.
    static func compareWithinClass(_ a: JSONValue, _ b: JSONValue) -> Int? {
        switch (a, b) {
        case (.int(let x), .int(let y)): return x == y ? 0 : (x < y ? -1 : 1)
        case (.double(let x), .double(let y)): return x == y ? 0 : (x < y ? -1 : 1)
        case (.int(let x), .double(let y)): return compare(x, y)
        case (.double(let x), .int(let y)): return -compare(y, x)
        case (.string(let x), .string(let y)): return UTF8Order.compare(x, y)
        case (.bool(let x), .bool(let y)): return x == y ? 0 : (x ? 1 : -1)
        case (.array, .array), (.object, .object): return UTF8Order.compareBytes(sortKey(a), sortKey(b))
        default: return nil
        }
    }

    /// Exact comparison of an integer with a (finite) double.
    static func compare(_ a: Int64, _ b: Double) -> Int {
        if b >= 9_223_372_036_854_775_808.0 { return -1 }
        if b < -9_223_372_036_854_775_808.0 { return 1 }
        let floor = b.rounded(.down)
        let f = Int64(floor)
        if a != f { return a < f ? -1 : 1 }
        return b > floor ? -1 : 0
    }

    /// Whether the UTF-8 bytes of `haystack` contain those of `needle`.
    static func utf8Contains(_ haystack: String, _ needle: String) -> Bool {
        if needle.isEmpty { return true }
        var h = haystack, n = needle
        return h.withUTF8 { hb in
            n.withUTF8 { nb in
                guard nb.count <= hb.count else { return false }
                let first = nb[0]
                var i = 0
                let last = hb.count - nb.count
                while i <= last {
                    if hb[i] == first && memcmp(hb.baseAddress! + i, nb.baseAddress!, nb.count) == 0 { return true }
                    i += 1
                }
                return false
            }
        }
    }

    /// The bytes that order `value` (nil: missing, ordered with null) in the total order
    /// null < false < true < numbers < strings < arrays < objects: its key encoding.
    static func sortKey(_ value: JSONValue?) -> [UInt8] { KeyEncoder.valueBytes(value ?? .null) }
}
