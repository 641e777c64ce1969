import Foundation
import Satchel
import SatchelTestSupport
import Testing

/// Commands that fail leave no trace, checked on disk: no directory, no partition, no model.
@Suite("satchel commands that fail leave no trace")
struct NoTraceCLITests {
    /// The models `stats --json` lists.
    static func models(_ db: String) async throws -> [String] {
        let result = try await CLI.run(["--db", db, "stats", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        return try result.lines.map { try JSONObject(parsing: $0)["model"]?.stringValue ?? "" }
    }

    @Test(
        "a command on a directory that is not a store: one line, exit 1, nothing created in it",
        arguments: [
            ["find", "Item", "--count"], ["stats"], ["check"], ["export", "Item"], ["index", "Item", "--list"], ["put", "Item", #"{"a":1}"#],
            ["import", "Item", "ITEMS"], ["compact"], ["errors"],
        ])
    func otherDirectory(_ arguments: [String]) async throws {
        let directory = TemporaryDirectory()
        let other = directory.child("x")
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        try "hi".write(toFile: other + "/notes.txt", atomically: true, encoding: .utf8)
        let items = directory.child("items.json")
        try #"[{"a":1}]"#.write(toFile: items, atomically: true, encoding: .utf8)
        let result = try await CLI.run(["--db", other] + arguments.map { $0 == "ITEMS" ? items : $0 })
        #expect(result.status == 1 && result.stdout.isEmpty, "\(arguments): \(result.stdout)")
        #expect(result.stderr.split(separator: "\n").count == 1 && result.stderr.contains("not a Satchel store"), "\(result.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: other) == ["notes.txt"])
    }

    @Test(
        "a directory whose user directory holds other files is not a store: one line, exit 1, nothing written into it (a black-box probe: put made a database beside them)",
        arguments: [["find", "Item", "--count"], ["stats"], ["put", "Item", #"{"a":1}"#], ["check"]])
    func otherUserDirectory(_ arguments: [String]) async throws {
        let directory = TemporaryDirectory()
        let other = directory.child("x")
        try FileManager.default.createDirectory(atPath: other + "/user", withIntermediateDirectories: true)
        try "hi".write(toFile: other + "/user/junk", atomically: true, encoding: .utf8)
        let result = try await CLI.run(["--db", other] + arguments)
        #expect(result.status == 1 && result.stdout.isEmpty, "\(arguments): \(result.stdout)")
        #expect(result.stderr.split(separator: "\n").count == 1 && result.stderr.contains("not a Satchel store"), "\(result.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: other + "/user") == ["junk"])
    }

    @Test("a store whose making was killed before its first database file is no store yet: reads say so, a write makes it (a probe)")
    func unfinishedStore() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        try FileManager.default.createDirectory(atPath: db + "/user", withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: db + "/user/LOCK", contents: Data()))
        #expect(FileManager.default.createFile(atPath: db + "/user/MANIFEST-000001", contents: Data()))
        for arguments in [["find", "Item", "--count"], ["stats"], ["export", "Item"]] {
            let result = try await CLI.run(["--db", db] + arguments)
            #expect(result.status == 1 && result.stdout.isEmpty, "\(arguments): \(result.stdout)")
            #expect(result.stderr.split(separator: "\n").count == 1 && result.stderr.contains("no store at"), "\(result.stderr)")
        }
        #expect(try await CLI.run(["--db", db, "put", "Item", #"{"a":1}"#]).status == 0)
        #expect(try await CLI.run(["--db", db, "find", "Item", "--count"]).lines == ["1"])
    }

    @Test("a failed import into a new path leaves no directory; into an existing store, no new model")
    func failedImport() async throws {
        let directory = TemporaryDirectory()
        let bad = directory.child("bad.json")
        try #"[{"a":1},{"a":"#.write(toFile: bad, atomically: true, encoding: .utf8)
        let nested = directory.child("new/deeper/db")
        let result = try await CLI.run(["--db", nested, "import", "Thing", bad])
        #expect(result.status == 1 && result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.child("new")), "the directories the import made are gone")
        let graph = try await CLI.run(["--db", nested, "import", "Thing", bad, "--graph"])
        #expect(graph.status == 1 && !FileManager.default.fileExists(atPath: directory.child("new")))

        let db = directory.child("db")
        #expect(try await CLI.run(["--db", db, "put", "Item", #"{"object":"i1","a":1}"#]).status == 0)
        #expect(try await CLI.run(["--db", db, "put", "Kept", #"{"object":"k","a":1}"#]).status == 0)
        #expect(try await CLI.run(["--db", db, "delete", "Kept", "k"]).status == 0)
        #expect(try await CLI.run(["--db", db, "import", "Thing", bad]).status == 1)
        #expect(try await Self.models(db) == ["Item", "Kept"], "no model 'Thing'; the empty model that was there stays")
    }

    @Test("an empty directory given to a failed import stays empty")
    func emptyDirectory() async throws {
        let directory = TemporaryDirectory()
        let bad = directory.child("bad.json")
        try "not json".write(toFile: bad, atomically: true, encoding: .utf8)
        let db = directory.child("db")
        try FileManager.default.createDirectory(atPath: db, withIntermediateDirectories: true)
        #expect(try await CLI.run(["--db", db, "import", "Thing", bad]).status == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: db).isEmpty)
    }

    @Test("a sync that cannot reach its server leaves no new store, and no new model in an existing one")
    func unreachableServer() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let sync = ["sync", "--backend", "rhoconnect", "--url", "http://127.0.0.1:1", "--user", "u", "--password-stdin", "--model", "Fresh"]
        let result = try await CLI.run(["--db", db] + sync, input: "p\n")
        #expect(result.status != 0 && result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: db))

        #expect(try await CLI.run(["--db", db, "put", "Item", #"{"object":"i1","a":1}"#]).status == 0)
        #expect(try await CLI.run(["--db", db] + sync, input: "p\n").status != 0)
        #expect(try await Self.models(db) == ["Item"])
    }

    @Test(
        "put of only nulls deletes an object that existed; with no such object it is refused, with or without an id, and names no model and makes no store (a black-box probe: exit 0 and a new empty store with an id, exit 1 without)"
    )
    func putOfNulls() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        for json in [#"{"object":"i1","a":null}"#, #"{"object":"i1"}"#, #"{"a":null}"#, "{}"] {
            let fresh = try await CLI.run(["--db", db, "put", "Item", json])
            #expect(fresh.status == 1 && fresh.stdout.isEmpty && fresh.stderr.contains("at least one non-null attribute"), "\(json): \(fresh.stderr)")
            #expect(!FileManager.default.fileExists(atPath: db), "\(json) made a store")
        }
        #expect(try await CLI.run(["--db", db, "put", "Other", #"{"object":"o1","a":1}"#]).status == 0)
        let named = try await CLI.run(["--db", db, "put", "Item", #"{"object":"i1","a":null}"#])
        #expect(named.status == 1 && named.stderr.contains("no object 'i1' in Item"), "\(named.stderr)")
        #expect(try await Self.models(db) == ["Other"])
        #expect(try await CLI.run(["--db", db, "put", "Item", #"{"object":"i2","a":1}"#]).status == 0)
        let removed = try await CLI.run(["--db", db, "put", "Item", #"{"object":"i2","a":null}"#])
        #expect(removed.status == 0 && removed.stderr.contains("deleted"), "\(removed.stderr)")
        #expect(try await CLI.run(["--db", db, "find", "Item", "--count"]).lines == ["0"])
    }

    @Test("index --keys-only on an array-element index is refused in one line, building nothing")
    func keysOnlyElements() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        #expect(try await CLI.run(["--db", db, "put", "Item", #"{"object":"i1","tags":["a"]}"#]).status == 0)
        for arguments in [["tags[]", "--keys-only"], ["tags", "--elements", "--keys-only"]] {
            let result = try await CLI.run(["--db", db, "index", "Item"] + arguments)
            // A usage error (64), as the options' other clashes.
            #expect(result.status == 64 && result.stderr.contains("keys only"), "\(result.stderr)")
        }
        #expect(try await CLI.run(["--db", db, "index", "Item", "--list"]).lines.isEmpty)
    }
}
