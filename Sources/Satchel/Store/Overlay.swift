#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A transaction's pending writes by key (a nil value: a delete). A dictionary keyed by the key
/// bytes, hashed as one buffer: `[UInt8]` itself hashes byte by byte, which showed in profiles
/// of page applies.
struct Overlay {
    struct Key: Hashable {
        let bytes: [UInt8]

        static func == (a: Key, b: Key) -> Bool {
            a.bytes.count == b.bytes.count
                && a.bytes.withUnsafeBytes { x in
                    b.bytes.withUnsafeBytes { y in x.count == 0 || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0 }
                }
        }

        func hash(into hasher: inout Hasher) { bytes.withUnsafeBytes { hasher.combine(bytes: $0) } }
    }

    private var storage: [Key: [UInt8]?] = [:]

    /// The pending value of `key`: nil when untouched, `.some(nil)` when deleted.
    subscript(key: [UInt8]) -> [UInt8]?? {
        get { storage[Key(bytes: key)] }
        set { storage[Key(bytes: key)] = newValue }
    }

    var isEmpty: Bool { storage.isEmpty }
    var count: Int { storage.count }

    /// Makes room for `count` writes at once (growing one write at a time rehashes every key
    /// each time the table doubles).
    mutating func reserveCapacity(_ count: Int) { storage.reserveCapacity(count) }

    /// Every pending write, in no particular order.
    var writes: [(key: [UInt8], value: [UInt8]?)] { storage.map { ($0.key.bytes, $0.value) } }
}
