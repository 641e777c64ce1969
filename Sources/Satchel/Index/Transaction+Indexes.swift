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
            if index.definition.kind == .text {
                let (was, now) = (index.textLength(of: before), index.textLength(of: after))
                statistics.adjustText(index.id, objects: (now == nil ? 0 : 1) - (was == nil ? 0 : 1), words: (now ?? 0) - (was ?? 0))
            }
        }
    }
}
