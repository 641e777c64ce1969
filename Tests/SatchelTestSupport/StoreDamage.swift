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

    /// Whether the bytes `needle` occur in `file`: an object's record that survived the damage
    /// intact, in a store written without compression.
    public static func contains(_ file: String, _ needle: [UInt8]) -> Bool {
        guard let data = try? Data(contentsOf: URL(fileURLWithPath: file)) else { return false }
        return data.range(of: Data(needle)) != nil
    }
}
