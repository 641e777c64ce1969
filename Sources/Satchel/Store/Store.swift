public import Foundation
public import Logging
import Synchronization

/// An open Satchel store: a directory holding one LevelDB database per ``Partition``.
///
/// ```swift
/// let store = try Store(path: "/path/to/MyApp.satchel")
/// let products = try store.model("Product")
/// let widget = try products.create(["name": "Widget", "brand": "Acme", "price": 9.5])
/// try products.update(widget.id, with: ["price": 12, "brand": .null])   // null removes `brand`
/// let acme = try products.findAll(where: ["brand": "Acme"])
/// try store.bulkUpdate { tx in
///     try tx.create(["name": "Gadget"], in: products)
///     try tx.delete(widget.id, in: products)
/// }
/// try store.close()
/// ```
///
/// Thread safety: `Store` is `Sendable`. Reads run concurrently from any thread, each on a
/// consistent view of the data. Writes are serialised: one ``bulkUpdate(durable:_:)`` (or
/// single-object write) at a time, each applied atomically. Writes are not reentrant: calling a
/// write from inside a `bulkUpdate` block stops the program; use the block's ``Transaction``.
///
/// A store directory can be open in one `Store` of one process at a time; a second open fails with
/// ``SatchelError/Code/locked``.
public final class Store: Sendable {
    /// Knobs for opening a store. Defaults suit a mobile app's offline cache.
    public struct Configuration: Sendable {
        /// Bytes of LRU block cache per partition (default 32 MiB, filled only as blocks are
        /// read). The cache holds uncompressed blocks: a read it serves skips the file read, the
        /// checksum and the decompression. On a million objects a get took 8.8 µs with
        /// LevelDB's default 8 MiB and 7.3 µs with 32 MiB.
        public var blockCacheSize = 32 << 20
        /// Bits per key of the bloom filter that spares disk reads for absent keys (default 10;
        /// 0 turns it off).
        public var bloomFilterBitsPerKey = 10
        /// Bytes of writes buffered in memory before LevelDB writes a table file (default 32 MiB).
        ///
        /// Index entries land all over the key space, so a small buffer (LevelDB's default is
        /// 4 MiB) flushes often and makes compactions rewrite the same data again and again:
        /// loading a million objects with two indexes went from 69,000 to 235,000 objects
        /// a second (raw LevelDB) when the buffer grew from 4 to 64 MiB. The memory is used only
        /// while writes are buffered, up to twice this size during a flush: importing a million
        /// objects peaked at 133 MB of memory with 64 MiB, and at 90 MB with 32 MiB, at a rate
        /// within noise; loading a million objects with two indexes kept its rate (85,500–88,800
        /// objects a second, against 87,200–87,400 with 64 MiB).
        public var writeBufferSize = 32 << 20
        /// When true, every write waits until the data reaches the disk (`fsync`), so it survives
        /// a machine crash, at a large cost in write speed. When false (the default), a write
        /// survives a crash of the process but the last writes may be lost if the machine fails.
        public var durableWrites = false
        /// Create the directory and databases when missing (default true).
        public var createIfMissing = true
        /// Table files each partition keeps open (default 200).
        public var maxOpenFiles = 200
        /// Bytes of data per LevelDB block before compression (default 4 KiB): the unit of the
        /// block cache and of each read from disk.
        public var blockSize = 4096
        /// Bytes LevelDB writes to one table file before starting another (default 2 MiB).
        public var maxFileSize = 2 << 20
        /// Compress blocks with Snappy (default true): about half the disk space, some CPU on
        /// every block read from disk.
        public var compression = true
        /// Verify the checksum of every block read from disk (default true): damaged data then
        /// fails with `corruption` instead of coming back wrong.
        public var verifyChecksums = true
        /// The app's key to an encrypted store (nil: the store is not encrypted). A new store
        /// opened with a key is created encrypted; an encrypted store opens only with its key,
        /// and an unencrypted one only without a key (``Store/encrypt(path:key:configuration:)``
        /// turns one into the other). See ``EncryptionKey`` and the Encryption article.
        public var encryptionKey: EncryptionKey?
        /// Whether a store encrypted from now on (created with a key, or by
        /// ``Store/encrypt(path:key:configuration:)`` or ``Store/rekey(path:from:to:configuration:)``)
        /// seals its files in authenticated chunks (AES-256-GCM), so that a changed byte is an
        /// error rather than changed data (default true). A store keeps the choice it was
        /// encrypted with; its key file records it.
        public var tamperEvidence = true

        /// Refuse every query (outside transactions) whose plan would scan a whole model:
        /// ``SatchelError/Code/unindexedQuery``, naming the attribute to index. Queries can ask
        /// the same one by one (``Query/requiresIndex``).
        public var refusesFullScans = false
        /// Log a warning (rather than refuse, see ``refusesFullScans``) for every query outside
        /// transactions whose plan scans a whole model, naming the attribute to index.
        public var warnsOnFullScans = false
        /// Where the store logs (swift-log): lock conflicts and, with ``warnsOnFullScans``,
        /// queries that scan a whole model. By default nothing is logged.
        public var logger = Logger(label: "satchel.store", factory: { _ in SwiftLogNoOpLogHandler() })

        public init() {}
    }

    /// The store directory.
    public let path: String
    /// The configuration the store was opened with.
    public let configuration: Configuration

    /// The `user` partition's database, open while the store is (it holds the store's lock).
    let user: LevelDB
    /// The other partitions' databases, opened when first written to (``PartitionDatabase``).
    let app: PartitionDatabase
    let local: PartitionDatabase
    /// The encrypting Env the partitions were opened with (nil: not encrypted).
    let encryption: EncryptedEnvironment?
    let catalog: Locked<Catalog>
    /// Bumped whenever a model definition or an index changes (not statistics), so transactions
    /// can cache the entry of the model they write.
    let catalogVersion = Atomic<Int>(0)
    /// Subscribers to committed change sets (``changes``, ``Model/observe(_:)``).
    let changeObservers = ChangeObservers()
    /// Called with the model and id after an edit session saved changes to an object of a model
    /// that records them: a sync engine that pushes saved edits at once sets it (see
    /// `SyncEngine.pushSavedEdits()`).
    let editSaved = Locked<(@Sendable (_ model: String, _ id: String) -> Void)?>(nil)

    /// Calls the edit-saved handler, when one is set.
    func notifyEditSaved(_ model: String, _ id: String) { editSaved.withLock { $0 }?(model, id) }

    /// Sets (or, with nil, clears) what is called after an edit session saved changes to an
    /// object of a synced model.
    package func setEditSavedHandler(_ handler: (@Sendable (_ model: String, _ id: String) -> Void)?) {
        editSaved.withLock { $0 = handler }
    }
    let writer = WriterLock()
    #if DEBUG
    /// Crash points for tests (debug builds only).
    let faultHooks = Locked(FaultHooks())

    /// Runs `hook` right after each batch that gives objects new ids (a sync's renames) lands;
    /// a hook that throws stops the work there, as a crash would (debug builds only).
    func afterRenameBatch(_ hook: (@Sendable () throws -> Void)?) { faultHooks.withLock { $0.afterRenameBatch = hook } }
    #endif

    // MARK: - Opening and closing

    /// Opens the store in the directory at `url` (a file URL), as ``init(path:configuration:)``
    /// does.
    ///
    /// - Throws: ``SatchelError`` `.invalidArgument` for a URL that is not a file URL; what
    ///   ``init(path:configuration:)`` throws.
    public convenience init(url: URL, configuration: Configuration = Configuration()) throws {
        guard url.isFileURL else {
            throw SatchelError(.invalidArgument, "a store lives in a directory: \(url.absoluteString) is not a file URL")
        }
        try self.init(path: url.path(percentEncoded: false), configuration: configuration)
    }

    /// Opens the store in directory `path`, creating it when missing (unless the configuration
    /// says otherwise).
    ///
    /// - Throws: ``SatchelError`` `.locked` when another process or `Store` holds the directory,
    ///   `.storeMissing` when it does not exist and creation is off, `.unsupportedFormat` when a
    ///   newer Satchel wrote it, `.corruption` or `.io` for damaged files.
    public convenience init(path: String, configuration: Configuration = Configuration()) throws {
        try self.init(path: path, configuration: configuration, checkingRestore: false)
    }

    /// Opens the store at `path`; `checkingRestore`: it is a restore's copy, checked before it
    /// is swapped in (its marker says so, which every other open refuses).
    init(path: String, configuration: Configuration, checkingRestore: Bool) throws {
        self.path = path
        self.configuration = configuration
        // The partitions whose directories the store holds (none when it is made now).
        var partitionDirectories: [Partition] = []
        switch FileSystem.isDirectory(path) {
        case nil:
            guard configuration.createIfMissing else {
                throw SatchelError(.storeMissing, "no store at \(path)")
            }
            do {
                // Readable by the owner only: the store holds the user's data and the session.
                try FileManager.default.createDirectory(
                    atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw SatchelError(.io, "cannot create the store directory \(path): \(error.localizedDescription)")
            }
        case false?:
            throw SatchelError(.invalidArgument, "\(path) is a file, not a store directory")
        case true?:
            partitionDirectories = try Self.checkIsStore(path, creating: configuration.createIfMissing, checkingRestore: checkingRestore)
            // Before the key is asked for: a killed decrypt's copy holds the data in the clear,
            // and must not outlive opens that are refused (no key, a wrong one).
            try Self.removeConversionLeftovers(path)
        }
        let encryption = try Self.encryption(
            of: path, key: configuration.encryptionKey, creating: configuration.createIfMissing, tamperEvidence: configuration.tamperEvidence)
        self.encryption = encryption
        var options = LevelDBOptions()
        options.environment = encryption
        options.createIfMissing = configuration.createIfMissing
        options.blockCacheSize = configuration.blockCacheSize
        options.bloomBitsPerKey = configuration.bloomFilterBitsPerKey
        options.writeBufferSize = configuration.writeBufferSize
        options.maxOpenFiles = configuration.maxOpenFiles
        options.blockSize = configuration.blockSize
        options.maxFileSize = configuration.maxFileSize
        options.snappyCompression = configuration.compression
        options.verifyChecksums = configuration.verifyChecksums
        options.rememberedPrefixes = Keys.readByOpen
        let baseOptions = options
        @Sendable func open(_ partition: Partition, creating: Bool) throws(SatchelError) -> LevelDB {
            let directory = path + "/" + partition.rawValue
            Self.restrictToOwner(directory, creating: creating)
            var partitionOptions = baseOptions
            partitionOptions.createIfMissing = creating
            do throws(SatchelError) {
                return try LevelDB(path: directory, options: partitionOptions)
            } catch {
                if error.code == .corruption, encryption == nil, let file = Self.encryptedFileWithoutKeyFile(in: path) {
                    throw Self.keyFileMissing(path, file)
                }
                if error.code == .locked {
                    configuration.logger.error("the store is open elsewhere", metadata: ["path": "\(path)", "partition": "\(partition.rawValue)"])
                }
                if error.code == .storeMissing {
                    // A partition directory without a database (its making killed before its
                    // first file): no store yet, said in the store's words, not LevelDB's (a
                    // black-box probe). A command that writes makes it.
                    throw SatchelError(.storeMissing, "no store at \(path): its \(partition.rawValue) directory holds no database yet")
                }
                throw error
            }
        }
        // `user` first: it holds the store's lock. Then the other partitions whose directory
        // exists (side by side when both do: each open may write and sync a new manifest);
        // the rest are made when first written to.
        let user = try open(.user, creating: configuration.createIfMissing)
        let others = [Partition.app, .local].filter { partitionDirectories.contains($0) }
        let opened = Locked<[Partition: Result<LevelDB, SatchelError>]>([:])
        DispatchQueue.concurrentPerform(iterations: others.count) { index in
            let result = Result { () throws(SatchelError) -> LevelDB in try open(others[index], creating: true) }
            opened.withLock { $0[others[index]] = result }
        }
        let databases = opened.withLock { $0 }
        func database(_ partition: Partition) throws(SatchelError) -> PartitionDatabase {
            PartitionDatabase(
                partition: partition, directory: path + "/" + partition.rawValue, options: options, durable: configuration.durableWrites,
                opened: try databases[partition]?.get())
        }
        let app = try database(.app)
        let local = try database(.local)
        self.user = user
        self.app = app
        self.local = local
        var catalog = Catalog()
        for (partition, db) in Self.openPartitions(user: user, app: app, local: local) {
            try Self.checkFormat(of: db, partition: partition, durable: configuration.durableWrites)
            try Self.loadModels(from: db, partition: partition, into: &catalog)
        }
        self.catalog = Locked(catalog)
        try resumeDrops()
        try countArrays()
        try recountInterruptedImports()
        // Migrations a kill interrupted, when their steps have a JSON form; one that fails
        // stays unfinished (check reports it), and the store opens all the same.
        resumeMigrations()
        // References a rename's batch left for other partitions, when the process died before
        // rewriting them: before anything reads those models. A failure leaves them for the
        // next sync (and `verify` reports them).
        try? finishRewrites()
    }

    /// Whether the existing directory `path` may be opened as a store: it holds a partition
    /// (`user`, `app` or `local`) each of which is empty or holds a LevelDB database's files,
    /// or, when a store may be created, nothing at all. Anything else (an unfinished backup, a
    /// `user` directory of other files) is refused before a file is written into it (LevelDB
    /// makes a database's directory, and its lock file, before it finds it missing).
    /// Returns the partitions whose directories it holds.
    ///
    /// (Every open asks: `stat`s first, a listing only where they do not settle it. Listing a
    /// partition's directory, a file per table, was 7 % of opening a million-object store and
    /// asking a first query.)
    @discardableResult
    static func checkIsStore(_ path: String, creating: Bool, checkingRestore: Bool = false) throws(SatchelError) -> [Partition] {
        if FileSystem.exists(path + "/" + unfinishedBackupMarker) {
            throw SatchelError(.notAStore, "\(path) is an unfinished backup, not a store: run the backup again")
        }
        // A restore's copy, killed before it was checked and swapped in (a black-box probe: a
        // repair made it a store, a write went in, and the next restore removed both).
        if !checkingRestore, FileSystem.exists(path + "/" + unfinishedRestoreMarker) {
            throw SatchelError(.notAStore, "\(path) is an unfinished restore's copy, not a store: run the restore again")
        }
        let partitions = Partition.allCases.filter { FileSystem.exists(path + "/" + $0.rawValue) }
        if !partitions.isEmpty {
            for name in partitions.map(\.rawValue).sorted() {
                // A database's `CURRENT` says enough.
                if FileSystem.exists(path + "/" + name + "/CURRENT") { continue }
                guard let inside = FileSystem.names(in: path + "/" + name), !inside.isEmpty, !inside.contains(where: isDatabaseFile) else { continue }
                throw SatchelError(
                    .notAStore,
                    "\(path) is not a Satchel store: its \(name) directory holds other files (\(inside.sorted().prefix(3).joined(separator: ", ")))")
            }
            return partitions
        }
        let entries = FileSystem.names(in: path) ?? []
        // A new encrypted store's key file is written before its partitions.
        if entries.isEmpty || entries == [KeyFile.name] {
            if creating { return [] }
            throw SatchelError(.storeMissing, "no store at \(path): the directory is empty")
        }
        throw SatchelError(
            .notAStore, "\(path) is not a Satchel store: it holds other files (\(entries.sorted().prefix(3).joined(separator: ", ")))")
    }

    /// Whether `name` is one of the files LevelDB keeps in a database's directory.
    private static func isDatabaseFile(_ name: String) -> Bool {
        ["CURRENT", "LOCK", "LOG", "LOG.old"].contains(name) || name.hasPrefix("MANIFEST-")
            || [".ldb", ".log", ".sst", ".dbtmp"].contains { name.hasSuffix($0) }
    }

    /// The Env that encrypts the store at `path` with its data key, unsealed with `key`; nil
    /// for a store that is not encrypted. A new store (no partition yet) opened with a key gets
    /// a new data key, its key file written before anything else.
    static func encryption(of path: String, key: EncryptionKey?, creating: Bool, tamperEvidence: Bool = true) throws(SatchelError)
        -> EncryptedEnvironment?
    {
        let keyFile = try KeyFile.read(store: path)
        switch (keyFile, key) {
        case (nil, nil): return nil
        case (let file?, let key?):
            let dataKey = try file.unseal(with: key, store: path)
            if let other = fileOfAnotherKey(in: path, keyID: dataKey.keyID) {
                throw SatchelError(
                    .wrongKey,
                    "the store at \(path) holds files encrypted with another key than its key file \(KeyFile.name) seals (\(other) is): the key file is not this store's (an older copy?); put the store's own back; nothing was changed, and repair cannot read the store without it"
                )
            }
            return EncryptedEnvironment(dataKey: dataKey, tamperEvident: file.tamperEvident)
        case (_?, nil):
            throw SatchelError(.wrongKey, "the store at \(path) is encrypted: open it with its key (--key-file)")
        case (nil, let key?):
            let hasData = Partition.allCases.contains { FileManager.default.fileExists(atPath: path + "/" + $0.rawValue) }
            if hasData {
                if let file = encryptedFileWithoutKeyFile(in: path) { throw keyFileMissing(path, file) }
                throw SatchelError(.wrongKey, "the store at \(path) is not encrypted: open it without a key, or encrypt it first (satchel encrypt)")
            }
            guard creating else { throw SatchelError(.storeMissing, "no store at \(path)") }
            let dataKey = try DataKey.random()
            try KeyFile.sealing(dataKey, under: key, tamperEvident: tamperEvidence).write(store: path)
            return EncryptedEnvironment(dataKey: dataKey, tamperEvident: tamperEvidence)
        }
    }

    /// The error for a store whose files are encrypted but whose key file is gone: read without
    /// a key its files look damaged, and repair would keep nothing of them.
    static func keyFileMissing(_ path: String, _ file: String) -> SatchelError {
        SatchelError(
            .wrongKey,
            "the store at \(path) is encrypted (\(file) is), but its key file \(KeyFile.name) is missing: put it back (from a backup of the store) and open it with its key; nothing was changed, and repair cannot read the store without it"
        )
    }

    /// A file of the store at `path` that holds an encrypted file's header (its partitions'
    /// `CURRENT`, else their first file), relative to `path`; nil when none does. Asked only
    /// when a store without a key file fails to open, or is to be repaired.
    static func encryptedFileWithoutKeyFile(in path: String) -> String? {
        for partition in Partition.allCases {
            let directory = path + "/" + partition.rawValue
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { continue }
            let candidates = names.contains("CURRENT") ? ["CURRENT"] : names.sorted().filter { $0 != "LOCK" && $0 != "LOG" }.prefix(1).map { $0 }
            for name in candidates {
                guard let handle = FileHandle(forReadingAtPath: directory + "/" + name) else { continue }
                defer { try? handle.close() }
                let bytes = [UInt8]((try? handle.read(upToCount: Sealing.fileHeaderSize)) ?? Data())
                switch Sealing.fileHeader(bytes) {
                case .encrypted, .laterFormat: return partition.rawValue + "/" + name
                case .notEncrypted, .truncated: continue
                }
            }
        }
        return nil
    }

    /// A partition's `CURRENT` of the store at `path` encrypted under another data key than
    /// `keyID` (relative to `path`), when none is encrypted under it: the key file was replaced.
    /// Nil otherwise (a damaged header is the open's to report).
    static func fileOfAnotherKey(in path: String, keyID: [UInt8]) -> String? {
        var other: String?
        for partition in Partition.allCases {
            let name = partition.rawValue + "/CURRENT"
            guard let handle = FileHandle(forReadingAtPath: path + "/" + name) else { continue }
            defer { try? handle.close() }
            guard case .encrypted(let id) = Sealing.fileHeader([UInt8]((try? handle.read(upToCount: Sealing.fileHeaderSize)) ?? Data())) else {
                continue
            }
            if id == keyID { return nil }
            other = other ?? name
        }
        return other
    }

    /// Makes a partition's directory readable by the owner only (creating it so when allowed),
    /// before LevelDB writes into it: LevelDB makes its files readable by everyone (0644), so
    /// the directory is what keeps other users out, the directory the app gave included. A
    /// directory made by an older version is narrowed the same way; failing that (another
    /// owner), it is left as it is.
    static func restrictToOwner(_ directory: String, creating: Bool) {
        if let mode = FileSystem.permissions(of: directory) {
            if mode & 0o077 != 0 { FileSystem.setPermissions(mode & 0o700, of: directory) }
        } else if creating {
            FileSystem.makeDirectory(directory, mode: 0o700)
        }
    }

    /// Closes the store. Idempotent.
    ///
    /// After writes, a close writes what LevelDB holds in memory (up to
    /// ``Configuration/writeBufferSize``) into a table file and syncs it — the work the next open
    /// would otherwise do — so that the next open starts at once, writing nothing (unless that
    /// table would start a compaction, which the close would wait for).
    ///
    /// - Throws: ``SatchelError`` `.busy` while iterators or calls still use it.
    public func close() throws {
        changeObservers.finishAll()
        // `user` last: it holds the store's lock, so no other process opens the store while
        // the other partitions close.
        var firstError: (any Error)?
        for partition in [app, local] {
            do { try partition.close() } catch { firstError = firstError ?? error }
        }
        do { try user.close() } catch { firstError = firstError ?? error }
        if let firstError { throw firstError }
    }

    /// The database of `partition`, opened (and made) when first used.
    @inline(__always)
    func database(_ partition: Partition) throws(SatchelError) -> LevelDB {
        switch partition {
        case .user: user
        case .app: try app.database()
        case .local: try local.database()
        }
    }

    /// The partitions whose databases are open, in partition order: those that hold anything.
    /// A partition not among them has no directory and nothing in it.
    var openPartitions: [(partition: Partition, database: LevelDB)] { Self.openPartitions(user: user, app: app, local: local) }

    private static func openPartitions(user: LevelDB, app: PartitionDatabase, local: PartitionDatabase) -> [(
        partition: Partition, database: LevelDB
    )] {
        [(Partition.user, user)] + [app, local].compactMap { p in p.ifOpened.map { (p.partition, $0) } }
    }

    static func checkFormat(of db: LevelDB, partition: Partition, durable: Bool) throws {
        // Read as a prefix: the key ends its string, so nothing else starts with it.
        if let stored = try db.entries(withPrefix: Keys.format).first?.value {
            guard let version = (try? JSONValue(parsing: stored))?.intValue else {
                throw SatchelError(.corruption, "the \(partition.rawValue) partition has an unreadable format version")
            }
            if version > Keys.formatVersion {
                throw SatchelError(
                    .unsupportedFormat,
                    "the \(partition.rawValue) partition uses format \(version); this Satchel reads format \(Keys.formatVersion)")
            }
            if version < Keys.formatVersion {
                // Earlier formats are subsets of this one: the marker rises (so that earlier code
                // refuses what this code may write), nothing else moves.
                var batch = LevelDBWriteBatch()
                batch.put(Keys.format, JSONValue.int(Keys.formatVersion).jsonBytes)
                try db.write(batch, sync: durable)
            }
            return
        }
        // A new database: it must be empty, or it is not a Satchel store.
        let iterator = try db.makeIterator()
        iterator.seekToFirst()
        if iterator.isValid {
            throw SatchelError(.corruption, "the \(partition.rawValue) partition holds data but no Satchel format marker")
        }
        try iterator.checkError()
        var batch = LevelDBWriteBatch()
        batch.put(Keys.format, JSONValue.int(Keys.formatVersion).jsonBytes)
        try db.write(batch, sync: durable)
    }

    private static func loadModels(from db: LevelDB, partition: Partition, into catalog: inout Catalog) throws {
        var statistics: [[UInt8]: [UInt8]] = [:]
        for entry in try db.entries(withPrefix: Keys.modelStatisticsPrefix) { statistics[entry.key] = entry.value }
        for entry in try db.entries(withPrefix: Keys.modelDefinitionPrefix) {
            let definition: ModelDefinition
            do {
                definition = try ModelDefinition(json: try JSONObject(parsing: entry.value))
            } catch let error as SatchelError where error.code == .corruption {
                throw error
            } catch {
                throw SatchelError(.corruption, "undecodable model definition in the \(partition.rawValue) partition: \(error)")
            }
            guard definition.partition == partition else {
                throw SatchelError(.corruption, "model '\(definition.name)' is defined in the wrong partition")
            }
            let stored = try statistics[Keys.modelStatistics(definition.name)].map { bytes in
                try bytes.withUnsafeBytes { bytes throws(SatchelError) in try StoredStatistics(decoding: bytes) }
            }
            catalog.models[NameKey(definition.name)] = ModelEntry(definition: definition, statistics: stored ?? StoredStatistics())
        }
        // Index definitions: (meta, "index", model, id).
        let indexPrefix = Keys.indexDefinitionPrefix
        for entry in try db.entries(withPrefix: indexPrefix) {
            let model = try entry.key.withUnsafeBytes { key throws(SatchelError) in
                var decoder = KeyDecoder(key, from: indexPrefix.count)
                return try decoder.readString()
            }
            guard let json = try? JSONObject(parsing: entry.value) else {
                throw SatchelError(.corruption, "undecodable index definition of '\(model)'")
            }
            let index = try StoredIndex(json: json, model: model)
            guard catalog.models[NameKey(model)] != nil else {
                throw SatchelError(.corruption, "an index definition of an unknown model '\(model)' in the \(partition.rawValue) partition")
            }
            catalog.models[NameKey(model)]?.indexes.append(index)
        }
        for key in catalog.models.keys { catalog.models[key]?.indexes.sort { $0.id < $1.id } }
    }

    // MARK: - Models

    /// The model named `name`, registering it with the default definition (a property bag in
    /// the `user` partition, synced incrementally) when the store does not know it yet.
    /// Any name is one: empty, with `/`, NUL or any Unicode.
    public func model(_ name: String) throws -> Model {
        if catalog.withLock({ $0.models[NameKey(name)] != nil }) { return Model(store: self, name: name) }
        return try register(ModelDefinition(name: name), replacingExisting: false)
    }

    /// Registers a model, or updates the stored definition of an existing one.
    ///
    /// A model's partition can change only while it holds no objects and no pending changes.
    ///
    /// - Throws: ``SatchelError`` `.invalidName`, `.modelConflict` for a partition change of a
    ///   model that holds data, `.schemaViolation` for a fixed schema some of the model's objects
    ///   do not fit (naming how many and the first; a ``Migration`` brings them there).
    @discardableResult
    public func register(_ definition: ModelDefinition) throws -> Model {
        try register(definition, replacingExisting: true)
    }

    private func register(_ definition: ModelDefinition, replacingExisting: Bool) throws -> Model {
        if case .fixedSchema(let schema) = definition.kind, schema.keys.contains(Object.idAttribute) {
            throw SatchelError(.invalidName, "'object' is the object id, not a schema attribute", model: definition.name)
        }
        let key = NameKey(definition.name)
        // Registration is not part of a transaction: inside a bulkUpdate block (this thread holds
        // the writer lock) it writes at once, and stays even if the block later throws.
        try writer.withLock(allowingReentry: true) {
            let existing = catalog.withLock { $0.models[key] }
            if let existing {
                if !replacingExisting || existing.definition == definition { return }
                if existing.definition.kind != definition.kind && existing.statistics.objects > 0 {
                    // Objects the new schema refuses would refuse every later update of theirs.
                    let misfits = try objectsMisfitting(definition, partition: existing.definition.partition)
                    if let first = misfits.first {
                        throw SatchelError(
                            .schemaViolation,
                            "model '\(definition.name)' cannot take this schema: \(misfits.count) of \(existing.statistics.objects) objects do not fit it, e.g. \(first.message); migrate them first (a migration with a setKind step)",
                            model: definition.name, objectID: first.objectID)
                    }
                }
                if existing.definition.partition != definition.partition {
                    guard existing.statistics.objects == 0 && existing.statistics.pendingTotal == 0 else {
                        throw SatchelError(
                            .modelConflict,
                            "model '\(definition.name)' holds data in the \(existing.definition.partition.rawValue) partition; its partition cannot change",
                            model: definition.name)
                    }
                    // Remove from the old partition first: a crash in between leaves the (empty)
                    // model unregistered, never registered twice.
                    var batch = LevelDBWriteBatch()
                    batch.delete(Keys.modelDefinition(definition.name))
                    batch.delete(Keys.modelStatistics(definition.name))
                    for index in existing.indexes { batch.delete(Keys.indexDefinition(definition.name, index.id)) }
                    try database(existing.definition.partition).write(batch, sync: configuration.durableWrites)
                }
            }
            var batch = LevelDBWriteBatch()
            batch.put(Keys.modelDefinition(definition.name), definition.json.jsonBytes)
            if let existing, existing.definition.partition != definition.partition {
                // Indexes move with the (empty) model; they have no entries to move.
                for index in existing.indexes { batch.put(Keys.indexDefinition(definition.name, index.id), index.json.jsonBytes) }
                if !existing.indexes.isEmpty { batch.put(Keys.modelStatistics(definition.name), existing.statistics.encoded) }
            }
            try database(definition.partition).write(batch, sync: configuration.durableWrites)
            catalog.withLock {
                $0.models[key] = ModelEntry(
                    definition: definition, statistics: existing?.statistics ?? StoredStatistics(), indexes: existing?.indexes ?? [])
            }
            catalogVersion.add(1, ordering: .releasing)
        }
        return Model(store: self, name: definition.name)
    }

    /// Removes the definition of a model that holds nothing: no objects, no unsynced changes
    /// (pending, in flight or refused). Its indexes, statistics and sync state go with it, in
    /// one batch; a later ``model(_:)`` registers it afresh.
    ///
    /// - Throws: ``SatchelError`` `.notFound` for a model the store does not know,
    ///   `.modelConflict` for one that holds objects or unsynced changes.
    public func unregister(_ name: String) throws {
        try writer.withLock(allowingReentry: true) {
            let entry = try entry(name)
            let statistics = entry.statistics
            guard statistics.objects == 0 && statistics.pendingTotal + statistics.inFlight + statistics.errors == 0 else {
                throw SatchelError(
                    .modelConflict,
                    "model '\(name)' holds \(statistics.objects) objects and \(statistics.pendingTotal + statistics.inFlight + statistics.errors) unsynced changes; only an empty model can be unregistered",
                    model: name)
            }
            let db = try database(entry.definition.partition)
            var batch = LevelDBWriteBatch()
            batch.delete(Keys.modelDefinition(name))
            batch.delete(Keys.modelStatistics(name))
            batch.delete(Keys.syncState(name))
            batch.delete(Keys.migrating(name))
            for index in entry.indexes { batch.delete(Keys.indexDefinition(name, index.id)) }
            // Server versions of objects deleted and synced, and the migrations applied; nothing
            // else of an empty model is left.
            for prefix in [Keys.objectRecordPrefix(.version, name), Keys.migrationPrefix(name)] {
                let iterator = try db.makeIterator(fillCache: false)
                iterator.seek(prefix)
                while iterator.isValid && iterator.keyHasPrefix(prefix) {
                    batch.delete(iterator.key)
                    iterator.next()
                }
                try iterator.checkError()
            }
            try db.write(batch, sync: configuration.durableWrites)
            catalog.withLock { _ = $0.models.removeValue(forKey: NameKey(name)) }
            catalogVersion.add(1, ordering: .releasing)
        }
    }

    /// The definitions of every model, sorted by name bytes.
    public var models: [ModelDefinition] {
        catalog.withLock { $0.models.values.map(\.definition) }.sorted { UTF8Order.less($0.name, $1.name) }
    }

    /// The model named `name` when it is registered, without registering it.
    public func existingModel(_ name: String) -> Model? {
        catalog.withLock { $0.models[NameKey(name)] != nil } ? Model(store: self, name: name) : nil
    }

    func entry(_ name: String) throws(SatchelError) -> ModelEntry {
        // Reads answered from the catalog alone (count, indexes) refuse a closed store as the
        // others do, rather than answer from what it held.
        if user.isClosed { throw SatchelError(.closed, "the store is closed", model: name) }
        guard let entry = catalog.withLock({ $0.models[NameKey(name)] }) else {
            throw SatchelError(.notFound, "no model named '\(name)'", model: name)
        }
        return entry
    }

    // MARK: - Transactions

    /// Runs `body` as one transaction: every write it makes lands atomically in one LevelDB write
    /// batch, or, when `body` throws, none does and the error is rethrown.
    ///
    /// Reads through the transaction see its own writes. A transaction writes the models of one
    /// partition (each partition is its own database); reading others is fine. Transactions do
    /// not nest, and the store's other write methods cannot be called inside `body`.
    ///
    /// ```swift
    /// try store.bulkUpdate { tx in
    ///     let order = try tx.create(["customer": "c1", "total": 0], in: orders)
    ///     try tx.update(order.id, with: ["total": 42], in: orders)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - durable: wait for the data to reach the disk; defaults to the configuration's
    ///     ``Configuration/durableWrites``.
    ///   - body: the writes, made through the ``Transaction``.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws, or the ``SatchelError`` of a failed commit.
    @discardableResult
    public func bulkUpdate<T>(durable: Bool? = nil, _ body: (Transaction) throws -> T) throws -> T {
        try transaction(durable: durable, allowingReentry: false, body)
    }

    /// ``bulkUpdate(durable:_:)``, and, with `allowingReentry`, also on a thread that holds the
    /// writer lock already (a migration holds it across its batches).
    func transaction<T>(durable: Bool? = nil, allowingReentry: Bool, _ body: (Transaction) throws -> T) throws -> T {
        try writer.withLock(allowingReentry: allowingReentry) {
            let transaction = Transaction(store: self)
            defer { transaction.finish() }
            let result = try body(transaction)
            try transaction.commit(durable: durable ?? configuration.durableWrites)
            #if DEBUG
            if transaction.renamed, let hook = faultHooks.withLock({ $0.afterRenameBatch }) { try hook() }
            #endif
            // The references the batch could not rewrite (other partitions). The batch has
            // landed: a failure here leaves the record for the next open or sync, and `verify`
            // reports it meanwhile.
            if transaction.leftRewrites { try? finishRewrites() }
            return result
        }
    }

    /// The store's write path for single operations.
    func write<T>(_ body: (Transaction) throws -> T) throws -> T { try bulkUpdate(body) }

    // MARK: - Maintenance

    /// Compacts every partition: rewrites LevelDB's files so that deleted and overwritten data
    /// no longer takes space and reads touch fewer files. Useful after a bulk import or a large
    /// delete; it can take a while on a large store, and other calls proceed meanwhile. Blob
    /// files that nothing refers to any more are removed too.
    public func compact() throws {
        for (_, db) in openPartitions { try db.compact() }
        // Blob files no object or change refers to any more (older than a minute: a file just
        // stored for an object about to be written is spared).
        try blobs.removeOrphans()
    }

    // MARK: - Change log

    /// Every pending change of every model, by model name, then object id.
    public func pendingChanges() throws -> [PendingChange] {
        try models.flatMap { try Model(store: self, name: $0.name).pendingChanges() }
    }
}

/// The single-writer lock. Writes run one at a time; a write from inside a write is a programming
/// error that would deadlock, so it stops the program with a message instead.
final class WriterLock: Sendable {
    private let lock = NSLock()
    private let owner = Locked<UInt?>(nil)

    func withLock<T>(allowingReentry: Bool = false, _ body: () throws -> T) throws -> T {
        let me = WriterLock.currentThread()
        if owner.withLock({ $0 == me }) {
            if allowingReentry { return try body() }
            preconditionFailure(
                "Satchel writes are not reentrant: inside store.bulkUpdate { tx in … } use tx's methods, not the store's or a model's")
        }
        lock.lock()
        owner.withLock { $0 = me }
        defer {
            owner.withLock { $0 = nil }
            lock.unlock()
        }
        return try body()
    }

    private static func currentThread() -> UInt {
        #if canImport(Darwin)
        UInt(bitPattern: pthread_self())
        #else
        UInt(pthread_self())
        #endif
    }
}

#if DEBUG
/// Points where a test can stop the program's work as a crash would (debug builds only).
struct FaultHooks: Sendable {
    /// Runs right after a batch that gave objects new ids lands.
    var afterRenameBatch: (@Sendable () throws -> Void)?
    /// Runs right after each batch of a migration's rewrites lands.
    var afterMigrationBatch: (@Sendable () throws -> Void)?
}
#endif
