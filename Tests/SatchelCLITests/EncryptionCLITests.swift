import Foundation
import Satchel
import SatchelTestSupport
import Testing

/// `--key-file`, `SATCHEL_KEY_FILE`, `encrypt`, `decrypt` and `rekey`, as a user drives them.
@Suite("satchel encryption commands")
struct EncryptionCLITests {
    static let marker = "ZEBRA-MARKER-7391"

    /// Every file under `directory` whose bytes hold `text`.
    static func filesHolding(_ text: String, under directory: String) throws -> [String] {
        let walker = try #require(FileManager.default.enumerator(atPath: directory))
        var found: [String] = []
        while let name = walker.nextObject() as? String {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: directory + "/" + name, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            if try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name)).range(of: Data(text.utf8)) != nil { found.append(name) }
        }
        return found
    }

    /// Every file under `directory` with its bytes.
    static func snapshot(_ directory: String) throws -> [String: Data] {
        let walker = try #require(FileManager.default.enumerator(atPath: directory))
        var files: [String: Data] = [:]
        while let name = walker.nextObject() as? String {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: directory + "/" + name, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            files[name] = try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))
        }
        return files
    }

    static func writeKey(_ path: String) throws -> String {
        let hex = try EncryptionKey.random().hex
        try Data((hex + "\n").utf8).write(to: URL(fileURLWithPath: path))
        return hex
    }

    @Test("an encrypted store, synced and compacted, holds the marker in no file; without its key or with another, one line and nothing changed")
    func encryptedStore() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let keyFile = directory.child("store.key")
        let hex = try Self.writeKey(keyFile)
        let server = directory.child("server.json")
        func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> CLI.Result {
            try await CLI.run(["--db", db, "--key-file", keyFile] + arguments, environment: environment)
        }
        for i in 0..<300 {
            #expect(try await run(["put", "Item", #"{"object":"i\#(i)","label":"\#(Self.marker)-\#(i)"}"#]).status == 0)
        }
        #expect(try await run(["index", "Item", "label"]).status == 0)
        let sync = try await run(["sync", "--backend", "memory", "--url", server, "--user", Self.marker, "--password", "secret"])
        #expect(sync.status == 0, "\(sync.stderr)")
        #expect(try await run(["compact"]).status == 0)
        #expect(try await run(["check"]).status == 0)
        #expect(try Self.filesHolding(Self.marker, under: db) == [])
        let serverCopy = try Data(contentsOf: URL(fileURLWithPath: server))
        #expect(serverCopy.range(of: Data(Self.marker.utf8)) != nil, "the server's own copy holds it: the test can fail")

        // Reads with the key: as --key-file after the subcommand, and from SATCHEL_KEY_FILE.
        #expect(try await CLI.run(["--db", db, "find", "Item", "--count", "--key-file", keyFile]).lines == ["300"])
        #expect(try await CLI.run(["--db", db, "find", "Item", "--count"], environment: ["SATCHEL_KEY_FILE": keyFile]).lines == ["300"])
        #expect(try await run(["find", "Item", "--where", "label=\(Self.marker)-7", "--count"]).lines == ["1"])

        let before = try Self.snapshot(db)
        let otherKey = directory.child("other.key")
        _ = try Self.writeKey(otherKey)
        let badKey = directory.child("bad.key")
        try Data(String(hex.dropLast()).utf8).write(to: URL(fileURLWithPath: badKey))
        for (arguments, says) in [
            (["--db", db, "find", "Item", "--count"], "is encrypted"),
            (["--db", db, "--key-file", otherKey, "find", "Item", "--count"], "does not open"),
            (["--db", db, "--key-file", otherKey, "put", "Item", #"{"object":"x","a":1}"#], "does not open"),
            (["--db", db, "--key-file", badKey, "find", "Item", "--count"], "64 hexadecimal digits"),
            (["--db", db, "--key-file", directory.child("missing.key"), "stats"], "cannot read the key file"),
            (["--db", db, "--key-file", keyFile, "encrypt"], "already"),
        ] {
            let result = try await CLI.run(arguments)
            #expect(result.status == 1 && result.stdout.isEmpty, "\(arguments): \(result.status) \(result.stdout)")
            let lines = result.stderr.split(separator: "\n")
            #expect(lines.count == 1 && lines.first?.contains(says) == true, "\(arguments): \(result.stderr)")
            #expect(!result.stderr.contains(hex) && !result.stderr.contains(String(hex.dropLast())), "no key in the message")
        }
        #expect(try Self.snapshot(db) == before, "the refused commands changed nothing")
    }

    @Test(
        "an older key file put back after a rekey: the store is refused as another key's, not damaged, and repair changes nothing (a black-box probe: repair set every table aside)"
    )
    func replacedKeyFile() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let (old, new) = (directory.child("old.key"), directory.child("new.key"))
        _ = try Self.writeKey(old)
        _ = try Self.writeKey(new)
        for i in 0..<20 {
            #expect(try await CLI.run(["--db", db, "--key-file", old, "put", "Note", #"{"object":"n\#(i)","text":"t"}"#]).status == 0)
        }
        let keyFile = db + "/satchel.key"
        let before = try Data(contentsOf: URL(fileURLWithPath: keyFile))
        #expect(try await CLI.run(["--db", db, "rekey", "--key-file", old, "--new-key-file", new]).status == 0)
        let after = try Data(contentsOf: URL(fileURLWithPath: keyFile))
        try before.write(to: URL(fileURLWithPath: keyFile))
        let files = try FileManager.default.subpathsOfDirectory(atPath: db).sorted()

        for arguments in [["find", "Note", "--count"], ["repair"], ["check"]] {
            let refused = try await CLI.run(["--db", db, "--key-file", old] + arguments)
            #expect(refused.status == 1 && refused.stdout.isEmpty, "\(arguments): \(refused.stdout)")
            #expect(refused.stderr.split(separator: "\n").count == 1 && refused.stderr.contains("encrypted with another key"), "\(refused.stderr)")
        }
        #expect(try FileManager.default.subpathsOfDirectory(atPath: db).sorted() == files, "nothing set aside, nothing written")
        try after.write(to: URL(fileURLWithPath: keyFile))
        #expect(try await CLI.run(["--db", db, "--key-file", new, "find", "Note", "--count"]).lines == ["20"])
    }

    @Test("encrypt, rekey and decrypt a store in place: the same objects after each, the old key refused after rekey")
    func conversions() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        for i in 0..<50 { #expect(try await CLI.run(["--db", db, "put", "Note", #"{"object":"n\#(i)","text":"\#(Self.marker)"}"#]).status == 0) }
        let plain = try await CLI.run(["--db", db, "export", "Note"]).lines
        let first = directory.child("first.key")
        let second = directory.child("second.key")
        _ = try Self.writeKey(first)
        _ = try Self.writeKey(second)

        let missing = try await CLI.run(["--db", db, "encrypt"])
        #expect(missing.status != 0 && missing.stderr.contains("--key-file"), "\(missing.stderr)")
        let encrypted = try await CLI.run(["--db", db, "encrypt", "--key-file", first])
        #expect(encrypted.status == 0 && encrypted.lines == ["encrypted \(db)"], "\(encrypted.stderr)")
        #expect(try Self.filesHolding(Self.marker, under: db) == [])
        #expect(try await CLI.run(["--db", db, "--key-file", first, "export", "Note"]).lines == plain)

        let rekeyed = try await CLI.run(["--db", db, "rekey", "--key-file", first, "--new-key-file", second])
        #expect(rekeyed.status == 0, "\(rekeyed.stderr)")
        #expect(try await CLI.run(["--db", db, "--key-file", first, "export", "Note"]).status == 1)
        #expect(try await CLI.run(["--db", db, "--key-file", second, "export", "Note"]).lines == plain)
        #expect(try await CLI.run(["--db", db, "rekey", "--key-file", second, "--new-key-file", first, "--key-only"]).status == 0)
        #expect(try await CLI.run(["--db", db, "--key-file", first, "check"]).status == 0)

        let decrypted = try await CLI.run(["--db", db, "decrypt", "--key-file", first])
        #expect(decrypted.status == 0, "\(decrypted.stderr)")
        #expect(try await CLI.run(["--db", db, "export", "Note"]).lines == plain)
        #expect(!(try Self.filesHolding(Self.marker, under: db).isEmpty))
    }

    @Test(
        "demo --key-file makes an encrypted store; restore needs the key that opens both the store and the backup; a key file with a byte order mark is refused (found by a black-box probe)"
    )
    func keyEverywhere() async throws {
        let directory = TemporaryDirectory()
        let key = directory.child("k.key")
        let other = directory.child("other.key")
        _ = try Self.writeKey(key)
        _ = try Self.writeKey(other)

        // The demo, with a key: encrypted, its fixtures in no file.
        let demo = directory.child("demo")
        let ran = try await CLI.run(["demo", "--db", demo, "--key-file", key, "--fixtures", Fixtures.directory.path])
        #expect(ran.status == 0, "\(ran.stderr)")
        #expect(FileManager.default.fileExists(atPath: demo + "/satchel.key"))
        #expect(try Self.filesHolding("Tyrell", under: demo) == [])
        #expect(try await CLI.run(["--db", demo, "--key-file", key, "find", "Customer", "--count"]).status == 0)
        #expect(try await CLI.run(["--db", demo, "find", "Customer", "--count"]).status == 1)

        // restore: an encrypted store with a plain backup, a backup under another key, no key.
        let store = directory.child("store")
        let plainBackup = directory.child("plain-backup")
        let otherBackup = directory.child("other-backup")
        #expect(try await CLI.run(["--db", directory.child("plain"), "put", "Note", #"{"object":"p","text":"plain"}"#]).status == 0)
        #expect(try await CLI.run(["--db", directory.child("plain"), "backup", plainBackup]).status == 0)
        #expect(try await CLI.run(["--db", directory.child("o"), "--key-file", other, "put", "Note", #"{"object":"o","text":"other"}"#]).status == 0)
        #expect(try await CLI.run(["--db", directory.child("o"), "--key-file", other, "backup", otherBackup]).status == 0)
        #expect(try await CLI.run(["--db", store, "--key-file", key, "put", "Note", #"{"object":"s","text":"mine"}"#]).status == 0)
        let before = try Self.snapshot(store)
        for (arguments, says) in [
            (["restore", plainBackup], "the store at"),
            (["--key-file", key, "restore", plainBackup], "the backup at \(plainBackup) is not encrypted"),
            (["--key-file", key, "restore", otherBackup], "does not open"),
            (["--key-file", other, "restore", otherBackup], "does not open the store at"),
        ] {
            let result = try await CLI.run(["--db", store] + arguments)
            #expect(result.status == 1 && result.stderr.contains(says) && !result.stderr.contains(".restoring"), "\(arguments): \(result.stderr)")
            #expect(result.stderr.split(separator: "\n").count == 1)
        }
        #expect(try Self.snapshot(store) == before, "the store is as it was")
        #expect(try await CLI.run(["--db", store, "--key-file", key, "find", "Note", "--id", "s"]).status == 0)

        // A key file that starts with a byte order mark holds more than 64 digits and a newline.
        let bom = directory.child("bom.key")
        try Data([0xEF, 0xBB, 0xBF] + Array(try String(contentsOfFile: key, encoding: .utf8).utf8)).write(to: URL(fileURLWithPath: bom))
        let refused = try await CLI.run(["--db", store, "--key-file", bom, "find", "Note", "--count"])
        #expect(refused.status != 0 && refused.stderr.contains("64 hexadecimal digits"), "\(refused.stderr)")
    }
}
