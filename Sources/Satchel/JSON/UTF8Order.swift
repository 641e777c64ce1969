#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// String comparison by Unicode scalars, i.e. by UTF-8 bytes.
///
/// Swift's `String ==` and `<` apply canonical equivalence (`"é" == "e\u{301}"`); Satchel's
/// contract is byte-exact everywhere (names, ids, values, order), matching the on-disk key order.
enum UTF8Order {
    /// Whether `a` and `b` have the same UTF-8 bytes.
    @inline(__always)
    static func equal(_ a: String, _ b: String) -> Bool {
        let ua = a.utf8, ub = b.utf8
        guard ua.count == ub.count else { return false }
        // memcmp: the generic `elementsEqual` went byte by byte (2.7 % of a push run's samples,
        // comparing records before rewriting them).
        if let r = ua.withContiguousStorageIfAvailable({ pa in
            ub.withContiguousStorageIfAvailable { pb in pa.isEmpty || memcmp(pa.baseAddress!, pb.baseAddress!, pa.count) == 0 }
        }), let r {
            return r
        }
        return ua.elementsEqual(ub)
    }

    /// Compares the UTF-8 bytes of `a` and `b`: negative, zero or positive.
    @inline(__always)
    static func compare(_ a: String, _ b: String) -> Int {
        let ua = a.utf8, ub = b.utf8
        if let r = ua.withContiguousStorageIfAvailable({ pa in
            ub.withContiguousStorageIfAvailable { pb in compareBytes(pa, pb) }
        }), let r {
            return r
        }
        return compareBytes(Array(ua), Array(ub))  // non-contiguous (bridged) strings only
    }

    @inline(__always)
    static func less(_ a: String, _ b: String) -> Bool { compare(a, b) < 0 }

    /// Compares byte sequences lexicographically, a shorter prefix first (memcmp order).
    @inline(__always)
    static func compareBytes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        let n = min(a.count, b.count)
        if n > 0 {
            let c = memcmp(a.baseAddress!, b.baseAddress!, n)
            if c != 0 { return c < 0 ? -1 : 1 }
        }
        return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
    }

    @inline(__always)
    static func compareBytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
        a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in compareBytes(pa, pb) } }
    }

    @inline(__always)
    static func compareBytes(_ a: UnsafeRawBufferPointer, _ b: [UInt8]) -> Int {
        b.withUnsafeBytes { pb in compareBytes(a, pb) }
    }

    @inline(__always)
    static func compareBytes(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Int {
        compareBytes(UnsafeRawBufferPointer(a), UnsafeRawBufferPointer(b))
    }

    /// Hashes the UTF-8 bytes of `s` (consistent with ``equal(_:_:)``).
    static func hash(_ s: String, into hasher: inout Hasher) {
        let u = s.utf8
        if u.withContiguousStorageIfAvailable({ hasher.combine(bytes: UnsafeRawBufferPointer($0)) }) == nil {
            for byte in u { hasher.combine(byte) }
        }
        hasher.combine(u.count)
    }

    /// Whether the UTF-8 bytes of `s` start with those of `prefix`.
    static func hasPrefix(_ s: String, _ prefix: String) -> Bool {
        s.utf8.starts(with: prefix.utf8)
    }
}
