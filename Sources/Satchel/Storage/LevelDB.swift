import CLevelDB
import CLevelDBEncryption
import Foundation
import Synchronization

/// A C pointer that may cross threads.
///
/// `@unchecked Sendable` is safe here because the box is immutable and every pointer put in it
/// is one LevelDB objects as thread-safe: `leveldb_t` ("safe for concurrent access from multiple
/// threads without any external synchronization", `include/leveldb/db.h`), a snapshot (immutable),
/// the LRU cache and bloom filter policy (internally synchronised), the open-listing Env (its
/// state behind a mutex), and read/write options that are never modified after creation.
struct CPointer: @unchecked Sendable {
    let raw: OpaquePointer
}

/// Options for opening one LevelDB database. Internal: the public knobs are in
/// ``Store/Configuration``.
struct LevelDBOptions: Sendable {
    var createIfMissing = true
    /// Size of the LRU block cache, in bytes.
    var blockCacheSize = 8 << 20
    /// Bits per key of the bloom filter used for point gets; 0 turns the filter off.
    var bloomBitsPerKey = 10
    var snappyCompression = true
    var writeBufferSize = 4 << 20
    var maxOpenFiles = 1000
    var blockSize = 4096
    var maxFileSize = 2 << 20
    var verifyChecksums = true
    /// The Env that encrypts the database's files (nil: LevelDB's default, plain files).
    var environment: EncryptedEnvironment?
    /// Whether a clean close leaves a ``CleanCloseRecord``, and an open that finds one matching
    /// appends to the existing log and MANIFEST instead of writing new ones. Plain files only:
    /// an encrypted file is never appended to.
    var reuseLogsAfterCleanClose = true
    /// Key prefixes whose entries a clean close keeps in its record, for the next open to read
    /// without LevelDB (``LevelDB/entries(withPrefix:)``): what every open reads.
    var rememberedPrefixes: [[UInt8]] = []
    /// The longest a close waits for a compaction of level 0 under way (see
    /// ``LevelDB/close()``).
    var level0CompactionWait = Duration.seconds(20)
}

/// An open LevelDB database: the owner of the `leveldb_t*` and of the objects that must outlive it.
///
/// Lifetime rules enforced here:
/// - Every C call, live iterator and live snapshot counts as a *user*. ``close()`` throws `.busy`
///   while any user remains, so a pointer is never freed under a call in flight.
/// - Iterators and snapshots hold the handle strongly, so ARC can never run `deinit` before them.
/// - The block cache and the filter policy are owned here and destroyed after `leveldb_close`,
///   because `leveldb_options_set_cache` and `_set_filter_policy` keep raw pointers to them.
///
/// Thread safety: `Sendable`. LevelDB's `DB` is thread-safe; the user count is an atomic.
final class LevelDB: Sendable {
    let path: String
    private let db: CPointer
    private let cache: CPointer?
    private let filterPolicy: CPointer?
    /// Held so that the Env outlives the database, which keeps a raw pointer to it.
    private let environment: EncryptedEnvironment?
    /// A plain database's Env (LevelDB's default, listing the directory once per open instead
    /// of twice), destroyed after the database.
    private let listingEnvironment: CPointer?
    /// Default read options (block checksums verified, so damaged data is an error, never wrong
    /// data; fill cache on), shared: never modified after init.
    private let readOptions: CPointer
    private let writeOptions: CPointer
    private let syncWriteOptions: CPointer
    let verifyChecksums: Bool
    /// Whether ``close()`` leaves a ``CleanCloseRecord``.
    private let recordsCleanClose: Bool
    /// The longest ``close()`` waits for a compaction of level 0.
    private let level0CompactionWait: Duration
    /// Whether the open went on with the files a ``CleanCloseRecord`` described.
    private let reusedRecordedFiles: Bool
    /// The prefixes whose entries ``close()`` keeps in its record.
    private let rememberedPrefixes: [[UInt8]]
    /// The entries the record this open went on with kept: the database's own until the first
    /// write.
    private let remembered: RememberedEntries?
    /// Whether anything was written (or compacted) since the open.
    private let wrote = Atomic<Bool>(false)
    /// Bit 0: closed. Bits 1...: number of users, counted in steps of 2.
    private let state = Atomic<Int>(0)

    /// Opens (and by default creates) the database at `path`.
    init(path: String, options: LevelDBOptions) throws(SatchelError) {
        self.path = path
        // The directory holds a file per table: it is listed only when `CURRENT` is missing.
        let existing = FileSystem.size(of: path + "/CURRENT") != nil
        if !existing { try Self.refuseHeadlessDatabase(at: path) }
        let opts = Self.makeOptions(options)
        recordsCleanClose = options.reuseLogsAfterCleanClose && options.environment == nil
        let record = recordsCleanClose ? CleanCloseRecord.matching(path) : nil
        if recordsCleanClose, existing, record == nil, let cut = CleanCloseRecord.cutManifest(in: path) {
            throw SatchelError(
                .corruption,
                "\(path) is damaged (\(cut.name) holds \(cut.size) of the \(cut.recorded) bytes its clean close left); nothing was changed: repair the store (satchel repair)"
            )
        }
        var reusing = record != nil
        if reusing {
            satchel_leveldb_options_set_reuse_logs(opts, 1)
        } else if existing {
            // Logs a clean close did not empty are replayed: with paranoid checks a damaged
            // record fails the open (the store is then repaired, saying so) instead of being
            // dropped while the records after it are kept, a state the store never had, which
            // the replay then writes into a table and no later check could see. A log cut short
            // at its end (a kill) is its end, as without them.
            leveldb_options_set_paranoid_checks(opts, 1)
        }
        defer { leveldb_options_destroy(opts) }  // DB::Open copies the options
        var cache: OpaquePointer? = nil
        if options.blockCacheSize > 0 {
            cache = leveldb_cache_create_lru(options.blockCacheSize)
            leveldb_options_set_cache(opts, cache)
        }
        var filter: OpaquePointer? = nil
        if options.bloomBitsPerKey > 0 {
            filter = leveldb_filterpolicy_create_bloom(Int32(options.bloomBitsPerKey))
            leveldb_options_set_filter_policy(opts, filter)
        }
        // A plain database's open lists its directory (a file per table) once: LevelDB's
        // recovery lists it, and its removal of obsolete files right after is served the same
        // names (`satchel_open_listing_env`).
        let listing = options.environment == nil ? satchel_open_listing_env_create() : nil
        if let listing { satchel_leveldb_options_set_open_listing_env(opts, listing) }
        options.environment?.forgetTables(in: path)
        func open() throws(SatchelError) -> OpaquePointer? {
            if let listing { satchel_open_listing_env_arm(listing, 1) }
            defer { if let listing { satchel_open_listing_env_arm(listing, 0) } }
            do {
                return try LevelDBStatus.check { leveldb_open(opts, path, $0) }
            } catch  where error.code == .corruption {
                throw SatchelError(.corruption, "\(path) is damaged (\(error.message)); nothing was changed: repair the store (satchel repair)")
            }
        }
        var opened: OpaquePointer?
        do {
            opened = try open()
            // The record was read before LevelDB took the directory's lock: had another
            // process opened and written in between, the recorded log or MANIFEST, or CURRENT,
            // would differ now (this open wrote nothing to them). Then open again on new files,
            // as without a record.
            if reusing, let reused = opened, CleanCloseRecord.matching(path, asEarlier: record)?.text != record?.text {
                leveldb_close(reused)
                satchel_leveldb_options_set_reuse_logs(opts, 0)
                leveldb_options_set_paranoid_checks(opts, 1)
                reusing = false
                opened = try open()
            }
        } catch {
            if let cache { leveldb_cache_destroy(cache) }
            if let filter { leveldb_filterpolicy_destroy(filter) }
            if let listing { satchel_open_listing_env_destroy(listing) }
            throw error
        }
        self.listingEnvironment = listing.map(CPointer.init(raw:))
        self.db = CPointer(raw: opened!)
        self.reusedRecordedFiles = reusing
        self.level0CompactionWait = options.level0CompactionWait
        self.rememberedPrefixes = options.rememberedPrefixes
        self.remembered = reusing ? record?.remembered : nil
        self.cache = cache.map(CPointer.init(raw:))
        self.filterPolicy = filter.map(CPointer.init(raw:))
        self.environment = options.environment
        let read = leveldb_readoptions_create()!
        self.verifyChecksums = options.verifyChecksums
        leveldb_readoptions_set_verify_checksums(read, options.verifyChecksums ? 1 : 0)
        leveldb_readoptions_set_fill_cache(read, 1)
        self.readOptions = CPointer(raw: read)
        self.writeOptions = CPointer(raw: leveldb_writeoptions_create()!)
        let sync = leveldb_writeoptions_create()!
        leveldb_writeoptions_set_sync(sync, 1)
        self.syncWriteOptions = CPointer(raw: sync)
    }

    /// Options without cache or filter policy (the caller adds and owns those).
    private static func makeOptions(_ options: LevelDBOptions) -> OpaquePointer {
        let opts = leveldb_options_create()!
        leveldb_options_set_create_if_missing(opts, options.createIfMissing ? 1 : 0)
        leveldb_options_set_compression(
            opts, Int32(options.snappyCompression ? leveldb_snappy_compression : leveldb_no_compression))
        leveldb_options_set_write_buffer_size(opts, options.writeBufferSize)
        leveldb_options_set_max_open_files(opts, Int32(options.maxOpenFiles))
        // Compactions verify the blocks they read, as reads do: a damaged block fails the
        // compaction (and `compact`, which then says so) instead of being rewritten into a new
        // table as data (a black-box probe: compact said it was done over a damaged table).
        if options.verifyChecksums { leveldb_options_set_paranoid_checks(opts, 1) }
        if let environment = options.environment {
            leveldb_options_set_env(opts, environment.leveldbEnv)
            // A tamper-evident store's files fail loudly: without paranoid checks LevelDB would
            // drop the rest of a log whose frame fails its authentication, and open. (The last
            // frame of a log, which a crash may leave half written, is the end of the file.)
            if environment.tamperEvident { leveldb_options_set_paranoid_checks(opts, 1) }
        } else {
            // No `LOG` file: each open would rename the last one and create another (the
            // encrypting Env keeps none either). Satchel reports what matters through its logger.
            satchel_leveldb_options_discard_info_log(opts)
        }
        leveldb_options_set_block_size(opts, options.blockSize)
        leveldb_options_set_max_file_size(opts, options.maxFileSize)
        return opts
    }

    /// LevelDB, asked to open a directory whose `CURRENT` file is gone while its table and log
    /// files remain, creates a new empty database there and deletes the old files: silent loss
    /// of everything. Refuse instead, and point at repair.
    ///
    /// A database whose creation was cut short looks headless too, and holds nothing: LevelDB
    /// writes its first manifest (`MANIFEST-000001`), then `CURRENT`, and only then a log that
    /// writes go to. So without `CURRENT`, that manifest, empty logs and LevelDB's own `LOCK`,
    /// `LOG` and temporary files are no data, and the open goes on (LevelDB creates the database
    /// again); any table, a log with bytes in it or a later manifest is refused.
    private static func refuseHeadlessDatabase(at path: String) throws(SatchelError) {
        guard let entries = FileSystem.names(in: path), !entries.contains("CURRENT") else { return }
        let data = entries.filter { name in
            if name.hasSuffix(".ldb") || name.hasSuffix(".sst") { return true }
            if name.hasSuffix(".log") {
                let size = FileSystem.size(of: path + "/" + name) ?? 1
                return size != 0
            }
            return name.hasPrefix("MANIFEST-") && name != "MANIFEST-000001"
        }
        if !data.isEmpty {
            throw SatchelError(
                .corruption,
                "\(path) holds LevelDB files but no CURRENT file; opening it would discard them. Repair the store (satchel repair) first")
        }
    }

    /// Throws `.locked` when another process (or a database of this one) has the database at
    /// `path` open; takes nothing.
    static func checkNotOpen(path: String) throws(SatchelError) {
        satchel_database_lock_release(try LevelDBStatus.check { satchel_database_lock_take(path, $0) })
    }

    /// Rebuilds the database at `path` from the files that survive, keeping every record whose
    /// block's checksum holds.
    ///
    /// LevelDB's repair with paranoid checks sets aside a table whose index block is damaged
    /// whole, its intact data blocks with it. So when the database still opens, every record is
    /// first read with its data block's checksum verified: when all verify, the damage was
    /// outside the data (an index, a filter, the reads did not need), and a compaction writes
    /// every table again whole from those same blocks. Otherwise (or when it does not open),
    /// LevelDB's repair runs with paranoid checks: each table with a damaged block is rewritten
    /// without it, and one it cannot open is set aside. (Its repair without paranoid checks is
    /// never used: it copies a damaged block's bytes as keys, and its table builder aborts the
    /// process on the first one out of order.) Logs that hold writes are replayed first by an
    /// open without paranoid checks, which drops each record that fails its checksum.
    static func repair(path: String, options: LevelDBOptions) throws(SatchelError) -> RepairFindings {
        let opts = makeOptions(options)
        defer { leveldb_options_destroy(opts) }
        // What an earlier repair found before it was killed (the files that showed it are
        // rewritten since), and what this one finds, kept on disk until the store's repair has
        // reported it.
        var found = RepairFindings.read(in: path)
        let foundBefore = found
        // The tables the database has now: a table an open below makes (a compaction that the
        // damage stops leaves its output half written) held nothing of the store's own, and is
        // not named lost when LevelDB's repair sets it aside (a black-box probe: it was).
        let tablesBefore = Set((FileSystem.names(in: path) ?? []).filter { $0.hasSuffix(".ldb") || $0.hasSuffix(".sst") })
        // Tables the manifest names that are gone: an open says how many, and one of them.
        if opensWithoutDeleting(path) {
            leveldb_options_set_paranoid_checks(opts, 1)
            do {
                leveldb_close(try LevelDBStatus.check { leveldb_open(opts, path, $0) })
            } catch  where error.code == .locked {
                throw error
            } catch  where error.message.contains("missing files") {
                found.tablesMissing = found.tablesMissing ?? error.message
            } catch {}
        }
        let logs = (FileSystem.names(in: path) ?? []).filter { $0.hasSuffix(".log") && (FileSystem.size(of: path + "/" + $0) ?? 0) > 0 }
        if !logs.isEmpty, FileSystem.size(of: path + "/CURRENT") != nil {
            // Replayed with paranoid checks first, as every open replays a log: a damaged record
            // fails it. Then without them, which drops the damaged block and keeps the rest;
            // when that open goes through, the damage was in a log, and its writes are lost.
            // What an open with or without paranoid checks says: nil when it went through.
            func replay(paranoid: Bool) throws(SatchelError) -> String? {
                leveldb_options_set_paranoid_checks(opts, paranoid ? 1 : 0)
                do {
                    leveldb_close(try LevelDBStatus.check { leveldb_open(opts, path, $0) })
                    return nil
                } catch  where error.code == .locked {
                    throw error
                } catch {
                    return error.message
                }
            }
            // Damaged otherwise, both fail: the repair below reads the tables and logs.
            if let damage = try replay(paranoid: true), try replay(paranoid: false) == nil { found.logDamage = found.logDamage ?? damage }
        }
        if found != foundBefore { try found.write(in: path) }
        let lostBefore = Set(FileSystem.names(in: path + "/lost") ?? [])
        // LevelDB's repair takes no lock of its own: held here, so that it never rewrites the
        // files of a database another process writes (refused, nothing touched).
        func repairDB(paranoid: Bool) throws(SatchelError) {
            let lock = try LevelDBStatus.check { satchel_database_lock_take(path, $0) }
            defer { satchel_database_lock_release(lock) }
            CleanCloseRecord.remove(in: path)
            leveldb_options_set_paranoid_checks(opts, paranoid ? 1 : 0)
            try LevelDBStatus.check { leveldb_repair_db(opts, path, $0) }
        }
        if try !readsWhole(path: path, options: options, opts) { try repairDB(paranoid: true) }
        // LevelDB's repair moves every log (replayed into a table) and old manifest there too:
        // only a table there is one it could not read whole.
        let setAside = (FileSystem.names(in: path + "/lost") ?? []).filter {
            !lostBefore.contains($0) && tablesBefore.contains($0) && !found.setAside.contains($0)
        }.sorted()
        if !setAside.isEmpty {
            found.setAside += setAside
            try found.write(in: path)
        }
        return found
    }

    /// Whether an open of the database at `path` can delete no table it should keep: it has a
    /// `CURRENT`, and its manifest was not cut short since a clean close (such a manifest names
    /// fewer tables than the database has, and an open deletes the tables it does not name).
    private static func opensWithoutDeleting(_ path: String) -> Bool {
        FileSystem.size(of: path + "/CURRENT") != nil && (CleanCloseRecord.matching(path) != nil || CleanCloseRecord.cutManifest(in: path) == nil)
    }

    /// Whether the database at `path` opens and every record of it reads with its data block's
    /// checksum verified; when so, the database is compacted (each table written again from
    /// those records). It is opened without paranoid checks (its tables' index blocks are not
    /// verified: a damaged one can still lead to every data block, each checked on its own).
    /// While it is read so, no table may be written: a compaction LevelDB started then would
    /// read blocks unverified and write a damaged one's bytes into a new table as data, deleting
    /// the damaged one, and the reads after it would verify (a black-box probe: the damage went
    /// unreported, its bytes kept as data).
    private static func readsWhole(path: String, options: LevelDBOptions, _ opts: OpaquePointer) throws(SatchelError) -> Bool {
        // An open deletes the tables its manifest does not name: opened first with paranoid
        // checks, which refuse a damaged manifest or log (left to LevelDB's repair), so that
        // only a database whose manifest and logs are whole is opened without them.
        func open(paranoid: Bool, with settings: OpaquePointer = opts) throws(SatchelError) -> OpaquePointer? {
            leveldb_options_set_paranoid_checks(settings, paranoid ? 1 : 0)
            do {
                return try LevelDBStatus.check { leveldb_open(settings, path, $0) }
            } catch  where error.code == .locked {
                throw error
            } catch {
                return nil
            }
        }
        guard opensWithoutDeleting(path), let checked = try open(paranoid: true) else { return false }
        leveldb_close(checked)
        CleanCloseRecord.remove(in: path)
        let readOptions = leveldb_readoptions_create()!
        defer { leveldb_readoptions_destroy(readOptions) }
        leveldb_readoptions_set_verify_checksums(readOptions, 1)
        leveldb_readoptions_set_fill_cache(readOptions, 0)
        // Each record read (and, with `rewriting`, written again: a compaction then writes the
        // tables holding its older copy again, which it does not do for a table alone at the
        // last level); whether every data block's checksum held.
        func readAll(_ db: OpaquePointer, rewriting: Bool) throws(SatchelError) -> Bool {
            let iterator = leveldb_create_iterator(db, readOptions)!
            defer { leveldb_iter_destroy(iterator) }
            let writeOptions = leveldb_writeoptions_create()!
            defer { leveldb_writeoptions_destroy(writeOptions) }
            let batch = leveldb_writebatch_create()!
            defer { leveldb_writebatch_destroy(batch) }
            var batched = 0
            func flush() throws(SatchelError) {
                try LevelDBStatus.check { leveldb_write(db, writeOptions, batch, $0) }
                leveldb_writebatch_clear(batch)
                batched = 0
            }
            leveldb_iter_seek_to_first(iterator)
            while leveldb_iter_valid(iterator) != 0 {
                if rewriting {
                    var keyLength = 0
                    var valueLength = 0
                    let key = leveldb_iter_key(iterator, &keyLength)
                    let value = leveldb_iter_value(iterator, &valueLength)
                    leveldb_writebatch_put(batch, key, keyLength, value, valueLength)
                    batched += keyLength + valueLength
                    if batched >= 1 << 20 { try flush() }
                }
                leveldb_iter_next(iterator)
            }
            var error: UnsafeMutablePointer<CChar>?
            leveldb_iter_get_error(iterator, &error)
            if let error {
                leveldb_free(error)
                return false
            }
            if batched > 0 { try flush() }
            return true
        }
        // Read first with table writes refused (through an Env of its own, for a plain store: an
        // encrypted one's Env authenticates every block it reads, verified or not).
        let checking = Self.makeOptions(options)
        defer { leveldb_options_destroy(checking) }
        let refusing = options.environment == nil ? satchel_open_listing_env_create() : nil
        defer { if let refusing { satchel_open_listing_env_destroy(refusing) } }
        if let refusing {
            satchel_leveldb_options_set_open_listing_env(checking, refusing)
            satchel_open_listing_env_refuse_tables(refusing, 1)
        }
        let whole: Bool
        do {
            guard let db = try open(paranoid: false, with: checking) else { return false }
            defer { leveldb_close(db) }
            whole = try readAll(db, rewriting: false)
        }
        guard whole, let db = try open(paranoid: false) else { return false }
        defer { leveldb_close(db) }
        guard try readAll(db, rewriting: true) else { return false }
        leveldb_compact_range(db, nil, 0, nil, 0)
        return true
    }

    deinit {
        // The safety net; owners call close() at well-defined points. No user can exist here:
        // iterators and snapshots retain the handle.
        if state.load(ordering: .acquiring) & 1 == 0 { closeDatabase() }
        leveldb_readoptions_destroy(readOptions.raw)
        leveldb_writeoptions_destroy(writeOptions.raw)
        leveldb_writeoptions_destroy(syncWriteOptions.raw)
        if let filterPolicy { leveldb_filterpolicy_destroy(filterPolicy.raw) }
        if let cache { leveldb_cache_destroy(cache.raw) }
        if let listingEnvironment { satchel_open_listing_env_destroy(listingEnvironment.raw) }
    }

    // MARK: - Users

    /// Registers a user; pair with ``release()``. Throws `.closed` after ``close()``.
    func retain() throws(SatchelError) {
        let after = state.add(2, ordering: .acquiring).newValue
        if after & 1 != 0 {
            state.subtract(2, ordering: .releasing)
            throw SatchelError(.closed, "the store is closed")
        }
    }

    func release() {
        state.subtract(2, ordering: .releasing)
    }

    /// Runs `body` with the raw database pointer while counted as a user.
    @inline(__always)
    func withDB<R>(_ body: (OpaquePointer) throws(SatchelError) -> R) throws(SatchelError) -> R {
        try retain()
        defer { release() }
        return try body(db.raw)
    }

    /// Closes the database. Idempotent. Throws `.busy` while iterators, snapshots or calls use it.
    ///
    /// `leveldb_close` waits for background compaction, so this can block briefly.
    func close() throws(SatchelError) {
        let (exchanged, original) = state.compareExchange(expected: 0, desired: 1, ordering: .acquiringAndReleasing)
        if exchanged {
            // A clean close: the log emptied into a table (what the next open would otherwise do
            // before writing a new log), then the record that lets the next open go on with the
            // empty log and the MANIFEST.
            var record: String?
            let compacted = awaitLevel0Compaction()
            // A session that wrote nothing, on the files the record described, leaves the
            // record as it is: it still describes them (a compaction LevelDB started on its own
            // adds to the MANIFEST, and the next open finds it no longer does).
            if recordsCleanClose && reusedRecordedFiles && !wrote.load(ordering: .relaxed) && !compacted {
                closeDatabase()
                return
            }
            let remembering = recordsCleanClose ? entries(under: rememberedPrefixes) : RememberedEntries()
            if recordsCleanClose, var files = CleanCloseRecord.describe(path, remembering: remembering) {
                // Not when the new table would make LevelDB start a compaction of level 0 (at 4
                // files), which the close would wait for: then the next open turns the log into
                // a table, as it always did.
                if !files.logsEmpty && level0Files() < Self.level0CompactionTrigger - 1 {
                    flushLog()
                    files = CleanCloseRecord.describe(path, remembering: remembering) ?? files
                }
                // Nor when the MANIFEST has outgrown a new one: the next open writes a new one.
                if files.logsEmpty && !files.manifestOutgrown && CleanCloseRecord.write(files.text, in: path) {
                    record = files.text
                } else {
                    CleanCloseRecord.remove(in: path)
                }
            }
            _ = awaitLevel0Compaction()  // one the flush started
            closeDatabase()
            // A compaction that was still running has changed the files: the record no longer
            // describes them.
            if let record { CleanCloseRecord.withdraw(in: path, unlessStill: record) }
            return
        }
        if original & 1 != 0 { return }  // already closed
        throw SatchelError(.busy, "the store is still in use by \(original / 2) iterator(s), snapshot(s) or call(s)")
    }

    /// An open that cannot go on with the log (an encrypted one, or a plain one after a close
    /// that left writes in it) turns it into a table at level 0, and the fourth there starts a
    /// compaction, which a close would stop: sessions of one write each piled tables up at
    /// level 0, every read looking through them (black-box probes: 250 tables in an encrypted
    /// store, 129 in a plain one). A close therefore lets that compaction finish, waiting a
    /// bounded while (LevelDB says no more than its count of level-0 tables); returns whether it
    /// waited.
    private func awaitLevel0Compaction() -> Bool {
        // An unknown count (no such property) waits for nothing.
        func pending() -> Bool { (knownLevel0Files() ?? 0) >= Self.level0CompactionTrigger }
        guard pending() else { return false }
        let deadline = ContinuousClock.now + level0CompactionWait
        while pending() && ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.002)
        }
        return true
    }

    /// Closes the database, then removes the tables a compaction the close stopped left half
    /// written (none names them; a repair before the next open, which would delete them, took
    /// one for a damaged table and named its records lost: a black-box probe).
    private func closeDatabase() {
        leveldb_close(db.raw)
        if let environment {
            environment.removeUnsyncedTables(in: path)
        } else if let listingEnvironment {
            _ = satchel_open_listing_env_remove_unsynced_tables(listingEnvironment.raw, path)
        }
    }

    var isClosed: Bool { state.load(ordering: .acquiring) & 1 != 0 }

    /// Every entry under `prefixes`, read as the close's record keeps them (called by the close
    /// itself, with no user left); none when they are more than the record keeps or cannot be
    /// read.
    private func entries(under prefixes: [[UInt8]]) -> RememberedEntries {
        guard !prefixes.isEmpty, let iterator = leveldb_create_iterator(db.raw, readOptions.raw) else { return RememberedEntries() }
        defer { leveldb_iter_destroy(iterator) }
        var remembered = RememberedEntries(prefixes: prefixes.sorted { UTF8Order.compareBytes($0, $1) < 0 })
        var bytes = 0
        for prefix in remembered.prefixes {
            prefix.withUnsafeBufferPointer {
                leveldb_iter_seek(iterator, UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), $0.count)
            }
            while leveldb_iter_valid(iterator) != 0 {
                var keyLength = 0
                var valueLength = 0
                let keyPointer = leveldb_iter_key(iterator, &keyLength)!
                let key = Array(UnsafeRawBufferPointer(start: keyPointer, count: keyLength))
                guard key.starts(with: prefix) else { break }
                let valuePointer = leveldb_iter_value(iterator, &valueLength)
                let value = valuePointer.map { Array(UnsafeRawBufferPointer(start: $0, count: valueLength)) } ?? []
                bytes += key.count + value.count
                if bytes > CleanCloseRecord.rememberedLimit { return RememberedEntries() }
                remembered.entries.append(RememberedEntries.Entry(key: key, value: value))
                leveldb_iter_next(iterator)
            }
        }
        var error: UnsafeMutablePointer<CChar>?
        leveldb_iter_get_error(iterator, &error)
        if let error {
            leveldb_free(error)
            return RememberedEntries()
        }
        return remembered
    }

    /// LevelDB's `kL0_CompactionTrigger` (`db/dbformat.h`, compiled in): a compaction of level 0
    /// starts when it holds this many tables.
    static let level0CompactionTrigger = 4

    /// The number of tables in level 0 (the property `leveldb.num-files-at-level0`); as many as
    /// the trigger when unknown.
    private func level0Files() -> Int { knownLevel0Files() ?? Self.level0CompactionTrigger }

    /// The number of tables in level 0, nil when LevelDB does not say.
    private func knownLevel0Files() -> Int? {
        guard let value = leveldb_property_value(db.raw, "leveldb.num-files-at-level0") else { return nil }
        defer { leveldb_free(value) }
        return Int(String(cString: value))
    }

    /// Writes the memtable into a level-0 table (synced, with its MANIFEST edit) and starts an
    /// empty log, leaving the rest of the tables alone: LevelDB's manual compaction of a range
    /// no table holds (past every key Satchel writes, which starts below 0xFF) flushes the
    /// memtable first and then finds nothing to compact.
    private func flushLog() {
        let pastEveryKey: [CChar] = [-1, -1, -1, -1]
        pastEveryKey.withUnsafeBufferPointer { key in
            leveldb_compact_range(db.raw, key.baseAddress, key.count, key.baseAddress, key.count)
        }
    }

    // MARK: - Reads

    /// Looks `key` up and hands the value bytes (or nil when absent) to `body` without copying.
    /// The buffer is valid only inside `body`.
    func withValue<R>(
        forKey key: [UInt8], snapshot: LevelDBSnapshot? = nil,
        _ body: (UnsafeRawBufferPointer?) throws -> R
    ) throws -> R {
        var length = 0
        let value: UnsafeMutablePointer<CChar>? = try withDB { db throws(SatchelError) in
            try key.withUnsafeBufferPointer { k throws(SatchelError) in
                try withReadOptions(snapshot: snapshot) { options throws(SatchelError) in
                    try LevelDBStatus.check {
                        leveldb_get(db, options, k.baseAddress.map(UnsafeRawPointer.init)?.assumingMemoryBound(to: CChar.self), k.count, &length, $0)
                    }
                }
            }
        }
        guard let value else { return try body(nil) }
        defer { leveldb_free(value) }
        return try body(UnsafeRawBufferPointer(start: value, count: length))
    }

    /// Returns a copy of the value stored under `key`, or nil.
    func get(_ key: [UInt8], snapshot: LevelDBSnapshot? = nil) throws -> [UInt8]? {
        try withValue(forKey: key, snapshot: snapshot) { $0.map { Array($0) } }
    }

    /// Runs `body` with read options for `snapshot` (or the shared defaults when nil).
    func withReadOptions<R>(
        snapshot: LevelDBSnapshot?, fillCache: Bool = true,
        _ body: (OpaquePointer) throws(SatchelError) -> R
    ) throws(SatchelError) -> R {
        if fillCache {
            if let snapshot { return try body(snapshot.readOptions) }
            return try body(readOptions.raw)
        }
        let options = leveldb_readoptions_create()!
        defer { leveldb_readoptions_destroy(options) }
        leveldb_readoptions_set_verify_checksums(options, verifyChecksums ? 1 : 0)
        leveldb_readoptions_set_fill_cache(options, fillCache ? 1 : 0)
        if let snapshot { leveldb_readoptions_set_snapshot(options, snapshot.pointer) }
        return try body(options)
    }

    // MARK: - Writes

    /// Applies `batch` atomically. With `sync`, the write reaches the disk before returning.
    func write(_ batch: borrowing LevelDBWriteBatch, sync: Bool) throws(SatchelError) {
        wrote.store(true, ordering: .relaxed)
        try withDB { db throws(SatchelError) in
            try LevelDBStatus.check {
                leveldb_write(db, sync ? syncWriteOptions.raw : writeOptions.raw, batch.pointer, $0)
            }
        }
    }

    // MARK: - Introspection

    /// A LevelDB property such as `leveldb.stats`, or nil when unknown.
    func property(_ name: String) throws(SatchelError) -> String? {
        try withDB { db in
            guard let value = leveldb_property_value(db, name) else { return nil }
            defer { leveldb_free(value) }
            return String(cString: value)
        }
    }

    /// The approximate number of bytes on disk for keys in `[start, limit)`.
    func approximateSize(start: [UInt8], limit: [UInt8]) throws(SatchelError) -> UInt64 {
        try withDB { db in
            var size: UInt64 = 0
            start.withUnsafeBufferPointer { s in
                limit.withUnsafeBufferPointer { l in
                    var startPtr: UnsafePointer<CChar>? = UnsafeRawPointer(s.baseAddress!).assumingMemoryBound(to: CChar.self)
                    var limitPtr: UnsafePointer<CChar>? = UnsafeRawPointer(l.baseAddress!).assumingMemoryBound(to: CChar.self)
                    var startLen = s.count
                    var limitLen = l.count
                    leveldb_approximate_sizes(db, 1, &startPtr, &startLen, &limitPtr, &limitLen, &size)
                }
            }
            return size
        }
    }

    /// Every entry whose key starts with `prefix`, in key order: from the record of the clean
    /// close this open went on with when it keeps them and nothing has been written since (no
    /// table opened for them), else from LevelDB.
    func entries(withPrefix prefix: [UInt8]) throws(SatchelError) -> [RememberedEntries.Entry] {
        if let remembered, !wrote.load(ordering: .relaxed), let entries = remembered.entries(withPrefix: prefix) { return entries }
        let iterator = try makeIterator()
        iterator.seek(prefix)
        var entries: [RememberedEntries.Entry] = []
        while iterator.isValid && iterator.keyHasPrefix(prefix) {
            entries.append(RememberedEntries.Entry(key: iterator.key, value: iterator.value))
            iterator.next()
        }
        try iterator.checkError()
        return entries
    }

    /// The number of keys that start with `prefix` (keys only: values are not decoded).
    func countKeys(withPrefix prefix: [UInt8]) throws(SatchelError) -> Int {
        let iterator = try makeIterator(fillCache: false)
        iterator.seek(prefix)
        var n = 0
        while iterator.isValid && iterator.keyHasPrefix(prefix) {
            n += 1
            iterator.next()
        }
        try iterator.checkError()
        return n
    }

    /// Compacts the whole key range, dropping deleted entries from disk.
    func compact() throws(SatchelError) {
        wrote.store(true, ordering: .relaxed)
        try withDB { db throws(SatchelError) in
            leveldb_compact_range(db, nil, 0, nil, 0)
            // The compaction's own failure (a damaged block it read) stops the database's
            // writes but is returned by none of LevelDB's calls: an empty write returns it (a
            // black-box probe: compact said it was done on a damaged store).
            let batch = leveldb_writebatch_create()!
            defer { leveldb_writebatch_destroy(batch) }
            try LevelDBStatus.check { leveldb_write(db, writeOptions.raw, batch, $0) }
        }
    }

    // MARK: - Children

    func makeSnapshot() throws(SatchelError) -> LevelDBSnapshot { try LevelDBSnapshot(db: self, database: db.raw) }

    func makeIterator(snapshot: LevelDBSnapshot? = nil, fillCache: Bool = true) throws(SatchelError) -> LevelDBIterator {
        try LevelDBIterator(db: self, database: db.raw, snapshot: snapshot, fillCache: fillCache)
    }
}
