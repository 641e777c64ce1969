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
/// record), then writes this record: every log and MANIFEST in the directory with its size, every
/// log empty (not when the MANIFEST has grown well past what a new one would hold: an open reads
/// all of it, and one without a record writes a new one).
///
/// An open reuses the files when the record's files are all there at exactly their sizes and
/// `CURRENT` names its MANIFEST, looked at without listing the directory (which holds a file
/// per table). Anything LevelDB writes after the close changes one of them: a write goes to the
/// recorded log (or, once that one is full, to a new one after it was written to), a compaction
/// appends to the recorded MANIFEST, and an open without the record writes a new MANIFEST, points
/// `CURRENT` at it and deletes the recorded files. What that leaves unseen is a log such an open
/// made and never wrote to (it died before pointing `CURRENT` at its MANIFEST, so nothing could
/// be written): empty, harmless to append to. A crash after further writes, a damaged file, a
/// repair (which removes the record) all differ, and the open writes new files as LevelDB always
/// does. (A MANIFEST is read strictly either way: a damaged one fails the open.)
///
/// Byte layout (this file owns it): the file `satchel-closed` in the database's directory,
/// UTF-8 text: the line `satchel-closed 2`, then one line `<file name> <size in bytes>` per log
/// (`*.log`) and MANIFEST (`MANIFEST-*`) file, sorted by name (so the logs, named by number,
/// come first and the MANIFEST last); every line ends in `\n`. A record that does not read so —
/// cut short by a crash (its MANIFEST line, the last, then missing or without its `\n`), damaged,
/// naming a log that is not empty, no log, or more than one MANIFEST — matches nothing, as does
/// version 1's (which an open checked against a listing of the directory). It is written in
/// place and never synced: a record lost to a power cut only costs the next open its speed.
enum CleanCloseRecord {
    static let fileName = "satchel-closed"
    static let header = "satchel-closed 2\n"

    /// The record's text for the files in `directory` now (listing it); whether every log is
    /// empty; whether the MANIFEST has grown well past what a new one would hold. Nil when they
    /// cannot be listed.
    static func describe(_ directory: String) -> (text: String, logsEmpty: Bool, manifestOutgrown: Bool)? {
        guard let names = FileSystem.names(in: directory) else { return nil }
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

    /// Whether `directory` holds a record that matches its files (see the type's notes).
    static func matches(_ directory: String) -> Bool { matching(directory) != nil }

    /// The record's text when `directory` holds a record that matches its files, else nil:
    /// every line well formed, at least one log, all of them empty, one MANIFEST, the last line;
    /// each file there at its size; `CURRENT` naming the MANIFEST. Reads the record, `CURRENT`
    /// and a `stat` per file named, and lists nothing.
    static func matching(_ directory: String) -> String? {
        guard let bytes = FileSystem.contents(of: directory + "/" + fileName), bytes.last == UInt8(ascii: "\n"),
            bytes.starts(with: header.utf8), let text = String(validating: bytes, as: UTF8.self)
        else { return nil }
        let lines = text.utf8.dropFirst(header.utf8.count).split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).dropLast()
        var logs = 0
        var manifest: String?
        for line in lines {
            // Nothing after the MANIFEST: a record cut short at a line's end loses it.
            guard manifest == nil, let (name, size) = entry(line), FileSystem.size(of: directory + "/" + name) == size else { return nil }
            if name.hasSuffix(".log") {
                guard size == 0 else { return nil }
                logs += 1
            } else if name.hasPrefix("MANIFEST-") {
                manifest = name
            } else {
                return nil
            }
        }
        guard logs > 0, let manifest, let current = FileSystem.contents(of: directory + "/CURRENT"),
            current.elementsEqual((manifest + "\n").utf8)
        else { return nil }
        return text
    }

    /// The file name and size of one `<file name> <size>` line, when it reads so.
    private static func entry(_ line: Substring.UTF8View) -> (String, Int)? {
        guard let space = line.lastIndex(of: UInt8(ascii: " ")), let name = String(line[..<space]), !name.isEmpty,
            let size = String(line[line.index(after: space)...]).flatMap({ Int($0) }), size >= 0
        else { return nil }
        return (name, size)
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
            guard let (name, size) = entry(line), FileSystem.size(of: directory + "/" + name) == size else { return false }
        }
        return true
    }

    /// Removes the record from `directory` (a database that is about to be written without
    /// LevelDB knowing, such as a repair's).
    static func remove(in directory: String) {
        unlink(directory + "/" + fileName)
    }
}
