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

    /// The one batch of everything buffered, and `statistics` of the models written.
    func batch(statistics: [NameKey: StoredStatistics]) -> LevelDBWriteBatch {
        var batch = LevelDBWriteBatch()
        for (key, value) in overlay.writes {
            if let value { batch.put(key, value) } else { batch.delete(key) }
        }
        for (key, value) in indexWrites {
            if let value { batch.put(key, value) } else { batch.delete(key) }
        }
        for (model, statistics) in statistics {
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
    /// ``readingInOrder(_:)``, the next step of an ordered reader.
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
    /// top of every level. Keys out of order are still read right (the iterator seeks back). The
    /// store holds still meanwhile: this thread holds the writer lock, and the transaction's own
    /// writes are read first.
    package func readingInOrder<R>(_ body: () throws -> R) throws -> R {
        checkOpen()
        guard orderedReaders == nil else { return try body() }
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

/// Reads of one key family of a partition, in ascending key order, through one iterator
/// (``Transaction/readingInOrder(_:)``). The iterator rests at the first key at or after the
/// last key asked for: a later key is found by stepping forward (a few steps, then a seek), an
/// absent one costs a comparison when the iterator is already past it.
final class OrderedReader {
    let partition: Partition
    let family: UInt8
    private let iterator: LevelDBIterator
    /// The last key asked for (nil: none yet).
    private var last: [UInt8]?
    /// Steps forward before a seek is the cheaper way to a key.
    private static let maximumSteps = 8

    init(_ db: LevelDB, partition: Partition, family: UInt8) throws(SatchelError) {
        self.partition = partition
        self.family = family
        iterator = try db.makeIterator()
    }

    func value(_ key: [UInt8]) throws(SatchelError) -> [UInt8]? {
        if let last, UTF8Order.compareBytes(key, last) >= 0 {
            var steps = 0
            while iterator.isValid && iterator.keyIsBefore(key) {
                if steps == Self.maximumSteps {
                    iterator.seek(key)
                    break
                }
                iterator.next()
                steps += 1
            }
        } else {
            iterator.seek(key)
        }
        last = key
        guard iterator.isValid else {
            try iterator.checkError()
            return nil
        }
        return iterator.withKey { UTF8Order.compareBytes($0, key) == 0 } ? iterator.value : nil
    }
}
