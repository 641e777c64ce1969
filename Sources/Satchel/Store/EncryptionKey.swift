import Foundation

/// The app's key to an encrypted store (``Store/Configuration/encryptionKey``): 256 bits, or a
/// passphrase stretched with scrypt.
///
/// The key does not encrypt the data itself: it seals the store's data key, kept in the store's
/// key file, so that changing the app's key (``Store/changeEncryptionKey(path:from:to:)``)
/// rewrites one small file. Keep it out of the store's directory: on Apple platforms in the
/// Keychain, readable after first unlock (`kSecAttrAccessibleAfterFirstUnlock`) so that a
/// background sync runs while the device is locked; on a server in a file readable by the
/// service only, or an environment variable.
///
/// ```swift
/// var configuration = Store.Configuration()
/// configuration.encryptionKey = try EncryptionKey(hex: keyFromTheKeychain)
/// let store = try Store(path: path, configuration: configuration)
/// ```
public struct EncryptionKey: Sendable, CustomStringConvertible {
    enum Source: Sendable {
        case bytes([UInt8])
        case passphrase(String)
    }

    let source: Source

    /// A key of exactly 32 bytes.
    ///
    /// - Throws: ``SatchelError`` `.invalidArgument` for any other length.
    public init(bytes: some Sequence<UInt8>) throws(SatchelError) {
        let array = Array(bytes)
        guard array.count == 32 else {
            throw SatchelError(.invalidArgument, "an encryption key is 32 bytes (256 bits), not \(array.count)")
        }
        source = .bytes(array)
    }

    /// A key written as 64 hexadecimal digits (upper or lower case), as `satchel --key-file`
    /// reads it; one trailing newline is allowed.
    ///
    /// - Throws: ``SatchelError`` `.invalidArgument` naming what is wrong, never the key.
    public init(hex text: String) throws(SatchelError) {
        // Bytes, not Characters: "\r\n" is one Character, and two of them would drop a digit.
        var digits = Array(text.utf8)
        if digits.last == UInt8(ascii: "\n") {
            digits.removeLast()
            if digits.last == UInt8(ascii: "\r") { digits.removeLast() }
        }
        guard digits.count == 64 else {
            throw SatchelError(.invalidArgument, "a key is 64 hexadecimal digits (256 bits); this one has \(digits.count) characters")
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        var high: UInt8?
        for (position, character) in digits.enumerated() {
            guard let value = Self.hexValue(character) else {
                throw SatchelError(.invalidArgument, "a key is 64 hexadecimal digits; character \(position + 1) is not one")
            }
            if let h = high {
                bytes.append(h << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        source = .bytes(bytes)
    }

    /// A key derived from `passphrase` with scrypt (N = 2^15, r = 8, p = 1) and a random salt
    /// kept in the store's key file: slow on purpose (tens of milliseconds, 32 MiB), once per open.
    public static func passphrase(_ passphrase: String) -> EncryptionKey { EncryptionKey(source: .passphrase(passphrase)) }

    /// A new random key, for an app creating its first store (keep it as ``hex``).
    public static func random() throws(SatchelError) -> EncryptionKey { try EncryptionKey(bytes: Sealing.randomBytes(32)) }

    init(source: Source) { self.source = source }

    /// The key as 64 lowercase hexadecimal digits (what `--key-file` holds); empty for a passphrase.
    public var hex: String {
        guard case .bytes(let bytes) = source else { return "" }
        return Hex.lowercase(bytes)
    }

    /// Never the key itself: keys stay out of logs and error messages.
    public var description: String { isPassphrase ? "EncryptionKey(passphrase)" : "EncryptionKey(256 bits)" }

    var isPassphrase: Bool {
        if case .passphrase = source { return true }
        return false
    }

    /// The 32 bytes that seal the data key.
    func keyBytes(salt: [UInt8]) throws(SatchelError) -> [UInt8] {
        switch source {
        case .bytes(let bytes): return bytes
        case .passphrase(let text): return try Sealing.deriveKey(passphrase: text, salt: salt)
        }
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
