/// One batch of an index build's objects for a text index, read in id order, with their words
/// kept flat (an occurrence per word of each object, words numbered by slot) rather than a
/// posting per word and object: the batch's postings come out per word, in id order, and go
/// straight into blocks.
struct TextBuildBatch {
    let index: StoredIndex
    /// The objects' ids end to end (object `i`'s ends at `idEnds[i]`), and their lengths.
    private var idBytes: [UInt8] = []
    private var idEnds: [Int] = []
    private var lengths: [Int] = []
    private var slots = WordSlots()
    /// (slot, object, position), objects and positions ascending.
    private var occurrences: [(slot: Int32, object: Int32, position: Int32)] = []

    init(_ index: StoredIndex) { self.index = index }

    var isEmpty: Bool { idEnds.isEmpty }

    private func idRange(_ object: Int) -> Range<Int> { (object == 0 ? 0 : idEnds[object - 1])..<idEnds[object] }

    /// Adds object `id` (after every object added so far).
    mutating func add(id: String, attributes: JSONObject) {
        let object = Int32(idEnds.count)
        let length = index.forEachTextWord(in: attributes) { word, position in
            occurrences.append((slots.slot(for: word), object, Int32(position)))
        }
        guard length > 0 else { return }
        idBytes.append(contentsOf: id.utf8)
        idEnds.append(idBytes.count)
        lengths.append(length)
    }

    /// Writes the batch's postings in `tx`: appended to each word's last block and new full
    /// blocks after it when the word's blocks all end before the batch's first object (an index
    /// build's usual case); through the transaction's general merge otherwise (writes during the
    /// build put later objects in the index first).
    func write(in tx: Transaction, partition: Partition, model: String) throws {
        guard !isEmpty else { return }
        try tx.buffer.claim(partition, model: model)
        tx.buffer.touch(model)
        // The occurrences by slot (a counting sort keeps each slot's in object order).
        let words = slots.words
        var starts = [Int](repeating: 0, count: words.count + 1)
        for occurrence in occurrences { starts[Int(occurrence.slot) + 1] += 1 }
        for slot in 0..<words.count { starts[slot + 1] += starts[slot] }
        var next = starts
        var sorted = [(object: Int32, position: Int32)](repeating: (0, 0), count: occurrences.count)
        for occurrence in occurrences {
            sorted[next[Int(occurrence.slot)]] = (occurrence.object, occurrence.position)
            next[Int(occurrence.slot)] += 1
        }

        let iterator = try tx.store.database(partition).makeIterator()
        try idBytes.withUnsafeBytes { ids in
            func id(_ object: Int32) -> UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: ids[idRange(Int(object))]) }
            for (slot, word) in words.enumerated() {
                let entries = sorted[starts[slot]..<starts[slot + 1]]
                /// Calls `body` with each posting: an object and its run of positions.
                func forEachPosting(_ body: (Int32, ArraySlice<(object: Int32, position: Int32)>) -> Void) {
                    var start = entries.startIndex
                    while start < entries.endIndex {
                        var end = start + 1
                        while end < entries.endIndex && entries[end].object == entries[start].object { end += 1 }
                        body(entries[start].object, entries[start..<end])
                        start = end
                    }
                }
                let firstID = id(entries[entries.startIndex].object)
                let block = try index.textBlock(word, holding: String(decoding: firstID, as: UTF8.self), iterator: iterator)
                var existing: [(id: [UInt8], posting: TextPosting)] = []
                if let block {
                    existing = try block.value.withUnsafeBytes { try TextBlock.decode($0) }
                    if block.next != nil || UTF8Order.compareBytes(firstID, existing.last?.id ?? []) <= 0 {
                        forEachPosting { object, positions in
                            tx.textChanges.set(
                                index, word: word, id: Array(id(object)),
                                TextPosting(length: lengths[Int(object)], positions: positions.map { Int($0.position) }))
                        }
                        continue
                    }
                }
                var writer = TextBlock.Writer()
                if existing.count < TextBlock.capacity {
                    for (id, posting) in existing { writer.append(id: id, length: posting.length, positions: posting.positions) }
                }
                forEachPosting { object, positions in
                    if writer.isFull {
                        tx.buffer.putIndexEntry(index.textBlockKey(word, firstID: String(decoding: writer.firstID, as: UTF8.self)), writer.bytes)
                        writer = TextBlock.Writer()
                    }
                    writer.append(id: id(object), length: lengths[Int(object)], positions: positions.lazy.map { Int($0.position) })
                }
                tx.buffer.putIndexEntry(index.textBlockKey(word, firstID: String(decoding: writer.firstID, as: UTF8.self)), writer.bytes)
            }
        }
    }
}

/// The words of a batch, numbered in the order first seen: an open-addressing table keyed by
/// the words' bytes, so that looking a word up makes no string.
private struct WordSlots {
    private(set) var words: [String] = []
    private var table = [Int32](repeating: -1, count: 64)
    private var hashes: [UInt64] = []
    private var bytes: [UInt8] = []
    private var ends: [Int] = []

    mutating func slot(for word: UnsafeRawBufferPointer) -> Int32 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a
        for byte in word { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let mask = table.count - 1
        var at = Int(truncatingIfNeeded: hash) & mask
        while table[at] >= 0 {
            let slot = Int(table[at])
            if hashes[slot] == hash {
                let start = slot == 0 ? 0 : ends[slot - 1]
                let same = bytes.withUnsafeBytes { $0[start..<ends[slot]].elementsEqual(word) }
                if same { return Int32(slot) }
            }
            at = (at + 1) & mask
        }
        let slot = Int32(words.count)
        table[at] = slot
        hashes.append(hash)
        bytes.append(contentsOf: word)
        ends.append(bytes.count)
        words.append(String(decoding: word, as: UTF8.self))
        if words.count * 2 > table.count { grow() }
        return slot
    }

    private mutating func grow() {
        table = [Int32](repeating: -1, count: table.count * 2)
        let mask = table.count - 1
        for (slot, hash) in hashes.enumerated() {
            var at = Int(truncatingIfNeeded: hash) & mask
            while table[at] >= 0 { at = (at + 1) & mask }
            table[at] = Int32(slot)
        }
    }
}
