/// What a transaction will write: every key of one partition, buffered until the commit makes
/// them one LevelDB write batch.
///
/// Two kinds of write: those that reads through the transaction must see (objects, pending
/// changes, sync records, definitions: the ``Overlay``), and index entries, which nothing reads
/// back before the commit and so skip the overlay's hashing.
struct WriteBuffer {
    /// The partition written (a transaction writes one).
    private(set) var partition: Partition?
    private var overlay = Overlay()
    /// Index entry writes, in order (a later write of a key wins, as in the batch).
    private var indexWrites: [([UInt8], [UInt8]?)] = []
    /// The models whose objects or index entries were written: a query of any other model sees
    /// exactly what the store holds.
    private var touchedModels: Set<NameKey> = []
    private var lastTouched: String?

    var isEmpty: Bool { overlay.isEmpty && indexWrites.isEmpty }

    /// Makes `partition` the one written, refusing a second.
    mutating func claim(_ partition: Partition, model: String) throws(SatchelError) {
        if let claimed = self.partition, claimed != partition {
            throw SatchelError(
                .crossPartition,
                "a transaction writes one partition: it has written '\(claimed.rawValue)', and model '\(model)' is in '\(partition.rawValue)'",
                model: model)
        }
        self.partition = partition
    }

    /// Makes room for `count` more buffered writes that reads may see.
    mutating func reserveCapacity(_ count: Int) { overlay.reserveCapacity(overlay.count + count) }

    /// Buffers `value` (nil: a delete) under `key`, for reads to see.
    mutating func put(_ key: [UInt8], _ value: [UInt8]?) { overlay[key] = .some(value) }

    /// Buffers an index entry write.
    mutating func putIndexEntry(_ key: [UInt8], _ value: [UInt8]?) { indexWrites.append((key, value)) }

    /// Notes that objects or index entries of `model` were written.
    mutating func touch(_ model: String) {
        if let lastTouched, UTF8Order.equal(lastTouched, model) { return }
        touchedModels.insert(NameKey(model))
        lastTouched = model
    }

    func hasTouched(_ model: String) -> Bool { touchedModels.contains(NameKey(model)) }

    /// The buffered value of `key` in `partition`: nil when untouched, `.some(nil)` when deleted.
    func pending(_ key: [UInt8], partition: Partition) -> [UInt8]?? {
        partition == self.partition ? overlay[key] : nil
    }

    /// The buffered writes under `prefix` in `partition`, in key order.
    func pendingWrites(prefix: [UInt8], partition: Partition) -> [([UInt8], [UInt8]?)] {
        guard partition == self.partition else { return [] }
        return overlay.writes.filter { $0.key.starts(with: prefix) }.map { ($0.key, $0.value) }
            .sorted { UTF8Order.compareBytes($0.0, $1.0) < 0 }
    }

    /// The one batch of everything buffered, and `statistics` of the models written (but those
    /// marked for a recount: their stored record says so already).
    func batch(statistics: [NameKey: StoredStatistics]) -> LevelDBWriteBatch {
        var batch = LevelDBWriteBatch()
        for (key, value) in overlay.writes {
            if let value { batch.put(key, value) } else { batch.delete(key) }
        }
        for (key, value) in indexWrites {
            if let value { batch.put(key, value) } else { batch.delete(key) }
        }
        for (model, statistics) in statistics where !statistics.recountDue {
            batch.put(Keys.modelStatistics(model.name), statistics.encoded)
        }
        return batch
    }
}

// MARK: - Reads through the buffer

extension Transaction {
    /// The value of `key` in `partition` as this transaction sees it.
    func read(_ key: [UInt8], partition: Partition) throws -> [UInt8]? {
        if let pending = buffer.pending(key, partition: partition) { return pending }
        if key.first == KeyFamily.object.rawValue { return try storedRecord(key, partition: partition) }
        return try stored(key, partition: partition)
    }

    /// Object record `key` as the store holds it, read once for consecutive reads of it.
    private func storedRecord(_ key: [UInt8], partition: Partition) throws -> [UInt8]? {
        if let lastRead, lastRead.key == key { return lastRead.record }
        let record = try stored(key, partition: partition)
        lastRead = (key, record)
        return record
    }

    /// `key`'s value in `partition` as the store holds it: a point read, or, inside
    /// ``readingInOrder(reads:when:_:)``, the next step of an ordered reader.
    private func stored(_ key: [UInt8], partition: Partition) throws -> [UInt8]? {
        guard orderedReaders != nil, let family = key.first else { return try store.database(partition).get(key) }
        if let reader = orderedReaders?.first(where: { $0.partition == partition && $0.family == family }) { return try reader.value(key) }
        let reader = try OrderedReader(store.database(partition), partition: partition, family: family)
        orderedReaders?.append(reader)
        return try reader.value(key)
    }

    /// Runs `body` with the store's reads made through one iterator per partition and key family,
    /// for a caller that reads its keys in ascending order (the sync engine's chunk of changes,
    /// in id order): each read is then a step or two of an iterator instead of a lookup from the
    /// top of every level. Keys out of order, or sparse, are read point by point (``OrderedReader``
    /// says when), so the answers never depend on the order. The store holds still meanwhile:
    /// this thread holds the writer lock, and the transaction's own writes are read first. `body` reads point by point, as outside, when `inOrder` is false
    /// or it reads fewer than ``orderedReadsFrom`` keys of a family (`reads`): the iterators and
    /// their first seeks cost more than so few point reads save.
    package func readingInOrder<R>(reads count: Int, when inOrder: Bool = true, _ body: () throws -> R) throws -> R {
        checkOpen()
        guard inOrder, count >= Self.orderedReadsFrom, orderedReaders == nil else { return try body() }
        orderedReaders = []
        defer { orderedReaders = nil }
        return try body()
    }

    /// Object `id`'s attributes as this transaction sees them. The store is not read when its
    /// statistics say the model has no object there (`entry` is read under the writer's lock,
    /// so they are the committed ones): an import into an empty model reads nothing.
    func readObject(_ model: Model, _ id: String, entry: ModelEntry) throws -> JSONObject? {
        try objectRecord(Keys.object(prefix: model.objectPrefix, id), entry: entry).map { bytes in
            try bytes.withUnsafeBytes { try StoredObject.decode($0, model: model.name, id: id) }
        }
    }

    /// Object `id`'s record (key `key`) as this transaction sees it (nil: none), as
    /// ``readObject(_:_:entry:)`` reads it.
    func objectRecord(_ key: [UInt8], entry: ModelEntry) throws -> [UInt8]? {
        let partition = entry.definition.partition
        if let pending = buffer.pending(key, partition: partition) { return pending }
        if entry.statistics.objects == 0 { return nil }
        return try storedRecord(key, partition: partition)
    }

    /// The version's JSON that object `key`'s record carries, as this transaction sees it (nil:
    /// none, or no object).
    func storedVersion(_ key: [UInt8], model: Model, id: String, entry: ModelEntry) throws -> [UInt8]? {
        try objectRecord(key, entry: entry).flatMap { bytes in
            try bytes.withUnsafeBytes { try StoredObject.versionBytes($0, model: model.name, id: id) }
        }
    }

    /// Visits every key with `prefix` in `partition`, in key order, merging this transaction's
    /// buffered writes with the stored data.
    func scan(
        prefix: [UInt8], partition: Partition,
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void
    ) throws {
        let pending = buffer.pendingWrites(prefix: prefix, partition: partition)
        var next = 0
        let iterator = try store.database(partition).makeIterator()
        iterator.seek(prefix)
        func emitPending(before limit: UnsafeRawBufferPointer?) throws {
            while next < pending.count {
                let (key, value) = pending[next]
                if let limit, UTF8Order.compareBytes(limit, key) <= 0 { return }
                if let value {
                    try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try body(k, v) } }
                }
                next += 1
            }
        }
        while iterator.isValid && iterator.keyHasPrefix(prefix) {
            try iterator.withKey { key in
                try emitPending(before: key)
                if next < pending.count, UTF8Order.compareBytes(key, pending[next].0) == 0 {
                    next += 1  // overridden (or deleted) by this transaction; emitted above or dropped
                    if let value = pending[next - 1].1 {
                        try value.withUnsafeBytes { v in try body(key, v) }
                    }
                } else {
                    try iterator.withValue { value in try body(key, value) }
                }
            }
            iterator.next()
        }
        try iterator.checkError()
        try emitPending(before: nil)
    }

    /// Writes `value` (nil: deletes) under `key` in `partition`, as part of this transaction
    /// (index builds and drops, definitions).
    func rawWrite(_ key: [UInt8], _ value: [UInt8]?, partition: Partition, model: String) throws(SatchelError) {
        try buffer.claim(partition, model: model)
        buffer.touch(model)
        if key.first == KeyFamily.index.rawValue {
            buffer.putIndexEntry(key, value)
        } else {
            buffer.put(key, value)
        }
    }
}

extension Transaction {
    /// The fewest reads of a key family for which ``readingInOrder(reads:when:_:)`` uses an
    /// iterator: chunks of 200 changes (Salesforce's composite calls) pushed 3 % slower through
    /// iterators than by point reads, chunks of 1,000 a quarter faster.
    static let orderedReadsFrom = 512
}

/// Reads of one key family of a partition, in ascending key order, through one iterator
/// (``Transaction/readingInOrder(reads:when:_:)``). The iterator rests at the first key at or after the
/// last key asked for: a later key a few steps on is found by stepping, an absent one costs a
/// comparison when the iterator is already past it. Any other read is a point read, as without
/// the reader: a key before the last (a renamed object's new id, say), and a key further on
/// than a few steps — the keys asked for are sparse there (a few pending changes among many
/// objects), so the reader stands back for a while (1 read, then 2, 4, … up to 1,024) before it
/// seeks to a key again to see whether they came close. A seek positions every level's files
/// with no filter to skip them, and costs more than a point read: it is paid once per dense run.
final class OrderedReader {
    let partition: Partition
    let family: UInt8
    private let db: LevelDB
    private let iterator: LevelDBIterator
    /// The last key the iterator answered for (nil: it is not positioned, the next read seeks).
    private var last: [UInt8]?
    /// Point reads left before the iterator is tried again, and how many the next miss sets.
    private var standingBack = 0
    private var backoff = 1
    /// Steps forward the iterator takes before the key is judged too far for it.
    private static let maximumSteps = 8

    init(_ db: LevelDB, partition: Partition, family: UInt8) throws(SatchelError) {
        self.partition = partition
        self.family = family
        self.db = db
        iterator = try db.makeIterator()
    }

    func value(_ key: [UInt8]) throws -> [UInt8]? {
        if standingBack > 0 {
            standingBack -= 1
            return try db.get(key)
        }
        guard let last else {
            // Positioned afresh: the start of a run, or a look after standing back.
            iterator.seek(key)
            return try answer(key)
        }
        guard UTF8Order.compareBytes(key, last) >= 0 else { return try db.get(key) }
        var steps = 0
        while iterator.isValid && iterator.keyIsBefore(key) {
            if steps == Self.maximumSteps {
                // Sparse here: point reads for a while, then a seek to see.
                self.last = nil
                standingBack = backoff
                backoff = min(2 * backoff, 1024)
                return try db.get(key)
            }
            iterator.next()
            steps += 1
        }
        return try answer(key)
    }

    /// The iterator's answer for `key`, the iterator resting at the first key at or after it.
    private func answer(_ key: [UInt8]) throws -> [UInt8]? {
        last = key
        guard iterator.isValid else {
            try iterator.checkError()
            return nil
        }
        guard iterator.withKey({ UTF8Order.compareBytes($0, key) == 0 }) else { return nil }
        backoff = 1
        return iterator.value
    }
}
