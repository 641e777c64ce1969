import Foundation

extension Store {
    /// Encrypts the unencrypted store at `path` with `key`, in place as the app sees it.
    ///
    /// The store is copied into `path.converting` with a new data key, the copy opened with
    /// `key` and checked, then the two directories are exchanged in one step and the old
    /// (plain) store removed. Killed at any moment, `path` holds the old store or the new one,
    /// whole; a copy or an old store left at `path.converting` is removed when the store next
    /// opens. Run it with the store closed. The removed plain files are unlinked, not
    /// overwritten: on flash storage their bytes may stay on the device until it reuses them.
    ///
    /// - Throws: ``SatchelError`` `.wrongKey` when the store is already encrypted, `.locked`
    ///   when it is open, `.corruption` when the copy fails its check (nothing changed then).
    public static func encrypt(path: String, key: EncryptionKey, configuration: Configuration = Configuration()) throws {
        try convert(path, opening: nil, to: key, configuration: configuration)
    }

    /// Decrypts the store at `path` (encrypted with `key`), in place as the app sees it, the
    /// same way as ``encrypt(path:key:configuration:)``.
    public static func decrypt(path: String, key: EncryptionKey, configuration: Configuration = Configuration()) throws {
        try convert(path, opening: key, to: nil, configuration: configuration)
    }

    /// Gives the encrypted store at `path` a new data key, sealed under `newKey`: every file is
    /// rewritten (as ``encrypt(path:key:configuration:)`` does), so that the old key, and a
    /// copy of the old key file, no longer open anything written from now on.
    public static func rekey(path: String, from oldKey: EncryptionKey, to newKey: EncryptionKey, configuration: Configuration = Configuration())
        throws
    {
        try convert(path, opening: oldKey, to: newKey, configuration: configuration)
    }

    /// Seals the encrypted store's data key under `newKey` instead of `oldKey`: one small file
    /// rewritten (atomically), the data untouched. Use ``rekey(path:from:to:configuration:)``
    /// when the data key itself may be known.
    ///
    /// - Throws: ``SatchelError`` `.wrongKey` when `oldKey` does not open the store, or it is
    ///   not encrypted.
    public static func changeEncryptionKey(path: String, from oldKey: EncryptionKey, to newKey: EncryptionKey) throws {
        guard let file = try KeyFile.read(store: path) else {
            throw SatchelError(.wrongKey, "the store at \(path) is not encrypted: it has no key to change (encrypt it first)")
        }
        let dataKey = try file.unseal(with: oldKey, store: path)
        try KeyFile.sealing(dataKey, under: newKey, tamperEvident: file.tamperEvident).write(store: path)
    }

    /// Where a conversion builds the new store, and leaves the old one after the exchange.
    static func conversionStaging(_ path: String) -> String {
        // A path that is absolute, with no `.` or `..` component, no `//` and no trailing `/`,
        // is its own standard form: every open asks, and building a URL to standardize it was
        // 4.4 % of opening a settled million-object store.
        // (Over the bytes: `String.contains` of a string goes through Foundation.)
        let bytes = path.utf8
        let standard =
            bytes.first == UInt8(ascii: "/") && bytes.last != UInt8(ascii: "/")
            && !zip(bytes, bytes.dropFirst()).contains { $0 == UInt8(ascii: "/") && ($1 == UInt8(ascii: ".") || $1 == UInt8(ascii: "/")) }
        return (standard ? path : URL(fileURLWithPath: path).standardizedFileURL.path) + ".converting"
    }

    /// The file a conversion holds locked (`flock`) from before it copies the store until it
    /// has removed the old one: while the copy is checked and exchanged the store itself is
    /// closed, and an open then must neither take the copy for a leftover nor write into the
    /// store about to be replaced. A restore holds it too, so that one whole-store replacement
    /// runs at a time.
    static func conversionLock(_ path: String) -> String { conversionStaging(path) + ".lock" }

    /// Removes what a conversion killed midway left beside the store: a partial copy or the
    /// old store (the store at `path` is whole either way).
    ///
    /// - Throws: ``SatchelError`` `.locked` when a conversion of the store is running (unless
    ///   it is the caller's own, `holdingLock`).
    static func removeConversionLeftovers(_ path: String, holdingLock: Bool = false) throws(SatchelError) {
        let staging = conversionStaging(path)
        // Straight to `stat`: every open asks (Foundation's `fileExists` took 3 % of opening a
        // million-object store and asking a first query).
        guard FileSystem.exists(staging) else {
            // A conversion killed before it made its copy leaves only its lock file (a
            // black-box probe): nobody holds it, and it goes.
            if !holdingLock, FileSystem.exists(conversionLock(path)), !FileSystem.isLocked(conversionLock(path)) {
                try? FileManager.default.removeItem(atPath: conversionLock(path))
            }
            return
        }
        if !holdingLock && FileSystem.isLocked(conversionLock(path)) {
            throw SatchelError(
                .locked, "the store at \(path) is being converted (encrypt, decrypt or rekey) by another process: open it once that is done")
        }
        try? FileManager.default.removeItem(atPath: staging)
        if !holdingLock { try? FileManager.default.removeItem(atPath: conversionLock(path)) }
    }

    private static func convert(_ path: String, opening oldKey: EncryptionKey?, to newKey: EncryptionKey?, configuration: Configuration) throws {
        let fileManager = FileManager.default
        let target = URL(fileURLWithPath: path).standardizedFileURL.path
        var isDirectory: ObjCBool = false
        guard fileManager.fileExists(atPath: target, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw SatchelError(.storeMissing, "no store at \(path)")
        }
        // What a killed conversion left goes first, as every open removes it: refused below,
        // this conversion would leave a plain copy on the disk (a black-box probe).
        try removeConversionLeftovers(target)
        if oldKey == nil, try KeyFile.read(store: target) != nil {
            throw SatchelError(.wrongKey, "the store at \(path) is already encrypted (rekey gives it another key)")
        }
        let staging = conversionStaging(target)
        let lockPath = conversionLock(target)
        let lock = try FileSystem.hold(
            lockPath,
            refused: SatchelError(.locked, "the store at \(path) is being converted (encrypt, decrypt or rekey) or restored by another process"))
        // When the conversion failed, the copy went (or is left for the next open, which finds
        // no lock held and removes it).
        defer { FileSystem.release(lock, at: lockPath) }
        try removeConversionLeftovers(target, holdingLock: true)

        var sourceConfiguration = configuration
        sourceConfiguration.createIfMissing = false
        sourceConfiguration.encryptionKey = oldKey
        let source = try Store(path: target, configuration: sourceConfiguration)
        let copyEncryption: CopyEncryption
        if let newKey {
            let dataKey = try DataKey.random()
            let tamperEvident = configuration.tamperEvidence
            copyEncryption = .encrypted(
                EncryptedEnvironment(dataKey: dataKey, tamperEvident: tamperEvident),
                try KeyFile.sealing(dataKey, under: newKey, tamperEvident: tamperEvident))
        } else {
            copyEncryption = .plain
        }
        do {
            try fileManager.createDirectory(atPath: staging, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            _ = try source.copy(into: staging, encryption: copyEncryption, progress: nil)
            try source.close()
        } catch {
            try? source.close()
            try? fileManager.removeItem(atPath: staging)
            throw error
        }
        do {
            var checking = configuration
            checking.createIfMissing = false
            checking.encryptionKey = newKey
            let copy = try Store(path: staging, configuration: checking)
            let report = try copy.verify()
            try copy.close()
            guard report.isHealthy else {
                throw SatchelError(
                    .corruption, "the converted copy fails its check (\(report.problems.first ?? "?")); the store at \(path) is unchanged")
            }
        } catch {
            try? fileManager.removeItem(atPath: staging)
            throw error
        }
        FileSystem.synchronizeDirectory(staging)
        try FileSystem.exchange(staging, target)
        FileSystem.synchronizeDirectory(URL(fileURLWithPath: target).deletingLastPathComponent().path)
        // The old store beside the new one is a leftover now, which an open may remove: the
        // lock file goes first, so that a kill from here on leaves none beside the store.
        try? FileManager.default.removeItem(atPath: lockPath)
        try removeConversionLeftovers(target, holdingLock: true)
    }
}
