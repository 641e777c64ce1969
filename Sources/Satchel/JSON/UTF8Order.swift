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
        if let r = ua.withContiguousStorageIfAvailable({ pa in
            ub.withContiguousStorageIfAvailable { pb in pa.elementsEqual(pb) }
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
        return compareBytes(Array(ua), Array(ub))
    }

    @inline(__always)
    static func less(_ a: String, _ b: String) -> Bool { compare(a, b) < 0 }

    /// Compares byte sequences lexicographically, a shorter prefix first.
    @inline(__always)
    static func compareBytes<A: Collection<UInt8>, B: Collection<UInt8>>(_ a: A, _ b: B) -> Int {
        var ia = a.makeIterator(), ib = b.makeIterator()
        while true {
            switch (ia.next(), ib.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case (let x?, let y?): if x != y { return x < y ? -1 : 1 }
            }
        }
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
