import CLevelDB
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A consistent point-in-time view of a LevelDB database.
///
/// Holds its database strongly and counts as one of its users, so the snapshot is always
/// released (in `deinit`) before the database can close. LevelDB snapshots are immutable and may
/// be read from any thread, hence `Sendable`.
final class LevelDBSnapshot: Sendable {
    private let db: LevelDB
    private let database: CPointer
    private let snapshot: CPointer
    /// Read options bound to this snapshot, made once for all the gets of a query.
    private let options: CPointer

    init(db: LevelDB, database: OpaquePointer) throws(SatchelError) {
        try db.retain()
        self.db = db
        self.database = CPointer(raw: database)
        let snapshot = leveldb_create_snapshot(database)!
        self.snapshot = CPointer(raw: snapshot)
        let options = leveldb_readoptions_create()!
        leveldb_readoptions_set_verify_checksums(options, db.verifyChecksums ? 1 : 0)
        leveldb_readoptions_set_fill_cache(options, 1)
        leveldb_readoptions_set_snapshot(options, snapshot)
        self.options = CPointer(raw: options)
    }

    deinit {
        leveldb_readoptions_destroy(options.raw)
        leveldb_release_snapshot(database.raw, snapshot.raw)
        db.release()
    }

    var pointer: OpaquePointer { snapshot.raw }
    var readOptions: OpaquePointer { options.raw }
}

/// A LevelDB iterator.
///
/// Holds its database (and snapshot) strongly and counts as a user of the database, so the
/// iterator is always destroyed before the database closes. Key and value bytes are only valid
/// until the iterator moves: ``key`` and ``value`` copy them out, ``withKey(_:)`` and
/// ``withValue(_:)`` lend them for the duration of a closure.
///
/// Not thread-safe (LevelDB iterators need external synchronisation): keep one iterator on one
/// thread at a time.
final class LevelDBIterator {
    private let db: LevelDB
    private let snapshot: LevelDBSnapshot?
    private let iterator: OpaquePointer

    init(db: LevelDB, database: OpaquePointer, snapshot: LevelDBSnapshot?, fillCache: Bool) throws(SatchelError) {
        try db.retain()
        self.db = db
        self.snapshot = snapshot
        // The read options are only read while the iterator is created (table iterators copy
        // them), so they can be destroyed right after.
        do {
            self.iterator = try db.withReadOptions(snapshot: snapshot, fillCache: fillCache) { options in
                leveldb_create_iterator(database, options)!
            }
        } catch {
            db.release()
            throw error
        }
    }

    deinit {
        leveldb_iter_destroy(iterator)
        db.release()
    }

    var isValid: Bool { leveldb_iter_valid(iterator) != 0 }

    func seekToFirst() { leveldb_iter_seek_to_first(iterator) }
    func seekToLast() { leveldb_iter_seek_to_last(iterator) }

    /// Positions at the first key at or after `key`.
    func seek(_ key: [UInt8]) {
        key.withUnsafeBufferPointer { k in
            leveldb_iter_seek(iterator, UnsafeRawPointer(k.baseAddress)?.assumingMemoryBound(to: CChar.self), k.count)
        }
    }

    /// REQUIRES: `isValid`.
    func next() { leveldb_iter_next(iterator) }
    /// REQUIRES: `isValid`.
    func previous() { leveldb_iter_prev(iterator) }

    /// Lends the current key. REQUIRES: `isValid`.
    @inline(__always)
    func withKey<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        var length = 0
        let pointer = leveldb_iter_key(iterator, &length)
        return try body(UnsafeRawBufferPointer(start: pointer, count: length))
    }

    /// Lends the current value. REQUIRES: `isValid`.
    @inline(__always)
    func withValue<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        var length = 0
        let pointer = leveldb_iter_value(iterator, &length)
        return try body(UnsafeRawBufferPointer(start: pointer, count: length))
    }

    /// A copy of the current key. REQUIRES: `isValid`.
    var key: [UInt8] { withKey { Array($0) } }
    /// A copy of the current value. REQUIRES: `isValid`.
    var value: [UInt8] { withValue { Array($0) } }

    /// Whether the current key starts with `prefix`. REQUIRES: `isValid`.
    func keyHasPrefix(_ prefix: [UInt8]) -> Bool {
        withKey { key in
            guard key.count >= prefix.count else { return false }
            return prefix.withUnsafeBytes { p in memcmp(key.baseAddress!, p.baseAddress!, p.count) == 0 }
        }
    }

    /// Whether the current key sorts before `end`, byte by byte. REQUIRES: `isValid`.
    func keyIsBefore(_ end: [UInt8]) -> Bool {
        withKey { key in
            end.withUnsafeBytes { e in
                let common = min(key.count, e.count)
                let order = common == 0 ? 0 : memcmp(key.baseAddress!, e.baseAddress!, common)
                return order < 0 || (order == 0 && key.count < e.count)
            }
        }
    }

    /// Throws the error that ended iteration early, if any (checked after `isValid` turns false).
    func checkError() throws(SatchelError) {
        try LevelDBStatus.check { leveldb_iter_get_error(iterator, $0) }
    }
}

/// Entries copied out of an iterator, to be read on another thread: keys and values back to
/// back in one buffer.
struct LevelDBEntries: Sendable {
    private var bytes: [UInt8] = []
    /// Where each key and value ends in `bytes`: entry `i`'s key ends at `ends[2i]`, its value
    /// at `ends[2i + 1]`.
    private var ends: [Int] = []

    var count: Int { ends.count / 2 }
    var byteCount: Int { bytes.count }

    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    /// Appends the iterator's current entry. REQUIRES: `iterator.isValid`.
    mutating func append(_ iterator: LevelDBIterator) {
        iterator.withKey { bytes.append(contentsOf: $0) }
        ends.append(bytes.count)
        iterator.withValue { bytes.append(contentsOf: $0) }
        ends.append(bytes.count)
    }

    /// Lends entry `index`'s key and value.
    func withEntry<R>(at index: Int, _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let start = index == 0 ? 0 : ends[2 * index - 1]
        return try bytes.withUnsafeBytes { buffer in
            try body(
                UnsafeRawBufferPointer(rebasing: buffer[start..<ends[2 * index]]),
                UnsafeRawBufferPointer(rebasing: buffer[ends[2 * index]..<ends[2 * index + 1]]))
        }
    }

    /// Lends each entry's key and value in order, while `body` returns true; false when `body`
    /// stopped.
    func forEach(_ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool) rethrows -> Bool {
        try bytes.withUnsafeBytes { buffer in
            var start = 0
            for i in stride(from: 0, to: ends.count, by: 2) {
                let key = UnsafeRawBufferPointer(rebasing: buffer[start..<ends[i]])
                let value = UnsafeRawBufferPointer(rebasing: buffer[ends[i]..<ends[i + 1]])
                start = ends[i + 1]
                guard try body(key, value) else { return false }
            }
            return true
        }
    }
}

extension LevelDB {
    /// The entries from key `start` to before key `end`, in key order as `snapshot` sees them,
    /// read on a thread of its own a chunk of about `chunkBytes` ahead of the caller (without
    /// filling the block cache: a bulk read). The iterator lives on that thread; the database
    /// stays in use until the reader is closed.
    func readAhead(from start: [UInt8], before end: [UInt8], snapshot: LevelDBSnapshot, chunkBytes: Int = 256 << 10)
        -> ReadAhead<LevelDBEntries>
    {
        ReadAhead(
            start: {
                let iterator = try self.makeIterator(snapshot: snapshot, fillCache: false)
                iterator.seek(start)
                return iterator
            },
            produce: { iterator in
                var entries = LevelDBEntries(capacity: chunkBytes + chunkBytes / 4)
                while entries.byteCount < chunkBytes && iterator.isValid && iterator.keyIsBefore(end) {
                    entries.append(iterator)
                    iterator.next()
                }
                if entries.count == 0 {
                    try iterator.checkError()
                    return nil
                }
                return entries
            })
    }
}

/// A LevelDB write batch: a list of puts and deletes applied atomically by ``LevelDB/write(_:sync:)``.
///
/// `~Copyable`, so it has exactly one owner; `deinit` destroys the C object.
struct LevelDBWriteBatch: ~Copyable {
    let pointer: OpaquePointer
    private(set) var count = 0

    init() { pointer = leveldb_writebatch_create()! }

    deinit { leveldb_writebatch_destroy(pointer) }

    /// Adds a put. LevelDB copies the bytes.
    mutating func put(_ key: [UInt8], _ value: [UInt8]) {
        key.withUnsafeBufferPointer { k in
            value.withUnsafeBufferPointer { v in
                leveldb_writebatch_put(
                    pointer,
                    UnsafeRawPointer(k.baseAddress)?.assumingMemoryBound(to: CChar.self), k.count,
                    UnsafeRawPointer(v.baseAddress)?.assumingMemoryBound(to: CChar.self), v.count)
            }
        }
        count += 1
    }

    /// Adds a put of bytes read in place (an iterator's key and value). LevelDB copies them.
    mutating func put(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        leveldb_writebatch_put(
            pointer, key.baseAddress?.assumingMemoryBound(to: CChar.self), key.count, value.baseAddress?.assumingMemoryBound(to: CChar.self),
            value.count)
        count += 1
    }

    /// Empties the batch, to fill it again.
    mutating func clear() {
        leveldb_writebatch_clear(pointer)
        count = 0
    }

    /// Adds a delete.
    mutating func delete(_ key: [UInt8]) {
        key.withUnsafeBufferPointer { k in
            leveldb_writebatch_delete(pointer, UnsafeRawPointer(k.baseAddress)?.assumingMemoryBound(to: CChar.self), k.count)
        }
        count += 1
    }
}
