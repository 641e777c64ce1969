import Foundation
import Satchel
import SatchelTestSupport
import Testing

/// `find --require-index`, `export` and `compact` from the command line.
@Suite("satchel find --require-index, export, compact")
struct StoreToolsCLITests {
    @Test("--require-index: exit 2 and one line naming the attribute to index while the query would scan; answers once it is indexed")
    func requireIndex() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        for i in 0..<6 {
            #expect(
                try await CLI.run([
                    "--db", db, "put", "Product", #"{"object":"p\#(i)","brand":"\#(i % 2 == 0 ? "Acme" : "Zenith")","tags":["t\#(i % 3)"]}"#,
                ]).status == 0)
        }
        let refused = try await CLI.run(["--db", db, "find", "Product", "--where", "brand=Acme", "--require-index"])
        #expect(refused.status == 2 && refused.stdout.isEmpty)
        #expect(refused.stderr.split(separator: "\n").count == 1 && refused.stderr.contains("index 'brand'"), "\(refused.stderr)")
        let contains = try await CLI.run(["--db", db, "find", "Product", "--where", "tags ~= t1", "--require-index"])
        #expect(contains.status == 2 && contains.stderr.contains("index 'tags[]'"), "\(contains.stderr)")
        #expect(try await CLI.run(["--db", db, "find", "Product", "--where", "brand=Acme"]).lines.count == 3, "without the flag it scans")
        #expect(try await CLI.run(["--db", db, "index", "Product", "brand"]).status == 0)
        let served = try await CLI.run(["--db", db, "find", "Product", "--where", "brand=Acme", "--require-index", "--count"])
        #expect(served.status == 0 && served.lines == ["3"])
        #expect(try await CLI.run(["--db", db, "find", "Product", "--id", "p1", "--require-index"]).status == 0, "an id lookup needs no index")
    }

    @Test(
        "runs of one write each do not pile tables up at level 0 in a plain store with an index (found by a black-box probe: 129 tables after 130 runs)"
    )
    func shortRunsDoNotPileUp() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let seed = directory.child("seed.jsonl")
        let lines = (0..<20_000).map { #"{"object":"o\#($0)","n":\#($0),"brand":"b\#($0 % 50)","txt":"\#(String(repeating: "x", count: 40))"}"# }
        try lines.joined(separator: "\n").write(toFile: seed, atomically: true, encoding: .utf8)
        #expect(try await CLI.run(["--db", db, "import", "Note", seed]).status == 0)
        #expect(try await CLI.run(["--db", db, "index", "Note", "brand"]).status == 0)
        var most = 0
        for i in 0..<16 {
            #expect(try await CLI.run(["--db", db, "put", "Note", #"{"object":"w\#(i)","n":\#(i)}"#]).status == 0)
            most = max(most, StoreDamage.files(db, suffix: ".ldb").count)
        }
        #expect(most <= 8, "\(most) tables")
        #expect(try await CLI.run(["--db", db, "find", "Note", "--count"]).lines == ["20016"])
        #expect(try await CLI.run(["--db", db, "check"]).status == 0)
    }

    @Test("export to stdout and to a file; compact prints the bytes before and after and leaves the data")
    func exportAndCompact() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        for i in 0..<50 {
            _ = try await CLI.run(["--db", db, "put", "Note", #"{"object":"n\#(i)","text":"\#(String(repeating: "x", count: 200))"}"#])
        }
        for i in 0..<40 { _ = try await CLI.run(["--db", db, "delete", "Note", "n\(i)"]) }
        let lines = try await CLI.run(["--db", db, "export", "Note"]).lines
        #expect(lines.count == 10 && lines.first?.hasPrefix(#"{"object":"n40""#) == true)
        let file = directory.child("notes.jsonl")
        let toFile = try await CLI.run(["--db", db, "export", "Note", file])
        #expect(toFile.status == 0 && toFile.stderr.contains("exported 10"))
        #expect(try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n").map(String.init) == lines)
        let compact = try await CLI.run(["--db", db, "compact"])
        #expect(compact.status == 0 && compact.lines.first?.hasPrefix("compacted: ") == true, "\(compact.stderr)")
        #expect(try await CLI.run(["--db", db, "find", "Note", "--count"]).lines == ["10"])
        #expect(try await CLI.run(["--db", directory.child("missing"), "compact"]).status != 0)

        // What the file named is written, not replaced (found by a black-box probe): a link's
        // target (the link stays), a stream where it stands; a directory is one line.
        let target = directory.child("target.jsonl")
        try Data("old\n".utf8).write(to: URL(fileURLWithPath: target))
        let link = directory.child("link.jsonl")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        #expect(try await CLI.run(["--db", db, "export", "Note", link]).status == 0)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == target)
        #expect(try String(contentsOfFile: target, encoding: .utf8).split(separator: "\n").map(String.init) == lines)
        let stream = try await CLI.run(["--db", db, "export", "Note", "/dev/stdout"])
        #expect(stream.status == 0 && stream.lines == lines, "\(stream.stderr)")
        let folder = try await CLI.run(["--db", db, "export", "Note", directory.path])
        #expect(folder.status == 1 && folder.stderr == "satchel: cannot write '\(directory.path)': it is a directory\n", "\(folder.stderr)")
        #expect(try String(contentsOfFile: target, encoding: .utf8).split(separator: "\n").count == 10)
    }

    @Test("backup copies the store into a new one that checks clean; restore swaps it back and keeps the replaced store")
    func backupAndRestore() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let backup = directory.child("backup")
        for i in 0..<20 { _ = try await CLI.run(["--db", db, "put", "Note", #"{"object":"n\#(i)","topic":"t\#(i % 3)"}"#]) }
        #expect(try await CLI.run(["--db", db, "index", "Note", "topic"]).status == 0)
        let copied = try await CLI.run(["--db", db, "backup", backup])
        #expect(copied.status == 0 && copied.lines.first?.hasPrefix("backed up: ") == true, "\(copied.stderr)")
        #expect(try await CLI.run(["--db", backup, "check"]).status == 0)
        #expect(try await CLI.run(["--db", backup, "find", "Note", "--where", "topic=t1", "--count", "--require-index"]).lines == ["7"])
        let again = try await CLI.run(["--db", db, "backup", backup])
        #expect(again.status == 1 && again.stderr.split(separator: "\n").count == 1 && again.stderr.contains("exists"), "\(again.stderr)")

        #expect(try await CLI.run(["--db", db, "delete", "Note", "n0"]).status == 0)
        let other = directory.child("other")
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        let refused = try await CLI.run(["--db", db, "restore", other])
        #expect(refused.status == 1 && refused.stderr.split(separator: "\n").count == 1, "\(refused.stderr)")
        #expect(try await CLI.run(["--db", db, "find", "Note", "--count"]).lines == ["19"], "a refused restore changes nothing")

        let restored = try await CLI.run(["--db", db, "restore", backup])
        #expect(restored.status == 0, "\(restored.stderr)")
        #expect(try await CLI.run(["--db", db, "find", "Note", "--count"]).lines == ["20"])
        let replaced = try #require(restored.lines.first?.components(separatedBy: "kept at ").last)
        #expect(try await CLI.run(["--db", replaced, "find", "Note", "--count"]).lines == ["19"])

        // A --db that is not a store (a directory of other files, a regular file) is refused and
        // left where it is; an empty directory takes the restored store.
        let documents = directory.child("documents")
        try FileManager.default.createDirectory(atPath: documents, withIntermediateDirectories: true)
        try "my notes".write(toFile: documents + "/notes.txt", atomically: true, encoding: .utf8)
        let notAStore = try await CLI.run(["--db", documents, "restore", backup])
        #expect(notAStore.status == 1 && notAStore.stderr.split(separator: "\n").count == 1, "\(notAStore.stdout) \(notAStore.stderr)")
        #expect(notAStore.stderr.contains("not a Satchel store"), "\(notAStore.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: documents) == ["notes.txt"])
        let plainFile = directory.child("file.txt")
        try "plain".write(toFile: plainFile, atomically: true, encoding: .utf8)
        let aFile = try await CLI.run(["--db", plainFile, "restore", backup])
        #expect(aFile.status == 1 && aFile.stderr.contains("not a Satchel store"), "\(aFile.stderr)")
        #expect(try String(contentsOfFile: plainFile, encoding: .utf8) == "plain")
        let siblings = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(!siblings.contains { $0.hasPrefix("documents.") || $0.hasPrefix("file.txt.") }, "\(siblings)")
        let empty = directory.child("empty")
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        #expect(try await CLI.run(["--db", empty, "restore", backup]).status == 0)
        #expect(try await CLI.run(["--db", empty, "find", "Note", "--count"]).lines == ["20"])
    }

    @Test("migrate: a dry run prints each change and writes nothing; the migration runs once across runs; a refused one changes nothing")
    func migrate() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        for i in 0..<12 {
            _ = try await CLI.run([
                "--db", db, "put", "Note", #"{"object":"n\#(i)","title":"T\#(i)","rank":"\#(i)"\#(i % 4 == 0 ? #","old":1"# : "")}"#,
            ])
        }
        let file = directory.child("v2.json")
        try #"""
        [{"name":"v2","steps":[{"rename":"title","to":"name"},{"remove":"old"},{"convert":"rank","to":"integer"},{"createIndex":"rank"},
          {"schema":{"name":"string","rank":"integer"}}]}]
        """#.write(toFile: file, atomically: true, encoding: .utf8)
        let before = try await CLI.run(["--db", db, "export", "Note"]).lines
        let dry = try await CLI.run(["--db", db, "migrate", "Note", file, "--dry-run"])
        #expect(dry.status == 0, "\(dry.stderr)")
        try #require(dry.lines.count == 15, "\(dry.stdout)")
        #expect(dry.lines.last?.hasPrefix("dry run: migration 'v2' of Note would change 12 of 12") == true, "\(dry.stdout)")
        // Its index and schema steps too (found by a black-box probe).
        #expect(
            dry.lines[12...13] == [
                "dry run: migration 'v2' of Note would create index rank",
                "dry run: migration 'v2' of Note would give the model a fixed schema of name, rank",
            ])
        let first = try JSONObject(parsing: dry.lines[0])
        #expect(first["object"] == "n0" && first["after"] == ["name": "T0", "rank": 0] && first["before"] == ["title": "T0", "rank": "0", "old": 1])
        #expect(try await CLI.run(["--db", db, "export", "Note"]).lines == before)

        let migrated = try await CLI.run(["--db", db, "migrate", "Note", file])
        #expect(
            migrated.status == 0 && migrated.lines == ["migrated: migration 'v2' of Note: 12 of 12 objects changed (0 deleted)"],
            "\(migrated.stdout)\(migrated.stderr)")
        #expect(try await CLI.run(["--db", db, "migrate", "Note", file]).lines == ["already applied: migration 'v2' of Note"])
        // Found by a black-box probe: a file listing no migration printed nothing.
        let empty = directory.child("empty.json")
        try "[]".write(toFile: empty, atomically: true, encoding: .utf8)
        let none = try await CLI.run(["--db", db, "migrate", "Note", empty])
        #expect(none.status == 1 && none.stderr.contains("lists no migration") && none.stdout.isEmpty, "\(none.stderr)")
        #expect(try await CLI.run(["--db", db, "find", "Note", "--where", "rank>=8", "--count", "--require-index"]).lines == ["4"])
        #expect(try await CLI.run(["--db", db, "check"]).status == 0)
        let refusedWrite = try await CLI.run(["--db", db, "put", "Note", #"{"object":"x","title":"old shape"}"#])
        #expect(refusedWrite.status == 1 && refusedWrite.stderr.contains("schema"), "the new schema holds")

        let bad = directory.child("bad.json")
        try #"{"name":"v3","steps":[{"convert":"name","to":"number"}]}"#.write(toFile: bad, atomically: true, encoding: .utf8)
        let after = try await CLI.run(["--db", db, "export", "Note"]).lines
        let refused = try await CLI.run(["--db", db, "migrate", "Note", bad])
        #expect(
            refused.status == 1 && refused.stderr.split(separator: "\n").count == 1 && refused.stderr.contains("12 of 12 objects"),
            "\(refused.stderr)")
        #expect(try await CLI.run(["--db", db, "export", "Note"]).lines == after)
        // A dry run of a migration that cannot run prints no change (a black-box probe: it printed
        // those of the objects before the one that does not migrate).
        #expect(try await CLI.run(["--db", db, "put", "Order", #"{"object":"o1","price":"12"}"#]).status == 0)
        #expect(try await CLI.run(["--db", db, "put", "Order", #"{"object":"o2","price":"abc"}"#]).status == 0)
        let convert = directory.child("convert.json")
        try #"{"name":"c1","steps":[{"convert":"price","to":"number"}]}"#.write(toFile: convert, atomically: true, encoding: .utf8)
        let dryRefused = try await CLI.run(["--db", db, "migrate", "Order", convert, "--dry-run"])
        #expect(dryRefused.status == 1 && dryRefused.stdout.isEmpty, "\(dryRefused.stdout)")
        #expect(dryRefused.stderr.contains("'o2'"), "\(dryRefused.stderr)")

        // A list whose second migration fails: the first stays applied, and the error says so.
        let pair = directory.child("pair.json")
        try #"[{"name":"v4","steps":[{"add":"flag","default":true}]},{"name":"v5","steps":[{"convert":"name","to":"number"}]}]"#
            .write(toFile: pair, atomically: true, encoding: .utf8)
        for i in 0..<3 { #expect(try await CLI.run(["--db", db, "put", "Memo", #"{"object":"m\#(i)","name":"memo \#(i)"}"#]).status == 0) }
        // Its dry run checks the second against the store as the first leaves it, so it fails
        // as the real run will, writing nothing (found by a black-box probe: it dry-ran clean).
        let memos = try await CLI.run(["--db", db, "export", "Memo"]).lines
        let dryPair = try await CLI.run(["--db", db, "migrate", "Memo", pair, "--dry-run"])
        #expect(dryPair.status == 1 && dryPair.stdout.isEmpty && dryPair.stderr.contains("migration 'v5'"), "\(dryPair.stdout)\(dryPair.stderr)")
        #expect(try await CLI.run(["--db", db, "export", "Memo"]).lines == memos)
        let chain = directory.child("chain.json")
        try #"[{"name":"w1","steps":[{"add":"tag","default":"x"}]},{"name":"w2","steps":[{"rename":"tag","to":"label"}]}]"#
            .write(toFile: chain, atomically: true, encoding: .utf8)
        // The scratch copy of a dry run killed before it removed it goes with the next dry run,
        // not one of a process still running (found by a black-box probe: full copies stayed).
        let temporary = directory.child("tmp")
        let ended = Process()
        ended.executableURL = URL(fileURLWithPath: "/bin/true")
        try ended.run()
        ended.waitUntilExit()
        let left = temporary + "/satchel-dry-run-\(ended.processIdentifier)-left", running = temporary + "/satchel-dry-run-\(getpid())-running"
        for scratch in [left, running] { try FileManager.default.createDirectory(atPath: scratch + "/user", withIntermediateDirectories: true) }
        let dryChain = try await CLI.run(["--db", db, "migrate", "Memo", chain, "--dry-run"], environment: ["TMPDIR": temporary])
        #expect(!FileManager.default.fileExists(atPath: left) && FileManager.default.fileExists(atPath: running))
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary).count == 1, "its own copy is gone too")
        let afters = dryChain.lines.compactMap { try? JSONObject(parsing: $0) }.filter { $0["object"] == "m0" }.map { $0["after"] }
        #expect(dryChain.status == 0 && afters == [["name": "memo 0", "tag": "x"], ["name": "memo 0", "label": "x"]], "\(dryChain.stdout)")
        #expect(try await CLI.run(["--db", db, "export", "Memo"]).lines == memos, "nothing written")
        let half = try await CLI.run(["--db", db, "migrate", "Memo", pair])
        #expect(half.status == 1 && half.stderr.split(separator: "\n").count == 1, "\(half.stderr)")
        #expect(half.stderr.contains("migration 'v5'") && half.stderr.contains("'v4'") && half.stderr.contains("stay applied"), "\(half.stderr)")
        #expect(try await CLI.run(["--db", db, "find", "Memo", "--where", "flag=true", "--count"]).lines == ["3"])
        let malformed = directory.child("malformed.json")
        try #"{"name":"v4","steps":[{"rename":"a"}]}"#.write(toFile: malformed, atomically: true, encoding: .utf8)
        let wrong = try await CLI.run(["--db", db, "migrate", "Note", malformed])
        #expect(wrong.status == 1 && wrong.stderr.contains("step 1"), "\(wrong.stderr)")
        #expect(try await CLI.run(["--db", db, "migrate", "Nothing", file]).status == 1)
    }
}
