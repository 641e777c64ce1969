import Foundation

/// The record a partition's database leaves in its directory when it closes cleanly, so that the
/// next open may go on appending to its log and MANIFEST (LevelDB's `reuse_logs`) instead of
/// writing and syncing new ones: three `fdatasync`s and two renames fewer per partition.
///
/// Why a record: `reuse_logs` appends to the last log and MANIFEST as it finds them, and LevelDB
/// reads a file whose last record a crash cut short as if that record had never been written;
/// appending after it would make the next read take the new bytes for the rest of the cut
/// record, and fail (google/leveldb#1287, open); and it drops what a damaged log holds past the
/// damage, records appended later included. So a clean close first empties the log into a table
/// (synced, with its MANIFEST edit: the work the next open would otherwise do; not when that
/// table would start a compaction of level 0, which the close would wait for — then it leaves no
/// record), then writes this record: every log and MANIFEST in the directory with its size, every log empty. An open that
/// finds exactly those files at exactly those sizes knows no log holds anything and nothing was
/// appended since; anything else (a crash after further writes, a new or damaged file, a repair,
/// a copy) differs, and the open writes new files as LevelDB always does. (A MANIFEST is read
/// strictly either way: a damaged one fails the open.)
///
/// Byte layout (this file owns it): the file `satchel-closed` in the database's directory,
/// UTF-8 text: the line `satchel-closed 1`, then one line `<file name> <size in bytes>` per log
/// (`*.log`) and MANIFEST (`MANIFEST-*`) file, sorted by name; every line ends in `\n`. A record
/// that does not read so (cut short by a crash, or damaged), or names a log that is not empty,
/// matches nothing. It is written in
/// place and never synced: a record lost to a power cut only costs the next open its speed.
enum CleanCloseRecord {
    static let fileName = "satchel-closed"
    static let header = "satchel-closed 1\n"

    /// The record's text for the files in `directory` now; whether every log is empty; whether
    /// the MANIFEST has grown well past what a new one would hold (see ``matches(_:)``). Nil
    /// when they cannot be listed.
    /// `names`: the directory's entries when the caller has just listed them.
    static func describe(_ directory: String, names: [String]? = nil) -> (text: String, logsEmpty: Bool, manifestOutgrown: Bool)? {
        guard let names = names ?? FileSystem.names(in: directory) else { return nil }
        var text = header
        var logsEmpty = true
        var manifestBytes = 0
        var tables = 0
        var described: [String] = []
        for name in names {
            if name.hasSuffix(".ldb") || name.hasSuffix(".sst") { tables += 1 }
            if name.hasSuffix(".log") || name.hasPrefix("MANIFEST-") { described.append(name) }
        }
        // Sorted after the filter: a settled store's directory holds a few logs and MANIFESTs
        // among hundreds of tables.
        for name in described.sorted() {
            guard let size = FileSystem.size(of: directory + "/" + name) else { return nil }
            text += "\(name) \(size)\n"
            if name.hasSuffix(".log") && size != 0 { logsEmpty = false }
            if name.hasPrefix("MANIFEST-") { manifestBytes += size }
        }
        return (text, logsEmpty, manifestBytes > 2 * (newManifestBase + newManifestPerTable * tables))
    }

    /// About what a new MANIFEST holds: a header, and an entry per table (its number, size and
    /// smallest and largest keys).
    static let newManifestBase = 1 << 10
    static let newManifestPerTable = 128

    /// Whether `directory` holds a record that matches its files: the database closed cleanly
    /// and nothing was written to its logs since. A MANIFEST that every compaction has added to
    /// since it was written (an open reads all of it) to twice what a new one would hold does
    /// not count: that open writes a new one, as LevelDB does on every open without a record.
    static func matches(_ directory: String, names: [String]? = nil) -> Bool {
        matching(directory, names: names) != nil
    }

    /// The record's text when `directory` holds a record that matches its files (see
    /// ``matches(_:names:)``), else nil.
    static func matching(_ directory: String, names: [String]? = nil) -> String? {
        guard let now = describe(directory, names: names), now.logsEmpty, !now.manifestOutgrown else { return nil }
        return holds(now.text, in: directory) ? now.text : nil
    }

    /// Whether the files a matching record `text` described (from ``matching(_:names:)``) are
    /// still as it says, looked at without listing the directory: the record is still there,
    /// every file it names has its size, and `CURRENT` names its MANIFEST. For the check after
    /// LevelDB took the directory's lock: any open by another process in between either wrote to
    /// the recorded log or MANIFEST, or pointed `CURRENT` at a new MANIFEST (and then deleted the
    /// recorded files, unless it died first).
    static func stillMatches(_ text: String, in directory: String) -> Bool {
        let manifests = text.utf8.split(separator: UInt8(ascii: "\n")).compactMap { line in
            line.starts(with: "MANIFEST-".utf8) ? line.split(separator: UInt8(ascii: " ")).first.flatMap { String($0) } : nil
        }
        guard manifests.count == 1, let current = FileSystem.contents(of: directory + "/CURRENT"),
            current.elementsEqual((manifests[0] + "\n").utf8)
        else { return false }
        return holds(text, in: directory) && sizesHold(text, in: directory)
    }

    /// Whether the record in `directory` reads `text`.
    static func holds(_ text: String, in directory: String) -> Bool {
        guard let recorded = FileSystem.contents(of: directory + "/" + fileName) else { return false }
        return recorded.elementsEqual(text.utf8)
    }

    /// Writes the record of `text` (from ``describe(_:)``) into `directory`; false when it could
    /// not be written (the next open then writes new files: slower, never wrong).
    @discardableResult
    static func write(_ text: String, in directory: String) -> Bool {
        // A session that wrote nothing leaves the record it found.
        if holds(text, in: directory) { return true }
        return FileSystem.writeInPlace(Array(text.utf8), to: directory + "/" + fileName)
    }

    /// Removes the record of `text` from `directory` unless every file it names still has the
    /// size it gives. (After a close, when a compaction LevelDB had running may have added to
    /// the MANIFEST: no log or MANIFEST is made but by an open, so the files it names are the
    /// ones to look at.)
    static func withdraw(in directory: String, unlessStill text: String) {
        if !sizesHold(text, in: directory) { unlink(directory + "/" + fileName) }
    }

    /// Whether every `<file name> <size>` line of the record `text` names a file of that size.
    static func sizesHold(_ text: String, in directory: String) -> Bool {
        for line in text.utf8.split(separator: UInt8(ascii: "\n")).dropFirst() {
            guard let space = line.lastIndex(of: UInt8(ascii: " ")),
                let name = String(line[..<space]), let size = Int(String(line[line.index(after: space)...]) ?? ""),
                FileSystem.size(of: directory + "/" + name) == size
            else { return false }
        }
        return true
    }

    /// Removes the record from `directory` (a database that is about to be written without
    /// LevelDB knowing, such as a repair's).
    static func remove(in directory: String) {
        unlink(directory + "/" + fileName)
    }
}
