import Foundation
import Satchel
import SatchelTestSupport
import Testing

/// `satchel repair` on stores damaged as disks and lost files damage them, checked from the
/// outside: the files on disk, `check`, and each indexed answer next to a scan's (`export`).
@Suite("satchel repair on damaged stores")
struct RepairCLITests {
    static let brands = ["Acme", "Hooli", "Initech", "Umbrella", "Zenith"]

    /// A store of `count` Items indexed by brand, written by the CLI and compacted into tables
    /// (with the index built before the import, so entries and objects share the tables).
    static func makeStore(_ directory: TemporaryDirectory, count: Int) async throws -> (db: String, items: [String: String]) {
        let db = directory.child("db")
        var lines: [String] = []
        var items: [String: String] = [:]
        for i in 0..<count {
            let line =
                #"{"brand":"\#(brands[i % brands.count])","n":\#(i),"object":"i\#(String(format: "%05d", i))","text":"\#(String(repeating: "w", count: 40 + i % 60))"}"#
            lines.append(line)
            items["i\(String(format: "%05d", i))"] = line
        }
        let file = directory.child("items.jsonl")
        try lines.joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try await CLI.run(["--db", db, "put", "Item", #"{"object":"seed","brand":"Acme"}"#]).status == 0)
        #expect(try await CLI.run(["--db", db, "delete", "Item", "seed"]).status == 0)
        #expect(try await CLI.run(["--db", db, "index", "Item", "brand"]).status == 0)
        let imported = try await CLI.run(["--db", db, "import", "Item", file, "--progress", "none"])
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(try await CLI.run(["--db", db, "compact"]).status == 0)
        return (db, items)
    }

    /// A store at `db` whose objects `written` were put by separate CLI runs (an index on
    /// `brand` declared after the first) and whose objects `logged` (each with `text`, when
    /// given) sit only in its log: the last writes of a process that died, the directory copied
    /// while the store is still open (a clean close empties the log into a table). Returns the
    /// copy's path and every object's line as written.
    static func storeWithLoggedWrites(
        _ directory: TemporaryDirectory, written: Range<Int>, logged: Range<Int>, text: String? = nil
    ) async throws -> (db: String, items: [String: String]) {
        let source = directory.child("written")
        var items: [String: String] = [:]
        for i in written {
            let line = #"{"brand":"\#(brands[i % brands.count])","n":\#(i),"object":"i\#(i)"}"#
            items["i\(i)"] = line
            #expect(try await CLI.run(["--db", source, "put", "Item", line]).status == 0)
            if i == written.lowerBound { #expect(try await CLI.run(["--db", source, "index", "Item", "brand"]).status == 0) }
        }
        let db = directory.child("db")
        let store = try Store(path: source)
        let model = try store.model("Item")
        for i in logged {
            var attributes: JSONObject = ["brand": .string(brands[i % brands.count]), "n": .int(Int64(i))]
            var line = #"{"brand":"\#(brands[i % brands.count])","n":\#(i),"object":"i\#(i)""#
            if let text {
                attributes["text"] = .string(text)
                line += #","text":"\#(text)""#
            }
            items["i\(i)"] = line + "}"
            try model.save(Object(id: "i\(i)", attributes: attributes))
        }
        try StoreDamage.copyWhileOpen(source, to: db)
        try store.close()
        return (db, items)
    }

    /// The objects `export` prints (a scan of the model), by id.
    static func exported(_ db: String) async throws -> [String: String] {
        let result = try await CLI.run(["--db", db, "export", "Item"])
        #expect(result.status == 0, "\(result.stderr)")
        var objects: [String: String] = [:]
        for line in result.lines {
            let object = try JSONObject(parsing: line)
            objects[object["object"]?.stringValue ?? ""] = line
        }
        return objects
    }

    /// After a repair: `check` passes, every object left is one that was written (nothing made
    /// up, nothing half), and each brand's indexed count equals the scan's. Returns the objects
    /// left.
    static func expectTruthful(_ db: String, written: [String: String]) async throws -> Int {
        let check = try await CLI.run(["--db", db, "check"])
        #expect(check.status == 0, "\(check.stdout)\(check.stderr)")
        let objects = try await exported(db)
        for (id, line) in objects { #expect(written[id] == line, "object \(id) after repair: \(line)") }
        for brand in brands {
            let indexed = try await CLI.run(["--db", db, "find", "Item", "--where", "brand=\(brand)", "--count", "--require-index"])
            let scanned = objects.values.filter { $0.contains(#""brand":"\#(brand)""#) }.count
            #expect(indexed.status == 0 && indexed.lines == ["\(scanned)"], "brand \(brand): index \(indexed.lines), scan \(scanned)")
        }
        return objects.count
    }

    @Test("repair refuses a directory that is not a store, in one line, creating nothing; --force salvages anyway")
    func refusesOtherDirectories() async throws {
        let directory = TemporaryDirectory()
        let other = directory.child("x")
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        try "hi".write(toFile: other + "/notes.txt", atomically: true, encoding: .utf8)
        let refused = try await CLI.run(["--db", other, "repair"])
        #expect(refused.status == 1 && refused.stdout.isEmpty)
        #expect(refused.stderr.split(separator: "\n").count == 1 && refused.stderr.contains("not a Satchel store"), "\(refused.stderr)")
        #expect(refused.stderr.contains("--force"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: other) == ["notes.txt"])
        let empty = directory.child("empty")
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        #expect(try await CLI.run(["--db", empty, "repair"]).status == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: empty).isEmpty)

        let forced = try await CLI.run(["--db", other, "repair", "--force"])
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: other).contains("notes.txt"))
    }

    @Test("200 bytes flipped in a table: repair keeps what decodes and rebuilds the index; every indexed count equals the scan's")
    func flippedBytes() async throws {
        let directory = TemporaryDirectory()
        let (db, items) = try await Self.makeStore(directory, count: 6000)
        let tables = StoreDamage.files(db, suffix: ".ldb")
        let largest = try #require(tables.max { StoreDamage.size($0) < StoreDamage.size($1) })
        var random = SplitMix64(seed: 27)
        try StoreDamage.flipRandomBytes(largest, count: 200, within: 0.05...0.8, random: &random)

        let repaired = try await CLI.run(["--db", db, "repair"])
        #expect(repaired.status == 0, "\(repaired.stdout)\(repaired.stderr)")
        #expect(repaired.stdout.contains("ok") && repaired.stdout.contains("rebuilt"), "\(repaired.stdout)")
        let left = try await Self.expectTruthful(db, written: items)
        #expect(left > 0 && left < items.count, "the damage cost some objects, not all: \(left)")
        // The table is named as one not read whole, kept aside.
        let name = (largest as NSString).lastPathComponent
        #expect(repaired.stdout.contains("lost: the user partition's file \(name) could not be read whole"), "\(repaired.stdout)")
        #expect(FileManager.default.fileExists(atPath: db + "/user/lost/" + name))
    }

    @Test(
        "a byte changed in a key of a table's index block, its data intact: repair keeps every object (a black-box probe: LevelDB's repair set the whole table aside, and repair said ok with nothing left)",
        arguments: [1, 4])
    func damagedIndexKey(_ byte: Int) async throws {
        let directory = TemporaryDirectory()
        let (db, items) = try await Self.makeStore(directory, count: 3000)
        let tables = StoreDamage.files(db, suffix: ".ldb")
        let largest = try #require(tables.max { StoreDamage.size($0) < StoreDamage.size($1) })
        let offset = try #require(try StoreDamage.indexKeyByte(of: largest, at: byte), "an index block as Snappy leaves it")
        try StoreDamage.flip(largest, at: offset, count: 1)
        #expect(try await CLI.run(["--db", db, "check"]).status != 0, "check finds the damage")

        let repaired = try await CLI.run(["--db", db, "repair"])
        #expect(repaired.status == 0, "\(repaired.stdout)\(repaired.stderr)")
        #expect(!repaired.stdout.contains("lost:"), "\(repaired.stdout)")
        #expect(try await Self.expectTruthful(db, written: items) == items.count)
    }

    @Test("a damaged first block of every table loses the format marker: repair writes it again and keeps every record that decodes")
    func damagedFirstBlocks() async throws {
        let directory = TemporaryDirectory()
        let (db, items) = try await Self.makeStore(directory, count: 3000)
        for table in StoreDamage.files(db, suffix: ".ldb") { try StoreDamage.flip(table, at: 8, count: 16) }
        let refused = try await CLI.run(["--db", db, "find", "Item", "--count"])
        #expect(refused.status == 1 && refused.stderr.split(separator: "\n").count == 1, "\(refused.stderr)")

        let repaired = try await CLI.run(["--db", db, "repair"])
        #expect(repaired.status == 0, "\(repaired.stdout)\(repaired.stderr)")
        #expect(repaired.stdout.contains("format marker"), "\(repaired.stdout)")
        // The index's definition was in the first block too: repair says so, and it is declared again.
        #expect(repaired.stdout.contains("index Item #1 had lost its definition"), "\(repaired.stdout)")
        #expect(try await CLI.run(["--db", db, "index", "Item", "brand"]).status == 0)
        let left = try await Self.expectTruthful(db, written: items)
        #expect(left > items.count / 2, "only the first blocks were lost: \(left) of \(items.count) left")
    }

    @Test("a missing CURRENT or MANIFEST: repair finds every object again", arguments: ["CURRENT", "MANIFEST-"])
    func missingFile(_ name: String) async throws {
        let directory = TemporaryDirectory()
        let (db, items) = try await Self.makeStore(directory, count: 2000)
        let files = name == "CURRENT" ? [directory.child("db/user/CURRENT")] : StoreDamage.files(db, suffix: name)
        #expect(!files.isEmpty)
        for file in files { try FileManager.default.removeItem(atPath: file) }
        #expect(try await CLI.run(["--db", db, "find", "Item", "--count"]).status == 1)

        let repaired = try await CLI.run(["--db", db, "repair"])
        #expect(repaired.status == 0, "\(repaired.stdout)\(repaired.stderr)")
        #expect(try await Self.expectTruthful(db, written: items) == items.count)
    }

    @Test(
        "a table deleted from the store: repair names the missing tables as lost, and a repair killed after finding it, run again, still names it (found by a black-box probe: ok, and nothing said)"
    )
    func deletedTable() async throws {
        let directory = TemporaryDirectory()
        let (db, _) = try await Self.makeStore(directory, count: 500)
        // An update in a table of its own (a run that closes cleanly writes one), then deleted.
        #expect(try await CLI.run(["--db", db, "update", "Item", "i00007", #"{"brand":"Edited"}"#]).status == 0)
        let user = directory.child("db/user")
        let newest = try #require(
            try FileManager.default.contentsOfDirectory(atPath: user).filter { $0.hasSuffix(".ldb") }.max())
        try FileManager.default.removeItem(atPath: user + "/" + newest)
        #expect(try await CLI.run(["--db", db, "find", "Item", "--count"]).status == 1)

        let repaired = try await CLI.run(["--db", db, "repair"])
        #expect(repaired.status == 0, "\(repaired.stdout)\(repaired.stderr)")
        let lost = repaired.lines.filter { $0.hasPrefix("lost: the user partition's tables named by its manifest were gone") }
        #expect(lost.count == 1 && lost.first?.contains("missing files") == true, "\(repaired.stdout)")
        #expect(!FileManager.default.fileExists(atPath: user + "/repair-findings"), "reported, so no longer kept")
        #expect(try await CLI.run(["--db", db, "check"]).status == 0)

        // What a repair killed after it found damage (and rewrote the files that showed it)
        // leaves: the next repair reports it.
        try #"{"log":"Corruption: checksum mismatch"}"#.write(toFile: user + "/repair-findings", atomically: true, encoding: .utf8)
        let again = try await CLI.run(["--db", db, "repair"])
        #expect(
            again.status == 0 && again.lines.contains { $0.hasPrefix("lost: the user partition's log was damaged (Corruption: checksum mismatch)") })
        #expect(!FileManager.default.fileExists(atPath: user + "/repair-findings"))
    }

    @Test(
        "a MANIFEST cut short after a clean close: every command refuses the store, deleting no table, and repair finds every object again (found by a black-box probe)"
    )
    func cutManifest() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        var items: [String: String] = [:]
        var lines: [String] = []
        for i in 0..<2000 {
            let line = #"{"brand":"\#(Self.brands[i % Self.brands.count])","n":\#(i),"object":"i\#(i)"}"#
            lines.append(line)
            items["i\(i)"] = line
        }
        try lines.joined(separator: "\n").write(toFile: directory.child("items.jsonl"), atomically: true, encoding: .utf8)
        #expect(try await CLI.run(["--db", db, "import", "Item", directory.child("items.jsonl"), "--progress", "none"]).status == 0)
        #expect(try await CLI.run(["--db", db, "index", "Item", "brand"]).status == 0)
        // Later runs, each closing cleanly (a table apiece, too few to start a compaction):
        // edits appended to the MANIFEST.
        #expect(try await CLI.run(["--db", db, "put", "Note", #"{"body":"hello","object":"n1"}"#]).status == 0)
        let late = #"{"brand":"Acme","n":0,"object":"late0"}"#
        #expect(try await CLI.run(["--db", db, "put", "Item", late]).status == 0)
        items["late0"] = late
        #expect(FileManager.default.fileExists(atPath: directory.child("db/user/satchel-closed")), "closed cleanly")
        let user = directory.child("db/user")
        let manifest = try #require(try FileManager.default.contentsOfDirectory(atPath: user).first { $0.hasPrefix("MANIFEST-") })
        let size = try #require(FileManager.default.attributesOfItem(atPath: user + "/" + manifest)[.size] as? Int)
        let handle = try #require(FileHandle(forWritingAtPath: user + "/" + manifest))
        try handle.truncate(atOffset: UInt64(size / 2))
        try handle.close()
        let tables = try FileManager.default.contentsOfDirectory(atPath: user).filter { $0.hasSuffix(".ldb") }.sorted()
        for command in [["stats"], ["find", "Item", "--count"]] {
            let refused = try await CLI.run(["--db", db] + command)
            #expect(refused.status == 1 && refused.stderr.contains("repair"), "\(command): \(refused.stdout)\(refused.stderr)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: user).filter { $0.hasSuffix(".ldb") }.sorted() == tables, "no table deleted")

        let repaired = try await CLI.run(["--db", db, "repair"])
        #expect(repaired.status == 0, "\(repaired.stdout)\(repaired.stderr)")
        #expect(try await Self.expectTruthful(db, written: items) == items.count)
        #expect(try await CLI.run(["--db", db, "find", "Note", "--id", "n1"]).lines == [#"{"body":"hello","object":"n1"}"#])
    }

    @Test("a byte changed in a log's first record: the store refuses to open, and repair drops that write, keeping every other as written")
    func damagedLogRecord() async throws {
        let directory = TemporaryDirectory()
        let text = String(repeating: "v", count: 200)
        let (db, items) = try await Self.storeWithLoggedWrites(directory, written: 0..<5, logged: 5..<15, text: text)
        // One byte of the first write's value, in the log's first record.
        let log = try #require(StoreDamage.files(db, suffix: ".log").max { StoreDamage.size($0) < StoreDamage.size($1) })
        var bytes = try Data(contentsOf: URL(fileURLWithPath: log))
        let at = try #require(bytes.firstRange(of: Data(text.utf8))).lowerBound + 100
        bytes[at] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: log))

        // Dropping the record and keeping the nine after it would be a state the store never
        // had: the open refuses, in one line, pointing at repair; nothing is written.
        for command in [["check"], ["find", "Item", "--count"]] {
            let refused = try await CLI.run(["--db", db] + command)
            #expect(refused.status == 1 && refused.stderr.split(separator: "\n").count == 1, "\(command): \(refused.stdout)\(refused.stderr)")
            #expect(refused.stderr.contains("damaged") && refused.stderr.contains("satchel repair"), "\(refused.stderr)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: log)) == bytes, "the refused opens left the log as it was")

        let repaired = try await CLI.run(["--db", db, "repair"])
        #expect(repaired.status == 0, "\(repaired.stdout)\(repaired.stderr)")
        // The dropped write is named as lost, not only counted (found by a black-box probe).
        #expect(repaired.lines.contains { $0.hasPrefix("lost: the user partition's log was damaged") }, "\(repaired.stdout)")
        // LevelDB drops the damaged record and the rest of its 32 KiB block (its length may be
        // what changed); what is left is as it was written.
        let left = try await Self.expectTruthful(db, written: items)
        let ids = Set(try await Self.exported(db).keys)
        #expect(left < items.count && !ids.contains("i5"), "the damaged write is gone: \(ids.sorted())")
        #expect(ids.isSuperset(of: (0..<5).map { "i\($0)" }), "the writes in tables stay: \(ids.sorted())")
    }

    @Test("a log cut short: the store opens with whole writes only, and repair leaves it truthful")
    func truncatedLog() async throws {
        let directory = TemporaryDirectory()
        #expect(try await CLI.run(["--db", directory.child("written"), "index", "Item", "brand"]).status == 1, "no model yet")
        let (db, items) = try await Self.storeWithLoggedWrites(directory, written: 0..<30, logged: 30..<40)
        // Cut into the last writes.
        let log = try #require(StoreDamage.files(db, suffix: ".log").max { StoreDamage.size($0) < StoreDamage.size($1) })
        #expect(StoreDamage.size(log) > 20)
        try StoreDamage.truncate(log, to: StoreDamage.size(log) - 20)

        let repaired = try await CLI.run(["--db", db, "repair"])
        #expect(repaired.status == 0, "\(repaired.stdout)\(repaired.stderr)")
        let left = try await Self.expectTruthful(db, written: items)
        #expect(left >= items.count - 1, "at most the cut write is lost: \(left)")
    }
}
