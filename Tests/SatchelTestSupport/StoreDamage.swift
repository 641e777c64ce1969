import Foundation

/// Real damage to a closed store's files, as a failing disk or a lost file leaves it: bytes
/// flipped in tables, a log cut short, LevelDB's MANIFEST or CURRENT gone. For the repair tests
/// and the crash campaign's damage scenario.
public enum StoreDamage {
    /// The files of one partition (`user`, `app`, `local`) of the store at `store` whose names
    /// end in `suffix` (`.ldb`, `.log`; `MANIFEST-` names match by prefix), sorted by name.
    public static func files(_ store: String, partition: String = "user", suffix: String) -> [String] {
        let directory = (store as NSString).appendingPathComponent(partition)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { suffix.hasSuffix("-") ? $0.hasPrefix(suffix) : $0.hasSuffix(suffix) }.sorted()
            .map { (directory as NSString).appendingPathComponent($0) }
    }

    /// Copies the directory of a store that is still open to `destination`: what a process
    /// that died at this moment leaves (a clean close empties the log into a table, so only a
    /// death leaves writes in it). A background compaction may remove a file mid-copy; the copy
    /// is then made again from the start (a compaction takes milliseconds, a try far less than
    /// the 50 allowed).
    public static func copyWhileOpen(_ store: String, to destination: String) throws {
        var lastError: (any Error)?
        for _ in 0..<50 {
            do {
                try FileManager.default.copyItem(atPath: store, toPath: destination)
                return
            } catch {
                lastError = error
                try? FileManager.default.removeItem(atPath: destination)
            }
        }
        throw lastError!
    }

    /// Inverts `count` bytes of `file` starting at `offset` (clamped to the file).
    public static func flip(_ file: String, at offset: Int, count: Int) throws {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
        guard !bytes.isEmpty else { return }
        let start = min(max(offset, 0), bytes.count - 1)
        for i in start..<min(start + count, bytes.count) { bytes[i] ^= 0xFF }
        try Data(bytes).write(to: URL(fileURLWithPath: file))
    }

    /// Inverts `count` bytes of `file`, each at a random offset drawn from `random` in the part
    /// `within` of the file (fractions of its length: a table's first block holds its smallest
    /// keys; its data blocks come first, its index block and footer, whose damage loses the
    /// whole table, last).
    public static func flipRandomBytes(_ file: String, count: Int, within part: ClosedRange<Double> = 0...1, random: inout SplitMix64) throws {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
        guard !bytes.isEmpty else { return }
        let start = min(Int(Double(bytes.count) * max(part.lowerBound, 0)), bytes.count - 1)
        let span = max(1, min(Int(Double(bytes.count) * min(part.upperBound, 1)), bytes.count) - start)
        for _ in 0..<count { bytes[start + Int(random.next() % UInt64(span))] ^= 0xFF }
        try Data(bytes).write(to: URL(fileURLWithPath: file))
    }

    /// Cuts `file` to `length` bytes.
    public static func truncate(_ file: String, to length: Int) throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: file))
        defer { try? handle.close() }
        try handle.truncate(atOffset: UInt64(max(length, 0)))
    }

    /// The size of `file` in bytes (0 when it cannot be read).
    public static func size(_ file: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: file))?[.size] as? NSNumber)?.intValue ?? 0
    }

    /// Where a LevelDB table's meta-index block (`metaIndex`) or index block lies in `file`:
    /// their handles are the table's 48-byte footer (two varint offset-size pairs, padded, then
    /// an 8-byte magic number). The filter block, when there is one, ends just before the
    /// meta-index block.
    public static func block(_ which: TableBlock, of file: String) throws -> Range<Int> {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
        var position = bytes.count - 48
        func varint() -> Int {
            var value = 0
            var shift = 0
            while position < bytes.count {
                let byte = bytes[position]
                position += 1
                value |= Int(byte & 0x7F) << shift
                if byte & 0x80 == 0 { break }
                shift += 7
            }
            return value
        }
        let metaIndex = varint()
        let metaIndexEnd = metaIndex + varint()
        if which == .metaIndex { return metaIndex..<metaIndexEnd }
        let offset = varint()
        return offset..<(offset + varint())
    }

    /// The offset in `file` of byte `k` of the first key of a LevelDB table's index block, as
    /// Snappy leaves it: after the block's uncompressed length (a varint) and a literal's tag
    /// byte come the entry's three one-byte varints (shared 0, key length, handle length) and
    /// the key. Nil when the block does not start so (uncompressed, or another tag).
    public static func indexKeyByte(of file: String, at k: Int) throws -> Int? {
        let index = try block(.index, of: file)
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))[index]
        var position = index.lowerBound
        while position < index.upperBound && bytes[position] & 0x80 != 0 { position += 1 }
        position += 1  // the varint's last byte
        guard position + 4 < index.upperBound, bytes[position] & 3 == 0 else { return nil }
        let literal = Int(bytes[position] >> 2) + 1
        let keyLength = Int(bytes[position + 2])
        guard bytes[position + 1] == 0, k < keyLength, 3 + k < literal else { return nil }
        return position + 4 + k
    }

    /// A block of a LevelDB table that holds no data.
    public enum TableBlock: Sendable {
        case metaIndex, index
    }

    /// Whether the bytes `needle` occur in `file`: an object's record that survived the damage
    /// intact, in a store written without compression.
    public static func contains(_ file: String, _ needle: [UInt8]) -> Bool {
        guard let data = try? Data(contentsOf: URL(fileURLWithPath: file)) else { return false }
        return data.range(of: Data(needle)) != nil
    }
}
