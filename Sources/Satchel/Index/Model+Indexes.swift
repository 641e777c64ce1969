import Synchronization

/// Progress of ``Model/createIndex(_:batchSize:progress:)``.
public struct IndexBuildProgress: Sendable {
    /// Objects indexed so far, and the number of objects when the build started.
    public var processed: Int
    public var total: Int
}

/// An index of a model, with its state and size.
public struct IndexInfo: Sendable, Hashable {
    /// The index's definition (``IndexDefinition/storesObjects`` included).
    public var definition: IndexDefinition
    /// False while the index is being built or dropped; queries use only ready indexes.
    public var isReady: Bool
    /// The number of entries: for an index that is not ready, what it holds now (counted).
    public var entries: Int
}

extension Model {
    /// The model's indexes, in creation order.
    public var indexes: [IndexInfo] {
        get throws {
            let entry = try store.entry(name)
            return try entry.indexes.map { index in
                var statistics = entry.statistics
                // Only a ready index's count is kept exact; a build (a repair's rebuild
                // included) interrupted by a kill leaves the count from before it: count.
                if index.state != .ready { try statistics.recount(index, in: store.database(entry.definition.partition)) }
                return IndexInfo(definition: index.definition, isReady: index.state == .ready, entries: statistics.indexEntries[index.id] ?? 0)
            }
        }
    }

    /// Declares an index and builds it over the model's objects, in batches of `batchSize`
    /// objects (each one transaction, so other writes interleave), reporting progress after
    /// each batch. Writes made during the build keep the index up to date; queries use it once
    /// it is complete.
    ///
    /// Idempotent: creating an index that exists does nothing; creating one whose build was
    /// interrupted finishes it.
    ///
    /// - Throws: ``SatchelError`` `.invalidArgument` for an empty definition, an
    ///   array-element index on several fields, or an index on `object`.
    public func createIndex(
        _ definition: IndexDefinition, batchSize: Int = 1000, progress: ((IndexBuildProgress) -> Void)? = nil
    ) throws {
        try buildIndex(definition, batchSize: batchSize, allowingReentry: false, progress: progress)
    }

    /// Why `definition` cannot be built beside the model's `indexes` (nil: it can, or an index
    /// with its keys is there already): one with its keys being dropped, or storing objects where
    /// it would not (or the other way round); a second text index. A migration asks before it
    /// writes anything.
    static func refusal(creating definition: IndexDefinition, beside indexes: [StoredIndex], model name: String) -> SatchelError? {
        if let existing = indexes.first(where: { $0.definition.sameKeys(as: definition) }) {
            if existing.state == .dropping {
                return SatchelError(.busy, "index \(definition) of model '\(name)' is being dropped", model: name)
            }
            if existing.definition.storesObjects != definition.storesObjects {
                return SatchelError(
                    .invalidArgument,
                    "model '\(name)' has an index on \(definition) that \(existing.definition.storesObjects ? "stores" : "does not store") objects; drop it first",
                    model: name)
            }
            return nil
        }
        // A text search reads one text index: a second would hold words no search finds.
        if definition.kind == .text, let text = indexes.first(where: { $0.definition.kind == .text && $0.state != .dropping }) {
            return SatchelError(
                .invalidArgument,
                "model '\(name)' has a text index already, \(text.definition): a model has one; drop it and declare one over every field to search (text(\(Self.union(text.definition.fields, definition.fields).map(\.description).joined(separator: ","))))",
                model: name)
        }
        return nil
    }

    /// ``createIndex(_:batchSize:progress:)``; with `allowingReentry`, also on a thread that
    /// holds the writer lock (a migration).
    func buildIndex(
        _ definition: IndexDefinition, batchSize: Int, allowingReentry: Bool, progress: ((IndexBuildProgress) -> Void)?
    ) throws {
        try definition.validate(model: name)
        guard batchSize > 0 else { throw SatchelError(.invalidArgument, "the batch size must be positive") }
        let (index, partition, total) = try store.writer.withLock(allowingReentry: allowingReentry) { () throws -> (StoredIndex, Partition, Int) in
            let entry = try store.entry(name)
            if let refusal = Self.refusal(creating: definition, beside: entry.indexes, model: name) { throw refusal }
            if let existing = entry.indexes.first(where: { $0.definition.sameKeys(as: definition) }) {
                return (existing, entry.definition.partition, entry.statistics.objects)
            }
            let index = StoredIndex(id: (entry.indexes.map(\.id).max() ?? 0) + 1, definition: definition, state: .building, model: name)
            var batch = LevelDBWriteBatch()
            batch.put(Keys.indexDefinition(name, index.id), index.json.jsonBytes)
            try store.database(entry.definition.partition).write(batch, sync: store.configuration.durableWrites)
            let key = NameKey(name)
            store.catalog.withLock { $0.models[key]?.indexes.append(index) }
            store.catalogVersion.add(1, ordering: .releasing)
            return (index, entry.definition.partition, entry.statistics.objects)
        }
        if index.state == .ready { return }

        // Backfill: each batch reads its objects and writes their entries in one transaction.
        var resumeAfter: [UInt8]? = nil
        var processed = 0
        progress?(IndexBuildProgress(processed: 0, total: total))
        while true {
            let count = try store.transaction(allowingReentry: allowingReentry) { tx -> Int in
                let iterator = try store.database(partition).makeIterator()
                let prefix = objectPrefix
                if let resumeAfter {
                    iterator.seek(resumeAfter)
                    if iterator.isValid && iterator.keyHasPrefix(prefix) && iterator.withKey({ $0.elementsEqual(resumeAfter) }) { iterator.next() }
                } else {
                    iterator.seek(prefix)
                }
                var n = 0
                var textBatch = TextBuildBatch(index)
                while n < batchSize && iterator.isValid && iterator.keyHasPrefix(prefix) {
                    let key = iterator.key
                    let id = try key.withUnsafeBytes { try Keys.objectID(fromKey: $0, prefixLength: prefix.count) }
                    let (attributes, json) = try iterator.withValue { value in
                        (
                            try StoredObject.decode(value, model: name, id: id),
                            index.storesObjects ? try StoredObject.attributesBytes(value, model: name, id: id) : []
                        )
                    }
                    if index.definition.kind == .text {
                        textBatch.add(id: id, attributes: attributes)
                    } else {
                        for entryKey in index.entries(model: name, objectID: id, attributes: attributes) {
                            try tx.rawWrite(entryKey, json, partition: partition, model: name)
                        }
                    }
                    resumeAfter = key
                    n += 1
                    iterator.next()
                }
                try iterator.checkError()
                try textBatch.write(in: tx, partition: partition, model: name)
                return n
            }
            processed += count
            if count > 0 { progress?(IndexBuildProgress(processed: processed, total: max(total, processed))) }
            if count < batchSize { break }
        }

        // Count the entries and mark the index ready, in one transaction.
        try store.transaction(allowingReentry: allowingReentry) { tx in
            var statistics = try tx.workingStatistics(name)
            try statistics.recount(index, in: store.database(partition))
            tx.setStatistics(statistics, model: name)
            var ready = index
            ready.state = .ready
            try tx.rawWrite(Keys.indexDefinition(name, index.id), ready.json.jsonBytes, partition: partition, model: name)
            let key = NameKey(name)
            tx.onCommit { catalog in
                if let i = catalog.models[key]?.indexes.firstIndex(where: { $0.id == index.id }) {
                    catalog.models[key]?.indexes[i].state = .ready
                }
            }
        }
    }

    /// `first`, then the fields of `second` it lacks: a text index over both, each field once.
    static func union(_ first: [Field], _ second: [Field]) -> [Field] {
        first + second.enumerated().filter { index, field in !first.contains(field) && !second[..<index].contains(field) }.map(\.element)
    }

    /// Drops an index and every one of its entries.
    ///
    /// - Returns: whether the index existed.
    @discardableResult
    public func dropIndex(_ definition: IndexDefinition) throws -> Bool {
        guard let index = try store.entry(name).indexes.first(where: { $0.definition.sameKeys(as: definition) }) else { return false }
        try store.drop(index, of: name)
        return true
    }
}

extension Store {
    /// Drops `index` of `model`: marks it dropping (writes stop maintaining it, queries stop
    /// using it), deletes its entries in batches, then its definition. Interrupted, it resumes
    /// when the store next opens.
    func drop(_ index: StoredIndex, of model: String, allowingReentry: Bool = false) throws {
        let key = NameKey(model)
        let partition = try entry(model).definition.partition
        if index.state != .dropping {
            try transaction(allowingReentry: allowingReentry) { tx in
                var dropping = index
                dropping.state = .dropping
                try tx.rawWrite(Keys.indexDefinition(model, index.id), dropping.json.jsonBytes, partition: partition, model: model)
                tx.onCommit { catalog in
                    if let i = catalog.models[key]?.indexes.firstIndex(where: { $0.id == index.id }) {
                        catalog.models[key]?.indexes[i].state = .dropping
                    }
                }
            }
        }
        try deleteKeys(withPrefix: Keys.indexPrefix(model, index.id), of: model, in: partition, allowingReentry: allowingReentry)
        try transaction(allowingReentry: allowingReentry) { tx in
            try tx.rawWrite(Keys.indexDefinition(model, index.id), nil, partition: partition, model: model)
            var statistics = try tx.workingStatistics(model)
            statistics.indexEntries[index.id] = nil
            statistics.textTotals[index.id] = nil
            tx.setStatistics(statistics, model: model)
            tx.onCommit { catalog in catalog.models[key]?.indexes.removeAll { $0.id == index.id } }
        }
    }

    /// Deletes every key starting with `prefix` (index entries of `model`), 10,000 a
    /// transaction; returns how many it deleted.
    @discardableResult
    func deleteKeys(withPrefix prefix: [UInt8], of model: String, in partition: Partition, allowingReentry: Bool = false) throws -> Int {
        var total = 0
        while true {
            let deleted = try transaction(allowingReentry: allowingReentry) { tx -> Int in
                let iterator = try database(partition).makeIterator(fillCache: false)
                iterator.seek(prefix)
                var n = 0
                while n < 10_000 && iterator.isValid && iterator.keyHasPrefix(prefix) {
                    try tx.rawWrite(iterator.key, nil, partition: partition, model: model)
                    n += 1
                    iterator.next()
                }
                try iterator.checkError()
                return n
            }
            total += deleted
            if deleted == 0 { return total }
        }
    }

    /// Finishes the drops an earlier process left half done.
    func resumeDrops() throws {
        let dropping = catalog.withLock { catalog in
            catalog.models.flatMap { name, entry in entry.indexes.filter { $0.state == .dropping }.map { (name.name, $0) } }
        }
        for (model, index) in dropping { try drop(index, of: model) }
    }
}

extension StoredStatistics {
    /// Sets `index`'s entry count (and a text index's totals) to what the store holds.
    mutating func recount(_ index: StoredIndex, in db: LevelDB) throws {
        let entries: Int
        if index.definition.kind == .text {
            let counts = try index.textCounts(in: db)
            entries = counts.entries
            textTotals[index.id] = counts.totals == TextTotals() ? nil : counts.totals
        } else {
            entries = try db.countKeys(withPrefix: index.prefix)
        }
        indexEntries[index.id] = entries == 0 ? nil : entries
    }
}
