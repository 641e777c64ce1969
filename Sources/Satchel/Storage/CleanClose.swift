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
/// does. (A MANIFEST is read strictly either way: a damaged one fails the open. One cut short
/// is read as if its last edits had never been made, and the open would delete the tables they
/// added: an open first compares the MANIFEST `CURRENT` names with the size a record gives it,
/// and refuses it shorter — ``cutManifest(in:)``.)
///
/// The record also keeps, for the next open, every entry under a few key prefixes (``RememberedEntries``):
/// the store's format marker and catalog, which an open would otherwise read from LevelDB,
/// opening a table and decoding its index block for them. They are the database's entries as
/// the close left them, so they hold exactly while the files do: an open served by a matching
/// record reads them from the record, and only until the first write.
///
/// Byte layout (this file owns it): the file `satchel-closed` in the database's directory,
/// UTF-8 text: the line `satchel-closed 3`; a line `kept <prefix>` per prefix whose entries the
/// record holds in full, then a line `= <key> <value>` per entry under them, in key order (keys,
/// prefixes and values in lowercase hex); the line `sum <16 hex digits>`, the 64-bit FNV-1a hash
/// of every byte before that line; then one line `<file name> <size in bytes>` per log
/// (`*.log`) and MANIFEST (`MANIFEST-*`) file, sorted by name (so the logs, named by number,
/// come first and the MANIFEST last); every line ends in `\n`. A record that does not read so —
/// cut short by a crash (its MANIFEST line, the last, then missing or without its `\n`), damaged
/// (its sum no longer the hash of what it keeps), naming a log that is not empty, no log, or more
/// than one MANIFEST — matches nothing, as do versions 1 and 2. It is written in place and never
/// synced: a record lost to a power cut only costs the next open its speed.
enum CleanCloseRecord {
    static let fileName = "satchel-closed"
    static let header = "satchel-closed 3\n"
    /// The most a record keeps of entries (keys and values, before hex): a catalog larger than
    /// this is read from LevelDB by every open.
    static let rememberedLimit = 32 << 10

    /// The record's text for the files in `directory` now (listing it) and the entries it keeps;
    /// whether every log is empty; whether the MANIFEST has grown well past what a new one would
    /// hold. Nil when they cannot be listed.
    static func describe(_ directory: String, remembering remembered: RememberedEntries = RememberedEntries())
        -> (text: String, logsEmpty: Bool, manifestOutgrown: Bool)?
    {
        guard let names = FileSystem.names(in: directory) else { return nil }
        var text = header + remembered.lines
        text += "sum \(hexHash(text.utf8))\n"
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

    /// A record that matched its directory's files.
    struct Match: Sendable {
        let text: String
        let remembered: RememberedEntries
        /// The log and MANIFEST files it names, with their sizes.
        fileprivate let files: [(name: String, size: Int)]
    }

    /// The record's text and the entries it keeps when `directory` holds a record that matches
    /// its files, else nil: every line well formed, its sum the hash of what it keeps, at least
    /// one log, all of them empty, one MANIFEST, the last line; each file there at its size;
    /// `CURRENT` naming the MANIFEST. Reads the record, `CURRENT` and a `stat` per file named,
    /// and lists nothing. With `earlier` (a match a moment ago), a record of the same bytes is
    /// not parsed again.
    static func matching(_ directory: String, asEarlier earlier: Match? = nil) -> Match? {
        guard let bytes = FileSystem.contents(of: directory + "/" + fileName, limit: 1 << 17) else { return nil }
        let match: Match
        if let earlier, bytes.elementsEqual(earlier.text.utf8) {
            match = earlier
        } else {
            guard let (remembered, files) = parse(bytes), let text = String(validating: bytes, as: UTF8.self) else { return nil }
            match = Match(text: text, remembered: remembered, files: files)
        }
        var logs = 0
        var manifest: String?
        for (name, size) in match.files {
            // Nothing after the MANIFEST: a record cut short at a line's end loses it.
            guard manifest == nil, FileSystem.size(of: directory + "/" + name) == size else { return nil }
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
        return match
    }

    /// The MANIFEST `CURRENT` names, with its size now and the size a clean close recorded,
    /// when it is now shorter: cut by damage (a MANIFEST only grows, and a new one has a new
    /// name). LevelDB reads a MANIFEST cut short as if its last edits had never been made, and
    /// deletes the tables they added; the record is how an open tells. Nil otherwise, or when
    /// there is no record to tell by.
    static func cutManifest(in directory: String) -> (name: String, size: Int, recorded: Int)? {
        guard let bytes = FileSystem.contents(of: directory + "/" + fileName, limit: 1 << 17), let (_, files) = parse(bytes),
            let current = FileSystem.contents(of: directory + "/CURRENT"), current.last == UInt8(ascii: "\n")
        else { return nil }
        let name = String(decoding: current.dropLast(), as: UTF8.self)
        guard let recorded = files.first(where: { $0.name == name })?.size, let size = FileSystem.size(of: directory + "/" + name), size < recorded
        else { return nil }
        return (name, size, recorded)
    }

    /// The entries a record keeps and the files it names, when `bytes` read as a record.
    /// (Over the bytes by offset: it is on every open's path.)
    private static func parse(_ bytes: [UInt8]) -> (RememberedEntries, [(name: String, size: Int)])? {
        guard bytes.starts(with: header.utf8), bytes.last == UInt8(ascii: "\n") else { return nil }
        var remembered = RememberedEntries()
        var files: [(name: String, size: Int)] = []
        var summed = false
        var start = header.utf8.count
        while start < bytes.count {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n"))!
            let line = bytes[start..<end]
            defer { start = end + 1 }
            if summed {
                guard let file = entry(line) else { return nil }
                files.append(file)
            } else if line.starts(with: "kept ".utf8) {
                guard remembered.entries.isEmpty, let prefix = self.bytes(fromHex: line.dropFirst(5)) else { return nil }
                remembered.prefixes.append(prefix)
            } else if line.starts(with: "= ".utf8) {
                let rest = line.dropFirst(2)
                guard let space = rest.firstIndex(of: UInt8(ascii: " ")), let key = self.bytes(fromHex: rest[..<space]),
                    let value = self.bytes(fromHex: rest[(space + 1)...]),
                    remembered.prefixes.contains(where: { key.starts(with: $0) }),
                    remembered.entries.last.map({ UTF8Order.compareBytes($0.key, key) < 0 }) ?? true
                else { return nil }
                remembered.entries.append(RememberedEntries.Entry(key: key, value: value))
            } else if line.starts(with: "sum ".utf8) {
                guard line.dropFirst(4).elementsEqual(hexHash(bytes[..<start]).utf8) else { return nil }
                summed = true
            } else {
                return nil
            }
        }
        return summed ? (remembered, files) : nil
    }

    /// The file name and size of one `<file name> <size>` line, when it reads so.
    private static func entry(_ line: ArraySlice<UInt8>) -> (String, Int)? {
        guard let space = line.lastIndex(of: UInt8(ascii: " ")), space > line.startIndex,
            let name = String(validating: line[..<space], as: UTF8.self),
            let size = Int(String(decoding: line[(space + 1)...], as: UTF8.self)), size >= 0
        else { return nil }
        return (name, size)
    }

    /// 64-bit FNV-1a of `bytes`, as 16 lowercase hex digits.
    static func hexHash(_ bytes: some Sequence<UInt8>) -> String { Hex.lowercase(Hex.fnv1a(bytes)) }

    /// The bytes of lowercase hex `text`, or nil when it is not that.
    private static func bytes(fromHex text: ArraySlice<UInt8>) -> [UInt8]? {
        guard text.count % 2 == 0 else { return nil }
        @inline(__always) func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c &- UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c &- UInt8(ascii: "a") &+ 10
            default: nil
            }
        }
        var out = [UInt8](repeating: 0, count: text.count / 2)
        var position = text.startIndex
        for i in out.indices {
            guard let high = nibble(text[position]), let low = nibble(text[position + 1]) else { return nil }
            out[i] = high << 4 | low
            position += 2
        }
        return out
    }

    /// Whether the record in `directory` reads `text`.
    static func holds(_ text: String, in directory: String) -> Bool {
        guard let recorded = FileSystem.contents(of: directory + "/" + fileName, limit: 1 << 17) else { return false }
        return recorded.elementsEqual(text.utf8)
    }

    /// Writes the record of `text` (from ``describe(_:remembering:)``) into `directory`; false
    /// when it could not be written (the next open then writes new files: slower, never wrong).
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

    /// Whether every file the record `text` names has the size it gives.
    static func sizesHold(_ text: String, in directory: String) -> Bool {
        guard let (_, files) = parse(Array(text.utf8)) else { return false }
        return files.allSatisfy { name, size in FileSystem.size(of: directory + "/" + name) == size }
    }

    /// Removes the record from `directory` (a database that is about to be written without
    /// LevelDB knowing, such as a repair's).
    static func remove(in directory: String) {
        unlink(directory + "/" + fileName)
    }
}

/// The entries under a few key prefixes, as a clean close left them in its record
/// (``CleanCloseRecord``) for the next open.
struct RememberedEntries: Sendable, Equatable {
    struct Entry: Sendable, Equatable {
        let key: [UInt8]
        let value: [UInt8]
    }

    /// The prefixes whose every entry is in ``entries``.
    var prefixes: [[UInt8]] = []
    /// In key order.
    var entries: [Entry] = []

    /// The entries under `prefix`, in key order, when a kept prefix covers it; nil otherwise.
    func entries(withPrefix prefix: [UInt8]) -> [Entry]? {
        guard prefixes.contains(where: { prefix.starts(with: $0) }) else { return nil }
        return entries.filter { $0.key.starts(with: prefix) }
    }

    /// The record's lines for these entries.
    fileprivate var lines: String {
        var text = ""
        for prefix in prefixes { text += "kept \(Hex.lowercase(prefix))\n" }
        for entry in entries { text += "= \(Hex.lowercase(entry.key)) \(Hex.lowercase(entry.value))\n" }
        return text
    }
}
