import Foundation
import Synchronization

/// How far ``Store/backup(to:progress:)`` has got; its last value is what the backup holds.
public struct BackupProgress: Sendable {
    /// Keys copied so far, of every partition: objects, index entries, pending changes and
    /// other sync records, definitions, the session.
    public var keys = 0
    /// Bytes of those keys and values.
    public var bytes = 0
    /// The store's files' size when the copy began: about the bytes to copy (compression and
    /// versions LevelDB has not compacted away make the two differ).
    public var estimatedBytes = 0
    /// Blob files copied.
    public var blobs = 0
}

extension Store {
    /// The file inside a backup being written: its directory is no store until the copy is
    /// whole (``Store/init(path:configuration:)`` refuses it).
    static let unfinishedBackupMarker = "SATCHEL-BACKUP-INCOMPLETE"
    /// The file inside a restored copy until it has been checked.
    static let unfinishedRestoreMarker = "SATCHEL-RESTORE-INCOMPLETE"

    /// Copies the store, while it stays open for reads and writes, into a new store at
    /// `destination`, as of one moment: every transaction committed before it, none after.
    /// Objects, indexes, pending changes, in-flight and refused changes, sync states and the
    /// session are copied, and the blob files.
    ///
    /// The copy is written beside `destination` (in `destination.incomplete`, which no one can
    /// open as a store) and renamed into place when whole, its marker removed last: killed at
    /// any moment, the backup leaves nothing that opens as a store, and the next backup to the
    /// same place replaces what it left. The source is only read.
    ///
    /// ```swift
    /// try store.backup(to: "/backups/notes-2026-11-26") { progress in
    ///     print("\(progress.bytes) of about \(progress.estimatedBytes) bytes")
    /// }
    /// let copy = try Store(path: "/backups/notes-2026-11-26")
    /// ```
    ///
    /// Blob files are copied after the keys: a file that ``BlobStore/removeOrphans(olderThan:)``
    /// deletes meanwhile (its last reference deleted after the backup's moment) is missing
    /// from the copy.
    ///
    /// - Parameter progress: called after each batch of keys and once at the end.
    /// - Returns: what was copied.
    /// - Throws: ``SatchelError`` `.alreadyExists` when `destination` exists (and is not an empty
    ///   directory), `.invalidArgument` for a destination inside the store, `.io` when the copy
    ///   cannot be written; nothing is left at `destination` then.
    /// Whether `destination` is the store's directory or a path inside it, through symbolic
    /// links too (the store's, or the destination's): no file of its own may go there.
    func holds(_ destination: String) -> Bool {
        let target = URL(fileURLWithPath: destination).standardizedFileURL.path
        let source = URL(fileURLWithPath: path).standardizedFileURL.path
        let (realTarget, realSource) = (FileSystem.resolved(target), FileSystem.resolved(source))
        return target == source || target.hasPrefix(source + "/") || realTarget == realSource || realTarget.hasPrefix(realSource + "/")
    }

    @discardableResult
    public func backup(to destination: String, progress: ((BackupProgress) -> Void)? = nil) throws -> BackupProgress {
        let fileManager = FileManager.default
        let target = URL(fileURLWithPath: destination).standardizedFileURL.path
        guard !holds(destination) else {
            throw SatchelError(.invalidArgument, "the backup of \(path) cannot go inside it (\(destination))")
        }
        // What a backup killed midway leaves, each step marked unfinished from its start: the
        // directory being made (`.incomplete-new`, marked, then renamed), the copy
        // (`.incomplete`), and the finished copy renamed into place before its marker goes.
        let marker = Self.unfinishedBackupMarker
        let partial = target + ".incomplete"
        let fresh = partial + "-new"
        // One backup into a place at a time: another's unfinished copy is not taken for a
        // leftover (a black-box probe: two backups into one new directory, of two stores, each
        // removed or renamed the other's copy, and one said it had made a copy that did not
        // open, or held the other store).
        let lockPath = partial + ".lock"
        let lock = try FileSystem.hold(
            lockPath, refused: SatchelError(.locked, "another backup is being made into \(destination): nothing was copied"))
        defer { FileSystem.release(lock, at: lockPath) }
        if fileManager.fileExists(atPath: fresh) {
            let entries = (try? fileManager.contentsOfDirectory(atPath: fresh)) ?? []
            // Nothing, the marker, or what an earlier version killed while writing the marker
            // left: Foundation's temporary file for it (`.dat.nosync…`, renamed to the marker).
            guard entries.isEmpty || entries.contains(marker) || entries.allSatisfy({ $0.hasPrefix(".dat.nosync") }) else {
                throw SatchelError(.alreadyExists, "\(fresh) exists and is not an unfinished backup; move it away first")
            }
            try? fileManager.removeItem(atPath: fresh)
        }
        var isDirectory: ObjCBool = false
        if fileManager.fileExists(atPath: target, isDirectory: &isDirectory) {
            if isDirectory.boolValue && fileManager.fileExists(atPath: target + "/" + marker) {
                try? fileManager.removeItem(atPath: target)
            } else {
                let empty = isDirectory.boolValue && ((try? fileManager.contentsOfDirectory(atPath: target))?.isEmpty ?? false)
                guard empty else { throw SatchelError(.alreadyExists, "\(destination) exists: a backup goes to a new directory") }
            }
        }
        if fileManager.fileExists(atPath: partial) {
            guard fileManager.fileExists(atPath: partial + "/" + marker) else {
                throw SatchelError(.alreadyExists, "\(partial) exists and is not an unfinished backup; move it away first")
            }
            try? fileManager.removeItem(atPath: partial)
        }
        do {
            try fileManager.createDirectory(atPath: fresh, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            // Written in place: `createFile` writes a temporary file and renames it, and a kill
            // between left a directory neither marked nor empty.
            do {
                try Data().write(to: URL(fileURLWithPath: fresh + "/" + marker))
            } catch {
                throw SatchelError(.io, "cannot write into \(fresh): \(error.localizedDescription)")
            }
            FileSystem.synchronizeDirectory(fresh)
            try FileSystem.rename(fresh, to: partial)
        } catch let error as SatchelError {
            try? fileManager.removeItem(atPath: fresh)
            throw error
        } catch {
            try? fileManager.removeItem(atPath: fresh)
            throw SatchelError(.io, "cannot create \(partial): \(error.localizedDescription)")
        }
        do {
            let state = try copy(into: partial, progress: progress)
            FileSystem.synchronizeDirectory(partial)
            try FileSystem.rename(partial, to: target)
            let parent = URL(fileURLWithPath: target).deletingLastPathComponent().path
            FileSystem.synchronizeDirectory(parent)
            // Only now is the copy a store.
            try? fileManager.removeItem(atPath: target + "/" + marker)
            FileSystem.synchronizeDirectory(target)
            progress?(state)
            return state
        } catch {
            try? fileManager.removeItem(atPath: partial)
            throw error
        }
    }

    /// How a copy's files are written: as the store's own (a backup), or encrypted with another
    /// data key or not at all (``encrypt(path:key:configuration:)`` and its kin).
    enum CopyEncryption {
        case same
        case plain
        case encrypted(EncryptedEnvironment, KeyFile)
    }

    /// The copy of ``backup(to:progress:)``: every partition as of one moment, then the blobs.
    func copy(into directory: String, encryption target: CopyEncryption = .same, progress: ((BackupProgress) -> Void)?) throws
        -> BackupProgress
    {
        // The moment: no write lands while the snapshots are taken.
        // The partitions that hold anything (a partition never opened has no directory, and the
        // copy has none either).
        let snapshots = try writer.withLock { try openPartitions.map { ($0.partition, $0.database, try $0.database.makeSnapshot()) } }
        var state = BackupProgress()
        state.estimatedBytes = Self.filesSize(path)
        var options = LevelDBOptions()
        options.snappyCompression = configuration.compression
        options.blockSize = configuration.blockSize
        options.maxFileSize = configuration.maxFileSize
        options.bloomBitsPerKey = configuration.bloomFilterBitsPerKey
        options.blockCacheSize = 0
        options.writeBufferSize = max(configuration.writeBufferSize, 64 << 20)
        switch target {
        case .same:
            // An encrypted store's copy is encrypted with the same data key, its key file beside it.
            options.environment = encryption
            if encryption != nil, let keyFile = try KeyFile.read(store: path) { try keyFile.write(store: directory) }
        case .plain: options.environment = nil
        case .encrypted(let environment, let keyFile):
            options.environment = environment
            try keyFile.write(store: directory)
        }
        for (partition, source, snapshot) in snapshots {
            let partitionDirectory = URL(fileURLWithPath: directory).appendingPathComponent(partition.rawValue).path
            Self.restrictToOwner(partitionDirectory, creating: true)
            let copy = try LevelDB(path: partitionDirectory, options: options)
            let iterator = try source.makeIterator(snapshot: snapshot, fillCache: false)
            iterator.seekToFirst()
            var batch = LevelDBWriteBatch()
            var batchBytes = 0
            while iterator.isValid {
                iterator.withKey { key in
                    iterator.withValue { value in
                        batch.put(key: key, value: value)
                        batchBytes += key.count + value.count
                    }
                }
                iterator.next()
                if batchBytes >= 4 << 20 {
                    try copy.write(batch, sync: false)
                    state.keys += batch.count
                    state.bytes += batchBytes
                    batch.clear()
                    batchBytes = 0
                    progress?(state)
                }
            }
            try iterator.checkError()
            // The last batch syncs the log; LevelDB syncs the tables it wrote as it wrote them.
            try copy.write(batch, sync: true)
            state.keys += batch.count
            state.bytes += batchBytes
            try copy.close()
        }
        let blobs = blobs.directory.path
        if let names = try? FileManager.default.contentsOfDirectory(atPath: blobs), !names.isEmpty {
            let copied = URL(fileURLWithPath: directory).appendingPathComponent("blobs").path
            do {
                try FileManager.default.createDirectory(atPath: copied, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                for name in names.sorted() {
                    // A file removed since the listing has no reference left.
                    guard FileManager.default.fileExists(atPath: blobs + "/" + name) else { continue }
                    switch target {
                    case .same: try FileManager.default.copyItem(atPath: blobs + "/" + name, toPath: copied + "/" + name)
                    case .plain, .encrypted:
                        // Under its own name (objects refer to it), sealed or opened for the copy.
                        guard let bytes = try self.blobs.data(for: BlobStore.referencePrefix + name) else { continue }
                        var file = bytes
                        if case .encrypted(let environment, _) = target {
                            file = Data(try SealedBlob.seal(Array(bytes), name: name, key: environment.dataKey))
                        }
                        guard FileManager.default.createFile(atPath: copied + "/" + name, contents: file, attributes: [.posixPermissions: 0o600])
                        else { throw SatchelError(.io, "cannot write the blob file \(copied)/\(name)") }
                    }
                    state.blobs += 1
                }
            } catch let error as SatchelError {
                throw error
            } catch {
                throw SatchelError(.io, "cannot copy the blob files: \(error.localizedDescription)")
            }
        }
        return state
    }

    /// Throws `.wrongKey` unless the store at `path` opens with `key`: encrypted and `key`
    /// unseals its key file, or neither. Restore asks it of both sides: one key opens them.
    static func checkOpens(_ path: String, _ what: String, with key: EncryptionKey?) throws(SatchelError) {
        switch (try KeyFile.read(store: path), key) {
        case (nil, nil): return
        case (let file?, let key?): _ = try file.unseal(with: key, store: path)
        case (_?, nil): throw SatchelError(.wrongKey, "\(what) is encrypted: restore needs its key (--key-file); nothing was changed")
        case (nil, _?):
            throw SatchelError(
                .wrongKey,
                "\(what) is not encrypted, and a key was given: restore replaces a store only with a copy that opens with the same key (or both without one); nothing was changed"
            )
        }
    }

    /// The bytes of the files under `directory`.
    static func filesSize(_ directory: String) -> Int {
        guard let walker = FileManager.default.enumerator(atPath: directory) else { return 0 }
        var total = 0
        while let name = walker.nextObject() as? String {
            total += ((try? FileManager.default.attributesOfItem(atPath: directory + "/" + name))?[.size] as? NSNumber)?.intValue ?? 0
        }
        return total
    }

    /// Replaces the store at `path` with a copy of the backup at `backup` (which is only read).
    ///
    /// The copy is made beside `path`, opened and checked (``verify()``) before anything at
    /// `path` changes; then the two directories are exchanged in one step, so that killed at any
    /// moment, `path` holds the old store or the restored one, whole. The store it replaced is
    /// kept, renamed, and its path returned: it may hold work newer than the backup.
    ///
    /// Run it with the store at `path` closed (by this process too).
    ///
    /// - Returns: where the replaced store now is, or nil when there was none at `path`.
    /// - Throws: ``SatchelError`` `.storeMissing` or `.notAStore` for a `backup` that is not a
    ///   whole store, `.notAStore` for a `path` that holds something other than a store (or
    ///   nothing), `.corruption` when its copy fails its check, `.locked` when the store at
    ///   `path` is open in another process, `.wrongKey` unless `configuration`'s key (or none)
    ///   opens both the backup and the store it would replace.
    @discardableResult
    public static func restore(from backup: String, to path: String, configuration: Configuration = Configuration()) throws -> String? {
        let fileManager = FileManager.default
        let target = URL(fileURLWithPath: path).standardizedFileURL.path
        let staging = target + ".restoring"
        var isDirectory: ObjCBool = false
        guard fileManager.fileExists(atPath: backup, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw SatchelError(.storeMissing, "no backup at \(backup)")
        }
        try checkIsStore(backup, creating: false)
        try checkOpens(backup, "the backup at \(backup)", with: configuration.encryptionKey)
        // One whole-store replacement at a time: another restore, or a conversion (encrypt,
        // decrypt, rekey), of the same store holds the lock they share (a black-box probe: two
        // restores at once left a store that did not open, and an encrypt run beside a restore
        // put the old store back, both saying they had done their work).
        // (A store restored where none was may be made in a new directory, as its copy is.)
        let lockPath = conversionLock(target)
        let lock = try FileSystem.hold(
            lockPath, refused: SatchelError(.locked, "the store at \(path) is being restored or converted by another process: nothing was restored"))
        defer { FileSystem.release(lock, at: lockPath) }
        let existing = fileManager.fileExists(atPath: target, isDirectory: &isDirectory)
        if existing {
            // Only a store (or an empty directory) is replaced: a mistyped path to anything else
            // is left where it is.
            guard isDirectory.boolValue else { throw SatchelError(.notAStore, "\(target) is not a Satchel store: it is a file") }
            try checkIsStore(target, creating: true)
            // Before the store's key is asked for, as every open (a black-box probe: a restore
            // refused for the key left a killed decrypt's plain copy).
            try removeConversionLeftovers(target, holdingLock: true)
            // An encrypted store is replaced only by one who holds its key, and never by a copy
            // that is not encrypted.
            if Partition.allCases.contains(where: { fileManager.fileExists(atPath: target + "/" + $0.rawValue) }) {
                try checkOpens(target, "the store at \(target)", with: configuration.encryptionKey)
            }
            try checkNotOpen(target)
        }
        if fileManager.fileExists(atPath: staging) {
            let entries = (try? fileManager.contentsOfDirectory(atPath: staging)) ?? []
            if entries.contains(unfinishedRestoreMarker) || entries.allSatisfy({ $0.hasPrefix(".dat.nosync") }) {
                // An unfinished copy (or one killed as its marker was written by an earlier
                // version, through Foundation's temporary file).
                try? fileManager.removeItem(atPath: staging)
            } else {
                // A store an earlier restore replaced, killed before it was renamed away.
                try FileSystem.rename(staging, to: replacedName(target))
            }
        }
        do {
            try fileManager.createDirectory(atPath: staging, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try Data().write(to: URL(fileURLWithPath: staging + "/" + unfinishedRestoreMarker))  // in place, not through a renamed temporary file
            for name in try fileManager.contentsOfDirectory(atPath: backup) where name != unfinishedBackupMarker {
                try fileManager.copyItem(atPath: backup + "/" + name, toPath: staging + "/" + name)
            }
        } catch {
            try? fileManager.removeItem(atPath: staging)
            throw SatchelError(.io, "cannot copy the backup \(backup): \(error.localizedDescription)")
        }
        do {
            var checking = configuration
            checking.createIfMissing = false
            let copy = try Store(path: staging, configuration: checking, checkingRestore: true)
            let report = try copy.verify()
            guard report.isHealthy else {
                try copy.close()
                throw SatchelError(
                    .corruption,
                    "the backup \(backup) fails its check (\(report.problemCount) problems, first: \(report.problems.first ?? "?")); nothing was restored"
                )
            }
            try copy.doubtRestoredSyncState()
            try copy.close()
        } catch {
            try? fileManager.removeItem(atPath: staging)
            throw error
        }
        try? fileManager.removeItem(atPath: staging + "/" + unfinishedRestoreMarker)
        FileSystem.synchronizeDirectory(staging)
        let parent = URL(fileURLWithPath: target).deletingLastPathComponent().path
        guard existing else {
            try FileSystem.rename(staging, to: target)
            FileSystem.synchronizeDirectory(parent)
            return nil
        }
        try FileSystem.exchange(staging, target)
        let replaced = replacedName(target)
        try FileSystem.rename(staging, to: replaced)
        FileSystem.synchronizeDirectory(parent)
        return replaced
    }

    /// What a backup's sync state may no longer say right once restored: since it was made,
    /// the server may have taken its unconfirmed changes (a sync pushed them) and changed (the
    /// store pulled that). So each model that synced owes a full pull, which brings the server's
    /// data whole (a server that keeps per client what it sent, RhoConnect, would otherwise
    /// send nothing it sent since); and each pending create and update carries what it would
    /// send as what it may have sent (``PendingChange/sentValues``): an adapter that can find a
    /// create a push made looks it up rather than make it twice, and a server value equal to one
    /// is this device's own. (A black-box probe: creates were made twice, and RhoConnect's
    /// changes since the backup never came.) Written in one batch per model, before the copy is
    /// swapped in.
    func doubtRestoredSyncState() throws {
        for definition in models where definition.syncType != .none && definition.partition != .local {
            let model = try self.model(definition.name)
            try bulkUpdate { tx in
                _ = try tx.oweFullPullIfSynced(model)
                for (id, records) in try tx.objectSyncStates(of: model) {
                    guard let change = records.pending, change.kind != .delete else { continue }
                    var sent = change.sentValues
                    let would = change.kind == .create ? (try tx.find(id, in: model)?.attributes ?? JSONObject()) : change.attributes
                    for (name, value) in would where sent[name] == nil { sent[name] = value }
                    guard sent != change.sentValues else { continue }
                    var next = records
                    next.pending = PendingChange(
                        model: change.model, objectID: id, kind: change.kind, attributes: change.attributes, baseValues: change.baseValues,
                        sentValues: sent)
                    try tx.setObjectSyncState(model, id, next, replacing: records)
                }
            }
        }
    }

    /// `path.replaced-YYYYMMDD-HHMMSS` (and a number when that exists).
    private static func replacedName(_ path: String) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd-HHmmss"
        let base = "\(path).replaced-\(formatter.string(from: Date()))"
        var name = base
        var n = 1
        while FileManager.default.fileExists(atPath: name) {
            n += 1
            name = "\(base)-\(n)"
        }
        return name
    }

    /// Throws `.locked` when another process has a partition of the store at `path` open. Only
    /// LevelDB's lock is tried: the store is neither opened nor read (a damaged one, what a
    /// restore is for, is not refused).
    private static func checkNotOpen(_ path: String) throws {
        for partition in Partition.allCases {
            let directory = URL(fileURLWithPath: path).appendingPathComponent(partition.rawValue).path
            guard FileManager.default.fileExists(atPath: directory) else { continue }
            do throws(SatchelError) {
                try LevelDB.checkNotOpen(path: directory)
            } catch {
                // Anything else (a partition directory LevelDB cannot lock) is left to the copy's check.
                if error.code == .locked { throw SatchelError(.locked, "the store at \(path) is open elsewhere: close it before restoring") }
            }
        }
    }
}
