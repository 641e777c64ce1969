import Foundation
import SatchelTestSupport
import Testing

@testable import Satchel

/// The entries a clean close keeps in its record for the next open (the format marker and the
/// catalog), read from the files: what the record holds, that an open is served by it only while
/// the files are as the close left them, and only until the first write.
@Suite("A clean close's record keeps what the next open reads")
struct RememberedEntriesTests {
    static let kept: [UInt8] = [0x01, 0x30] + Array("kept".utf8) + [0x00, 0x01]
    static let other: [UInt8] = [0x01, 0x30] + Array("other".utf8) + [0x00, 0x01]

    static func options() -> LevelDBOptions {
        var options = LevelDBOptions()
        options.rememberedPrefixes = [kept]
        return options
    }

    /// Lowercase hex, written independently of the code under test.
    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    /// A database at `directory/db` holding `pairs`, closed cleanly: its path.
    static func closedDatabase(in directory: TemporaryDirectory, _ pairs: [([UInt8], String)]) throws -> String {
        let path = directory.child("db")
        let db = try LevelDB(path: path, options: options())
        try put(db, pairs)
        try db.close()
        return path
    }

    static func put(_ db: LevelDB, _ pairs: [([UInt8], String)]) throws {
        var batch = LevelDBWriteBatch()
        for (key, value) in pairs { batch.put(key, Array(value.utf8)) }
        try db.write(batch, sync: false)
    }

    /// Rewrites the record in `directory` with `transform` applied to its text, its sum made
    /// right again: a record as a close would have written it.
    static func rewriteRecord(in directory: String, _ transform: (String) -> String) throws {
        let path = directory + "/" + CleanCloseRecord.fileName
        let text = transform(try String(contentsOfFile: path, encoding: .utf8))
        let sumStart = try #require(text.range(of: "\nsum ")).lowerBound
        let hashed = String(text[...sumStart])
        let rest = text[text.index(after: sumStart)...].split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)[1]
        try (hashed + "sum \(CleanCloseRecord.hexHash(hashed.utf8))\n" + rest).write(toFile: path, atomically: false, encoding: .utf8)
    }

    @Test("the record keeps every entry under the kept prefixes, in hex, and the next open reads them from it until its first write")
    func servedUntilWrite() throws {
        let directory = TemporaryDirectory()
        let path = try Self.closedDatabase(in: directory, [(Self.kept + [0x41], "one"), (Self.kept + [0x42], "two"), (Self.other, "elsewhere")])
        let remembered = try #require(CleanCloseRecord.matching(path)).remembered
        #expect(remembered.prefixes == [Self.kept])
        #expect(remembered.entries.map(\.key) == [Self.kept + [0x41], Self.kept + [0x42]])
        #expect(remembered.entries.map { String(decoding: $0.value, as: UTF8.self) } == ["one", "two"])
        let record = try String(contentsOfFile: path + "/" + CleanCloseRecord.fileName, encoding: .utf8)
        #expect(record.contains("= \(Self.hex(Self.kept + [0x41])) \(Self.hex(Array("one".utf8)))\n"))
        #expect(!record.contains(Self.hex(Array("elsewhere".utf8))))

        // A record that says otherwise than the tables (made by hand here, its sum right): the
        // open believes it, which shows where the entries come from.
        try Self.rewriteRecord(in: path) {
            $0.replacingOccurrences(of: Self.hex(Array("one".utf8)), with: Self.hex(Array("uno".utf8)))
        }
        let db = try LevelDB(path: path, options: Self.options())
        defer { try? db.close() }
        #expect(try db.entries(withPrefix: Self.kept).map { String(decoding: $0.value, as: UTF8.self) } == ["uno", "two"])
        #expect(try db.entries(withPrefix: Self.kept + [0x42]).map { String(decoding: $0.value, as: UTF8.self) } == ["two"])
        // A prefix the record does not keep is read from LevelDB.
        #expect(try db.entries(withPrefix: Self.other).map { String(decoding: $0.value, as: UTF8.self) } == ["elsewhere"])
        // After a write, everything is LevelDB's.
        try Self.put(db, [(Self.kept + [0x43], "three")])
        #expect(try db.entries(withPrefix: Self.kept).map { String(decoding: $0.value, as: UTF8.self) } == ["one", "two", "three"])
    }

    @Test("a damaged record keeps nothing and matches nothing: a flipped digit, a line out of order, a prefix it did not keep, an entry past the sum")
    func damagedRecord() throws {
        let directory = TemporaryDirectory()
        let path = try Self.closedDatabase(in: directory, [(Self.kept + [0x41], "one"), (Self.kept + [0x42], "two")])
        let recordPath = path + "/" + CleanCloseRecord.fileName
        let good = try String(contentsOfFile: recordPath, encoding: .utf8)
        #expect(CleanCloseRecord.matches(path))
        let one = Self.hex(Array("one".utf8))
        // A digit changed, the sum left as it was.
        try good.replacingOccurrences(of: one, with: Self.hex(Array("onf".utf8))).write(
            toFile: recordPath, atomically: false, encoding: .utf8)
        #expect(!CleanCloseRecord.matches(path))
        // Well summed but malformed: entries out of key order, an entry under a prefix not kept,
        // uppercase hex, an odd number of digits.
        let lines = good.split(separator: "\n").map(String.init)
        let first = try #require(lines.firstIndex { $0.hasPrefix("= ") })
        let malformed: [(String) -> String] = [
            { _ in (lines[..<first] + [lines[first + 1], lines[first]] + lines[(first + 2)...]).joined(separator: "\n") + "\n" },
            { $0.replacingOccurrences(of: "= \(Self.hex(Self.kept))", with: "= \(Self.hex(Self.other))") },
            { $0.replacingOccurrences(of: one, with: one.uppercased()) },
            { $0.replacingOccurrences(of: one, with: one + "0") },
        ]
        for (n, transform) in malformed.enumerated() {
            try good.write(toFile: recordPath, atomically: false, encoding: .utf8)
            try Self.rewriteRecord(in: path, transform)
            #expect(!CleanCloseRecord.matches(path), "malformed record \(n)")
        }
        // An entry after the sum line is no file line.
        try good.write(toFile: recordPath, atomically: false, encoding: .utf8)
        #expect(CleanCloseRecord.matches(path))
        let withEntryAfterSum = good.replacingOccurrences(of: "\n000", with: "\n= 0130 00\n000")
        try withEntryAfterSum.write(toFile: recordPath, atomically: false, encoding: .utf8)
        #expect(!CleanCloseRecord.matches(path))
        // The open on a record that matches nothing reads LevelDB, and writes new files.
        try Self.rewriteRecord(in: path) { $0.replacingOccurrences(of: one, with: one.uppercased()) }
        let db = try LevelDB(path: path, options: Self.options())
        defer { try? db.close() }
        #expect(try db.entries(withPrefix: Self.kept).map { String(decoding: $0.value, as: UTF8.self) } == ["one", "two"])
    }

    @Test("more than the record keeps: no entries kept, the files still reused, every entry read from LevelDB")
    func pastTheLimit() throws {
        let directory = TemporaryDirectory()
        let large = String(repeating: "x", count: CleanCloseRecord.rememberedLimit / 4)
        let path = try Self.closedDatabase(in: directory, (0..<5).map { (Self.kept + [UInt8(0x41 + $0)], large) })
        let remembered = try #require(CleanCloseRecord.matching(path)).remembered
        #expect(remembered == RememberedEntries())
        let db = try LevelDB(path: path, options: Self.options())
        defer { try? db.close() }
        #expect(try db.entries(withPrefix: Self.kept).count == 5)
    }

    /// The catalog as the app sees it: every model's definition, indexes and statistics.
    static func catalog(_ store: Store) throws -> [String] {
        try store.models.sorted { $0.name < $1.name }.map { definition in
            let model = try store.model(definition.name)
            // LevelDB's estimate of the model's bytes on disk changes as the close writes the
            // log into a table: not part of the catalog.
            var statistics = try model.statistics()
            statistics.approximateBytes = 0
            return "\(definition) \(try model.indexes.sorted { "\($0)" < "\($1)" }) \(statistics)"
        }
    }

    @Test("across runs that change the catalog (models in three partitions, indexes made and dropped), each open finds it as the close left it")
    func catalogAcrossRuns() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        var expected: [String] = []
        for run in 0..<5 {
            let store = try Store(path: path)
            if run > 0 {
                let found = try Self.catalog(store)
                #expect(found == expected, "run \(run): \(zip(found, expected).filter { $0 != $1 })")
                // The catalog came from the record: each partition's record keeps it.
                for partition in ["user", "app", "local"] {
                    let remembered = try #require(CleanCloseRecord.matching(path + "/" + partition)?.remembered, "run \(run) \(partition)")
                    #expect(remembered.entries.contains { $0.key == Keys.format }, "run \(run) \(partition)")
                }
            }
            let product = try store.model("Product")
            switch run {
            case 0:
                _ = try store.register(ModelDefinition(name: "Setting", partition: .local))
                _ = try store.register(ModelDefinition(name: "Shared", partition: .app))
                _ = try store.model("Setting").create(["theme": "dark"])
                _ = try store.model("Shared").create(["motd": "hi"])
                try product.createIndex(IndexDefinition(["brand"]))
            case 1: try product.createIndex(IndexDefinition(["price"]))
            case 2: #expect(try product.dropIndex(IndexDefinition(["brand"])))
            default: break
            }
            try store.bulkUpdate { tx in
                for i in 0..<20 { _ = try tx.create(["brand": .string("B\(i % 3)"), "price": .int(Int64(i))], in: product) }
            }
            expected = try Self.catalog(store)
            try store.close()
        }
        let store = try Store(path: path)
        defer { try? store.close() }
        #expect(try Self.catalog(store) == expected)
        #expect(try store.model("Product").count(where: "price" >= .int(10)) == 50)
        #expect(try store.verify().isHealthy)
    }

    @Test("a session killed after it changed the catalog: the next open finds the change, not the record's catalog")
    func killedAfterCatalogChange() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        do {
            let store = try Store(path: path)
            _ = try store.model("Product").create(["brand": "B1"])
            try store.close()
        }
        #expect(CleanCloseRecord.matches(path + "/user"))
        let store = try Store(path: path)
        try store.model("Product").createIndex(IndexDefinition(["brand"]))
        _ = try store.model("Order").create(["total": 3])
        // The files as a kill leaves them: copied while the store is open.
        let copy = directory.child("copy")
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        try FileManager.default.removeItem(atPath: copy + "/user/LOCK")
        try store.close()
        #expect(!CleanCloseRecord.matches(copy + "/user"))
        let reopened = try Store(path: copy)
        defer { try? reopened.close() }
        #expect(reopened.models.map(\.name).sorted() == ["Order", "Product"])
        #expect(try reopened.model("Product").indexes.count == 1)
        #expect(try reopened.model("Order").count() == 1)
    }
}
