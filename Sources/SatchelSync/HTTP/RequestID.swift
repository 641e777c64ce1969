/// A request id derived from what a request asks, so that the same change sent again — by a
/// retry in the same sync, or by the next sync after the process died — carries the same id, and
/// a server that deduplicates requests by id (Parse Server's `X-Parse-Request-Id`) can tell a
/// repeat from a new request. Another change gives another id.
///
/// 128 bits of FNV-1a (two 64-bit passes with different offsets) over the parts, each preceded
/// by its length so that `["ab", "c"]` and `["a", "bc"]` differ, written as a UUID
/// (`8-4-4-4-12` lower-case hex). A name, not a security property.
package enum RequestID {
    package static func make(_ parts: [[UInt8]]) -> String {
        var a: UInt64 = 0xcbf2_9ce4_8422_2325
        var b: UInt64 = 0x8422_2325_cbf2_9ce4
        func add(_ byte: UInt8) {
            a = (a ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
            b = (b ^ UInt64(byte ^ 0x5A)) &* 0x0000_0100_0000_01B3
        }
        for part in parts {
            var length = UInt64(part.count)
            for _ in 0..<8 {
                add(UInt8(truncatingIfNeeded: length))
                length >>= 8
            }
            for byte in part { add(byte) }
        }
        let hex = Self.hex(a) + Self.hex(b)
        let characters = Array(hex)
        return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(characters[$0]) }.joined(separator: "-")
    }

    private static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
