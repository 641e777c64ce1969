/// Lowercase hexadecimal for the names and records Satchel writes as text (key files, blob
/// names, the clean-close record), and the 64-bit FNV-1a hash some of them carry: a checksum or
/// a name, never a security property.
enum Hex {
    /// Two lowercase hex digits per byte.
    static func lowercase(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `value` as 16 lowercase hex digits, most significant first.
    static func lowercase(_ value: UInt64) -> String {
        lowercase((0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * $0)) })
    }

    /// The FNV-1a offset basis and prime (64 bits).
    static let fnvBasis: UInt64 = 0xcbf2_9ce4_8422_2325
    static let fnvPrime: UInt64 = 0x100_0000_01b3

    /// 64-bit FNV-1a of `bytes`, from `basis`.
    static func fnv1a(_ bytes: some Sequence<UInt8>, basis: UInt64 = fnvBasis) -> UInt64 {
        var hash = basis
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* fnvPrime }
        return hash
    }
}
