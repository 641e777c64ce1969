extension Transaction {
    /// Records in the change log that object `id` of a model that records changes went from `old`
    /// to `new` (nil: no object), coalesced with the change already pending (see
    /// ``StoredChange/coalesce(_:_:)``), counting it in `statistics`. The store is not read when
    /// the committed statistics say the model has no pending change.
    func logChange(_ entry: ModelEntry, _ model: Model, id: String, old: JSONObject?, new: JSONObject?, statistics: inout StoredStatistics) throws {
        let incoming: StoredChange
        switch (old, new) {
        case (nil, let new?): incoming = StoredChange(kind: .create, attributes: new)
        case (let old?, nil): incoming = StoredChange(kind: .delete, attributes: old)
        case (let old?, let new?):
            let changes = Self.diff(old, new)
            if changes.isEmpty { return }
            // The values before: what the server sees until the change reaches it.
            var base = JSONObject()
            for (name, _) in changes { base[name] = old[name] ?? .null }
            incoming = StoredChange(kind: .update, attributes: changes, base: base)
        case (nil, nil): return
        }
        let partition = entry.definition.partition
        let changeKey = Keys.change(model.name, id)
        let existingBytes: [UInt8]? =
            if let pending = buffer.pending(changeKey, partition: partition) { pending } else if entry.statistics.pendingTotal == 0 { nil } else {
                try store.database(partition).get(changeKey)
            }
        let existing = try existingBytes.map { bytes in try bytes.withUnsafeBytes { try StoredChange(decoding: $0) } }
        let merged = StoredChange.coalesce(existing, incoming)
        if merged != existing {
            buffer.put(changeKey, merged?.encoded)
            statistics.adjustPending(existing?.kind, by: -1)
            statistics.adjustPending(merged?.kind, by: 1)
        }
    }

    /// The attributes that differ from `old` to `new`: new values, and null for removed ones.
    static func diff(_ old: JSONObject, _ new: JSONObject) -> JSONObject {
        var changes = JSONObject()
        for (name, value) in new where !(old[name].map { $0.isIdentical(to: value) } ?? false) { changes[name] = value }
        for (name, _) in old where !new.contains(name) { changes[name] = .null }
        return changes
    }
}
