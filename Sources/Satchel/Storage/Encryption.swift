internal import CLevelDB
internal import CLevelDBEncryption
import Foundation

/// The encrypting Env a store's databases are opened with (CLevelDBEncryption): every file
/// LevelDB writes under AES-256-CTR with the store's data key.
///
/// `@unchecked Sendable`: a box around one C pointer that is written once, in `init`, and freed
/// in `deinit`; the Env it points to is immutable after creation and thread-safe, as LevelDB
/// requires of every Env. Databases opened with it hold this box, so it outlives them.
final class EncryptedEnvironment: @unchecked Sendable {
    private let env: OpaquePointer
    /// The data key, which also seals the store's blob files.
    let dataKey: DataKey

    /// Whether every file is sealed in authenticated chunks or frames.
    let tamperEvident: Bool

    /// Whether a log's frame that fails its authentication reads as a damaged block (which
    /// LevelDB's log reader drops, reading on) rather than ending the read: a repair's.
    let salvaging: Bool

    init(dataKey: DataKey, tamperEvident: Bool, salvaging: Bool = false) {
        env = dataKey.bytes.withUnsafeBufferPointer { key in
            dataKey.keyID.withUnsafeBufferPointer { id in
                satchel_encrypted_env_create(key.baseAddress, id.baseAddress, tamperEvident ? 1 : 0, salvaging ? 1 : 0)
            }
        }
        self.dataKey = dataKey
        self.tamperEvident = tamperEvident
        self.salvaging = salvaging
    }

    /// The same key's Env for a repair: a damaged log frame is a damaged block, the frames after
    /// it read (a black-box probe: a repair lost every write after it).
    var salvagingEnvironment: EncryptedEnvironment {
        salvaging ? self : EncryptedEnvironment(dataKey: dataKey, tamperEvident: tamperEvident, salvaging: true)
    }

    /// Removes the tables in `directory` this Env wrote and LevelDB never synced (a compaction's
    /// output a close stopped): once the database there is closed.
    func removeUnsyncedTables(in directory: String) { _ = satchel_encrypted_env_remove_unsynced_tables(env, directory) }

    /// Forgets the tables this Env noted in `directory`, before a database opens there.
    func forgetTables(in directory: String) { satchel_encrypted_env_forget_tables(env, directory) }

    /// What `leveldb_options_set_env` takes.
    var leveldbEnv: OpaquePointer { satchel_encrypted_env_leveldb(env) }

    deinit { satchel_encrypted_env_destroy(env) }
}

/// A store's data key: the key its files are encrypted with, and its id.
struct DataKey: Sendable {
    var bytes: [UInt8]
    var keyID: [UInt8]

    /// A new random key.
    static func random() throws(SatchelError) -> DataKey {
        DataKey(bytes: try Sealing.randomBytes(32), keyID: try Sealing.randomBytes(16))
    }
}

/// AES-256-GCM and random bytes, from OpenSSL (CLevelDBEncryption).
enum Sealing {
    static let overhead = Int(SATCHEL_SEAL_OVERHEAD)

    static func randomBytes(_ count: Int) throws(SatchelError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        guard bytes.withUnsafeMutableBufferPointer({ satchel_random_bytes($0.baseAddress, count) }) == 0 else {
            throw SatchelError(.io, "no random bytes from the system")
        }
        return bytes
    }

    /// `plain` sealed under `key`, authenticating `context` too.
    static func seal(_ plain: [UInt8], key: [UInt8], context: [UInt8]) throws(SatchelError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: plain.count + overhead)
        let status = out.withUnsafeMutableBufferPointer { out in
            satchel_seal(key, plain, plain.count, context, context.count, out.baseAddress)
        }
        guard status == 0 else { throw SatchelError(.io, "sealing failed (OpenSSL)") }
        return out
    }

    /// What ``seal(_:key:context:)`` wrote, or nil when the key, the context or the bytes are
    /// not those it was sealed with.
    static func open(_ sealed: [UInt8], key: [UInt8], context: [UInt8]) -> [UInt8]? {
        guard sealed.count >= overhead else { return nil }
        var out = [UInt8](repeating: 0, count: sealed.count - overhead)
        let status = out.withUnsafeMutableBufferPointer { out in
            satchel_open(key, sealed, sealed.count, context, context.count, out.baseAddress)
        }
        return status == 0 ? out : nil
    }

    /// HMAC-SHA-256 of `bytes` under `key`.
    static func keyedHash(_ bytes: [UInt8], key: [UInt8]) throws(SatchelError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        guard out.withUnsafeMutableBufferPointer({ satchel_keyed_hash(key, bytes, bytes.count, $0.baseAddress) }) == 0 else {
            throw SatchelError(.io, "hashing failed (OpenSSL)")
        }
        return out
    }

    /// A 32-byte key from a passphrase: scrypt (N = 2^15, r = 8, p = 1) with `salt`.
    static func deriveKey(passphrase: String, salt: [UInt8]) throws(SatchelError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        let utf8 = Array(passphrase.utf8)
        let status = utf8.withUnsafeBufferPointer { text in
            out.withUnsafeMutableBufferPointer { out in
                text.baseAddress!.withMemoryRebound(to: CChar.self, capacity: max(utf8.count, 1)) { chars in
                    satchel_derive_key(chars, utf8.count, salt, salt.count, out.baseAddress)
                }
            }
        }
        guard status == 0 else { throw SatchelError(.io, "deriving the key from the passphrase failed (OpenSSL scrypt)") }
        return out
    }

    /// What an encrypted file's first bytes say (CLevelDBEncryption owns that header).
    enum FileHeader: Equatable {
        case encrypted(keyID: [UInt8])
        case notEncrypted
        case truncated
        case laterFormat
    }

    static let fileHeaderSize = Int(SATCHEL_FILE_HEADER_SIZE)

    static func fileHeader(_ bytes: [UInt8]) -> FileHeader {
        var id = [UInt8](repeating: 0, count: 16)
        switch id.withUnsafeMutableBufferPointer({ satchel_read_file_header(bytes, bytes.count, $0.baseAddress) }) {
        case 0: return .encrypted(keyID: id)
        case 1: return .notEncrypted
        case 2: return .truncated
        default: return .laterFormat
        }
    }
}

/// The store's key file, `STORE/satchel.key`: the data key sealed under the app's key. 108
/// bytes (docs/ENCRYPTION.md):
///
/// | bytes | field |
/// | --- | --- |
/// | 0–7 | magic `SatchKey` |
/// | 8–11 | format version, little-endian: 1 |
/// | 12 | how the app's key is made: 0 given as 32 bytes, 1 scrypt of a passphrase |
/// | 13 | flags: 1 when the store's files are tamper-evident (authenticated chunks and frames) |
/// | 14–15 | zero |
/// | 16–31 | the scrypt salt (zero for a given key) |
/// | 32–47 | the data key's id (in every encrypted file's header) |
/// | 48–107 | the data key, AES-256-GCM-sealed under the app's key (nonce, 32 bytes, tag), bytes 0–47 authenticated with it |
///
/// Changing the app's key rewrites this file only; the data key changes with `rekey`.
struct KeyFile: Equatable {
    static let name = "satchel.key"
    static let magic = Array("SatchKey".utf8)
    static let size = 108

    var derivation: UInt8
    /// Bit 0: the store's files are tamper-evident.
    var flags: UInt8 = 0
    var salt: [UInt8]
    var keyID: [UInt8]
    var sealed: [UInt8]

    /// The first 48 bytes: what the seal authenticates besides the data key.
    var header: [UInt8] {
        var bytes = Self.magic
        bytes += [1, 0, 0, 0, derivation, flags, 0, 0]
        bytes += salt
        bytes += keyID
        return bytes
    }

    var bytes: [UInt8] { header + sealed }

    var tamperEvident: Bool { flags & 1 != 0 }

    /// A key file sealing `dataKey` under `key`.
    static func sealing(_ dataKey: DataKey, under key: EncryptionKey, tamperEvident: Bool) throws(SatchelError) -> KeyFile {
        var file = KeyFile(derivation: 0, salt: [UInt8](repeating: 0, count: 16), keyID: dataKey.keyID, sealed: [])
        file.flags = tamperEvident ? 1 : 0
        if case .passphrase = key.source {
            file.derivation = 1
            file.salt = try Sealing.randomBytes(16)
        }
        file.sealed = try Sealing.seal(dataKey.bytes, key: try key.keyBytes(salt: file.salt), context: file.header)
        return file
    }

    /// The data key, or `.wrongKey` when `key` is not the one it was sealed under.
    func unseal(with key: EncryptionKey, store: String) throws(SatchelError) -> DataKey {
        if (derivation == 1) != (key.isPassphrase) {
            throw SatchelError(
                .wrongKey,
                "the store at \(store) is encrypted with \(derivation == 1 ? "a passphrase" : "a 256-bit key"), not \(key.isPassphrase ? "a passphrase" : "a key")"
            )
        }
        guard let bytes = Sealing.open(sealed, key: try key.keyBytes(salt: salt), context: header), bytes.count == 32 else {
            throw SatchelError(.wrongKey, "the key does not open the store at \(store)")
        }
        return DataKey(bytes: bytes, keyID: keyID)
    }

    init(derivation: UInt8, salt: [UInt8], keyID: [UInt8], sealed: [UInt8]) {
        (self.derivation, self.salt, self.keyID, self.sealed) = (derivation, salt, keyID, sealed)
    }

    init(bytes: [UInt8], store: String) throws(SatchelError) {
        guard bytes.count == Self.size, Array(bytes[0..<8]) == Self.magic, bytes[13] <= 1, bytes[14..<16].allSatisfy({ $0 == 0 }) else {
            throw SatchelError(.corruption, "the key file of \(store) is damaged (\(bytes.count) bytes, not a Satchel key file)")
        }
        guard bytes[8..<12].elementsEqual([1, 0, 0, 0]), bytes[12] <= 1 else {
            throw SatchelError(.unsupportedFormat, "the key file of \(store) is of a later format than this version reads")
        }
        self.init(derivation: bytes[12], salt: Array(bytes[16..<32]), keyID: Array(bytes[32..<48]), sealed: Array(bytes[48...]))
        flags = bytes[13]
    }

    /// The key file of the store at `store`, nil when it has none (the store is not encrypted).
    static func read(store: String) throws(SatchelError) -> KeyFile? {
        let path = store + "/" + name
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else { throw SatchelError(.io, "cannot read \(path)") }
        return try KeyFile(bytes: Array(data), store: store)
    }

    /// Writes the file into `store` durably: a temporary file, synced, renamed over the old one.
    func write(store: String) throws(SatchelError) {
        let path = store + "/" + Self.name
        let temporary = path + ".new"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard descriptor >= 0 else { throw SatchelError(.io, "cannot write \(temporary): \(String(cString: strerror(errno)))") }
        let bytes = self.bytes
        let written = bytes.withUnsafeBytes { Foundation.write(descriptor, $0.baseAddress, $0.count) }
        let synced = fsync(descriptor) == 0
        close(descriptor)
        guard written == bytes.count, synced else {
            unlink(temporary)
            throw SatchelError(.io, "cannot write \(temporary)")
        }
        try FileSystem.rename(temporary, to: path)
        FileSystem.synchronizeDirectory(store)
    }
}

/// The blob files of an encrypted store (docs/ENCRYPTION.md): named by a keyed hash of their
/// bytes (so that names say nothing of the content to someone without the key), each file
/// `SatchBlb`, the format version (1, 4 bytes little-endian), 4 zero bytes, then the bytes sealed
/// with AES-256-GCM under the data key, the first 16 bytes and the file's name authenticated
/// with them (a file moved under another name does not open).
enum SealedBlob {
    static let magic = Array("SatchBlb".utf8)
    static let header = magic + [1, 0, 0, 0, 0, 0, 0, 0]

    /// The file name of `bytes`: 128 bits of HMAC-SHA-256 under the data key, and the length.
    static func name(of bytes: [UInt8], key: DataKey) throws(SatchelError) -> String {
        let hash = try Sealing.keyedHash(bytes, key: key.bytes).prefix(16)
        return Hex.lowercase(hash) + "-" + String(bytes.count, radix: 16)
    }

    static func seal(_ bytes: [UInt8], name: String, key: DataKey) throws(SatchelError) -> [UInt8] {
        header + (try Sealing.seal(bytes, key: key.bytes, context: header + Array(name.utf8)))
    }

    /// The bytes of a sealed file, or `.corruption` naming the file when it is not one this
    /// key sealed under this name.
    static func open(_ file: [UInt8], name: String, key: DataKey) throws(SatchelError) -> [UInt8] {
        guard file.count >= header.count + Sealing.overhead, Array(file[0..<8]) == magic else {
            throw SatchelError(.corruption, "blob \(name) is not an encrypted blob file (damaged, or written without the store's key)")
        }
        guard file[8..<16].elementsEqual(header[8..<16]) else {
            throw SatchelError(.unsupportedFormat, "blob \(name) is encrypted in a later format than this version reads")
        }
        guard let bytes = Sealing.open(Array(file[header.count...]), key: key.bytes, context: header + Array(name.utf8)) else {
            throw SatchelError(.corruption, "blob \(name) is damaged or from another store: it does not open with the store's key")
        }
        return bytes
    }
}

extension KeyBytes {
    /// For the fuzz targets: `bytes` read as an encrypted store reads its own files (an
    /// encrypted file's header, a sealed blob under a fixed key, a key file), through the same
    /// parsers. Returns a broken property (nil when none): a header whose key id is not where
    /// it was read from, a blob that opens without having been sealed, a key file that does not
    /// write back to the same bytes. Throws the key file parser's error.
    package static func readEncryptionRecords(_ bytes: [UInt8]) throws(SatchelError) -> String? {
        switch Sealing.fileHeader(bytes) {
        case .encrypted(let keyID):
            if bytes.count < Sealing.fileHeaderSize || Array(bytes[16..<32]) != keyID { return "a header read with the wrong key id or length" }
        case .truncated:
            if bytes.count >= Sealing.fileHeaderSize { return "a whole header called truncated" }
        case .notEncrypted, .laterFormat: break
        }
        let key = DataKey(bytes: [UInt8](repeating: 7, count: 32), keyID: [UInt8](repeating: 0, count: 16))
        if (try? SealedBlob.open(bytes, name: "fuzz", key: key)) != nil { return "a blob opened that was never sealed" }
        // Last: throws for what is not a key file.
        let file = try KeyFile(bytes: bytes, store: "fuzz")
        return file.bytes == bytes ? nil : "the key file read does not write back to the same bytes"
    }
}
