extension Transaction {
    /// Moves object `id`'s index entries from what `old` gives to what `new` gives (nil: no
    /// object), in this transaction's batch, counting them in `statistics`. `bytes` is the
    /// object's stored value, which an index that stores objects copies into every entry (and so
    /// rewrites whenever the object changes).
    func moveIndexEntries(
        _ entry: ModelEntry, _ model: Model, id: String, old: JSONObject?, new: JSONObject?, bytes: [UInt8]?,
        statistics: inout StoredStatistics
    ) {
        for index in entry.indexes where index.isMaintained {
            if index.definition.kind == .text {
                moveText(index, id: id, old: old, new: new, statistics: &statistics)
                continue
            }
            let before = old.map { index.entries(model: model.name, objectID: id, attributes: $0) } ?? []
            let after = new.map { index.entries(model: model.name, objectID: id, attributes: $0) } ?? []
            if before == after && !index.storesObjects { continue }
            var delta = 0
            for entryKey in before where !after.contains(entryKey) {
                buffer.putIndexEntry(entryKey, nil)
                delta -= 1
            }
            for entryKey in after {
                let existed = before.contains(entryKey)
                if existed && !index.storesObjects { continue }
                buffer.putIndexEntry(entryKey, index.storesObjects ? bytes! : [])
                if !existed { delta += 1 }
            }
            statistics.adjustIndex(index.id, by: delta)
        }
    }

    /// Moves object `id`'s text in `index` from `old`'s to `new`'s: the postings of the words
    /// that changed are merged into their blocks at the commit (``writeTextPostings()``).
    private func moveText(_ index: StoredIndex, id: String, old: JSONObject?, new: JSONObject?, statistics: inout StoredStatistics) {
        let before = old.flatMap(index.textPostings)
        let after = new.flatMap(index.textPostings)
        if before == nil && after == nil { return }
        let idBytes = Array(id.utf8)  // shared by every posting of the object
        for word in before?.words.keys ?? [:].keys where after?.words[word] == nil {
            textChanges.set(index, word: word, id: idBytes, nil)
        }
        if let after {
            for (word, positions) in after.words where before?.length != after.length || before?.words[word] != positions {
                textChanges.set(index, word: word, id: idBytes, TextPosting(length: after.length, positions: positions))
            }
        }
        statistics.adjustIndex(index.id, by: (after?.words.count ?? 0) - (before?.words.count ?? 0))
        statistics.adjustText(
            index.id, objects: (after == nil ? 0 : 1) - (before == nil ? 0 : 1), words: (after?.length ?? 0) - (before?.length ?? 0))
    }

    /// Merges the postings this transaction changed into their blocks, in its batch: each block
    /// a change falls in is read once, merged and written back (split when it grows past
    /// ``TextBlock/capacity``, deleted when it empties).
    func writeTextPostings() throws {
        guard !textChanges.isEmpty, let partition = buffer.partition else { return }
        let iterator = try store.database(partition).makeIterator()
        for (index, words) in textChanges.indexes.values {
            for (word, changes) in words {
                let sorted = TextChanges.latest(changes)
                var start = 0
                while start < sorted.count {
                    let block = try index.textBlock(word, holding: String(decoding: sorted[start].id, as: UTF8.self), iterator: iterator)
                    var end = start + 1
                    if let next = block?.next.map({ Array($0.utf8) }) {
                        while end < sorted.count && UTF8Order.compareBytes(sorted[end].id, next) < 0 { end += 1 }
                    } else {
                        end = sorted.count
                    }
                    let existing = try block.map { try $0.value.withUnsafeBytes { try TextBlock.decode($0) } } ?? []
                    let merged = TextChanges.merge(existing, sorted[start..<end])
                    var keys: [[UInt8]] = []
                    var chunks: [ArraySlice<(id: [UInt8], posting: TextPosting)>] = []
                    if !merged.isEmpty {
                        let count = (merged.count + TextBlock.capacity - 1) / TextBlock.capacity
                        let size = (merged.count + count - 1) / count
                        for first in stride(from: 0, to: merged.count, by: size) {
                            let chunk = merged[first..<min(first + size, merged.count)]
                            chunks.append(chunk)
                            keys.append(index.textBlockKey(word, firstID: String(decoding: chunk.first!.id, as: UTF8.self)))
                        }
                    }
                    if let old = block?.key, !keys.contains(old) { buffer.putIndexEntry(old, nil) }
                    for (key, chunk) in zip(keys, chunks) { buffer.putIndexEntry(key, TextBlock.encode(chunk)) }
                    start = end
                }
            }
        }
        textChanges = TextChanges()
    }
}

/// The postings a transaction changed, per text index and word, in the order
/// written (a later change of the same object wins).
struct TextChanges {
    typealias Change = (id: [UInt8], posting: TextPosting?)

    /// By index id: the index, and its changes by word.
    private(set) var indexes: [Int: (index: StoredIndex, words: [String: [Change]])] = [:]

    var isEmpty: Bool { indexes.isEmpty }

    mutating func set(_ index: StoredIndex, word: String, id: [UInt8], _ posting: TextPosting?) {
        indexes[index.id, default: (index, [:])].words[word, default: []].append((id, posting))
    }

    /// `changes` by id, each id's last: as written when the ids already ascend (an index build).
    static func latest(_ changes: [Change]) -> [Change] {
        if zip(changes, changes.dropFirst()).allSatisfy({ UTF8Order.compareBytes($0.id, $1.id) < 0 }) { return changes }
        let sorted = changes.enumerated().sorted { a, b in
            let order = UTF8Order.compareBytes(a.element.id, b.element.id)
            return order < 0 || (order == 0 && a.offset < b.offset)
        }.map(\.element)
        return sorted.indices.filter { $0 == sorted.count - 1 || sorted[$0].id != sorted[$0 + 1].id }.map { sorted[$0] }
    }

    /// A block's postings with `changes` (sorted by id) applied: a posting replaced or added, or
    /// (nil) removed.
    static func merge(
        _ existing: [(id: [UInt8], posting: TextPosting)], _ changes: ArraySlice<Change>
    ) -> [(id: [UInt8], posting: TextPosting)] {
        var merged: [(id: [UInt8], posting: TextPosting)] = []
        merged.reserveCapacity(existing.count + changes.count)
        var i = 0
        for change in changes {
            let id = change.id
            while i < existing.count && UTF8Order.compareBytes(existing[i].id, id) < 0 {
                merged.append(existing[i])
                i += 1
            }
            if i < existing.count && existing[i].id == id { i += 1 }
            if let posting = change.posting { merged.append((id, posting)) }
        }
        merged.append(contentsOf: existing[i...])
        return merged
    }
}
