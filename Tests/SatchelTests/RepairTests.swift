import Foundation
import SatchelTestSupport
import Testing

@testable import Satchel

/// `Store.repair` on exactly the records a damaged first block takes: the format marker, model
/// and index definitions (the smallest keys of a partition).
@Suite("Store.repair salvages what damage took from the store's own records")
struct RepairTests {
    /// Deletes `keys` from partition `partition` of the closed store at `path`, underneath Satchel.
    static func erase(_ keys: [[UInt8]], partition: Partition, path: String) throws {
        var options = LevelDBOptions()
        options.createIfMissing = false
        let db = try LevelDB(path: path + "/" + partition.rawValue, options: options)
        defer { try? db.close() }
        var batch = LevelDBWriteBatch()
        for key in keys { batch.delete(key) }
        try db.write(batch, sync: true)
    }

    /// Every file under `path` with its size, and every directory.
    static func listing(_ path: String) -> [String: Int] {
        var files: [String: Int] = [:]
        let enumerator = FileManager.default.enumerator(atPath: path)
        while let name = enumerator?.nextObject() as? String {
            files[name] = (try? FileManager.default.attributesOfItem(atPath: path + "/" + name)[.size] as? Int) ?? -1
        }
        return files
    }

    @Test("a store open elsewhere is refused before any file is touched, and keeps every write (found by a black-box probe)")
    func openStoreRefused() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        let store = try Store(path: path)
        let model = try store.model("Note")
        for i in 0..<200 { _ = try model.create(["n": .int(Int64(i))]) }
        let before = Self.listing(path)
        let error = #expect(throws: SatchelError.self) { _ = try Store.repair(path: path) }
        #expect(error?.code == .locked, "\(String(describing: error))")
        #expect(Self.listing(path) == before, "nothing moved, renamed or rewritten")
        for i in 200..<210 { _ = try model.create(["n": .int(Int64(i))]) }
        try store.close()
        let reopened = try Store(path: path)
        #expect(try reopened.model("Note").count() == 210)
        try reopened.close()
    }

    @Test("a lost marker and model definition: the marker is written again, the model registered again in its partition, its objects kept")
    func lostDefinition() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        var notes: [Object] = []
        do {
            let store = try Store(path: path)
            let model = try store.register(ModelDefinition(name: "Note", partition: .app))
            try model.createIndex(IndexDefinition(["topic"]))
            _ = try store.model("Other").create(["a": 1])
            for i in 0..<50 { notes.append(try model.create(["topic": .string("t\(i % 5)"), "n": .int(Int64(i))])) }
            try store.close()
        }
        try Self.erase([Keys.format, Keys.modelDefinition("Note")], partition: .app, path: path)
        expectError(.corruption) { _ = try Store(path: path) }

        let report = try Store.repair(path: path)
        #expect(report.isHealthy, "\(report.verification.problems)")
        #expect(report.markersRewritten == [.app])
        #expect(report.modelsRecreated == ["Note"])
        #expect(report.indexesLost.isEmpty && report.indexesRebuilt == 1)
        let store = try Store(path: path)
        defer { try? store.close() }
        let definition = try #require(store.models.first { $0.name == "Note" })
        #expect(definition.partition == .app && definition.kind == .propertyBag)
        let model = try store.model("Note")
        #expect(Set(try model.findAll()) == Set(notes))
        // The index answers as a scan does.
        #expect(try model.explain(Query(where: ["topic": "t3"])).access == .index(IndexDefinition(["topic"])))
        #expect(Set(try model.findAll(where: ["topic": "t3"])) == Set(notes.filter { $0["topic"] == "t3" }))
        #expect(try store.model("Other").count() == 1)
    }

    @Test(
        "objects the damage took: check names their pending changes; repair says how many each model lost, drops those changes, and has a synced model pull its whole collection (found by a black-box probe)"
    )
    func lostObjects() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        do {
            let store = try Store(path: path)
            let products = try store.model("Product")
            for i in 0..<20 { _ = try products.put(["object": .string("p\(i)"), "n": .int(Int64(i))]) }
            try store.bulkUpdate { tx in
                var state = try tx.syncState(products)
                state.cursor = "c1"
                try tx.setSyncState(products, state)
            }
            let notes = try store.register(ModelDefinition(name: "Note", syncType: .none))
            for i in 0..<4 { _ = try notes.put(["object": .string("n\(i)"), "text": "x"]) }
            try store.close()
        }
        try Self.erase((0..<5).map { Keys.object("Product", "p\($0)") } + [Keys.object("Note", "n0")], partition: .user, path: path)
        do {
            let store = try Store(path: path)
            let problems = try store.verify().problems
            try store.close()
            #expect(problems.contains { $0.contains("a pending create of 'p0', whose object is gone") }, "\(problems)")
        }

        let report = try Store.repair(path: path)
        #expect(report.isHealthy, "\(report.verification.problems)")
        #expect(report.objectsLost.map { "\($0.model) \($0.counted) \($0.salvaged)" } == ["Note 4 3", "Product 20 15"])
        #expect(report.changesDropped.map { "\($0.model) \($0.objectID) \($0.kind)" }.sorted() == (0..<5).map { "Product p\($0) create" })
        #expect(report.fullPullsScheduled == ["Product"], "Note does not sync")
        let store = try Store(path: path)
        defer { try? store.close() }
        #expect(try store.model("Product").pendingChanges().count == 15)
        #expect(try store.read { try $0.syncState(store.model("Product")) }.fullPullPending)
        #expect(try store.verify().isHealthy)
    }

    @Test(
        "a repair names only tables the store had: the output of a compaction its own open ran, which the damage stopped, is no loss (found by a black-box probe: it was named lost)"
    )
    func ownCompactionNotNamed() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        func session(_ n: Int, close: Bool = true) throws -> Store {
            let store = try Store(path: path)
            let items = try store.model("Item")
            try store.bulkUpdate { tx in for i in 0..<200 { _ = try tx.put(["object": .string("i\(i)"), "n": .int(Int64(n))], in: items) } }
            if close { try store.close() }
            return store
        }
        // Sessions over the same keys: tables at levels 2 and 1, then three at level 0; the
        // sixth leaves its writes in the log (a close makes no fourth table at level 0), which the
        // next open turns into one, and then compacts level 0, meeting the damage.
        for n in 0..<6 { _ = try session(n) }
        let tables = StoreDamage.files(path, suffix: ".ldb")
        let damaged = try #require(tables.last)
        try StoreDamage.flip(damaged, at: 40, count: 8)
        let before = Set(tables.map { ($0 as NSString).lastPathComponent })
        let report = try Store.repair(path: path)
        #expect(report.filesSetAside.map(\.file) == [(damaged as NSString).lastPathComponent], "\(report.filesSetAside) of \(before.sorted())")
        #expect(report.isHealthy)
        // What is left is what was written (an older version where the damaged block held the
        // newer one), never the damaged bytes as data (a compaction during the repair's reads
        // wrote them into a table as such, and the damage went unreported).
        let store = try Store(path: path)
        defer { try? store.close() }
        let items = try store.model("Item").findAll()
        #expect(items.count == 200 && items.allSatisfy { $0.attributes.count == 1 && (0..<6).contains($0["n"]?.intValue ?? -1) })
    }

    /// Makes the store at `path` with `objects` items (`n` -1, 100 bytes of padding) in one
    /// batch, and `index` over them.
    static func fill(_ path: String, _ configuration: Store.Configuration, objects: Int, index: IndexDefinition? = nil) throws {
        let store = try Store(path: path, configuration: configuration)
        let items = try store.model("Item")
        try store.bulkUpdate { tx in
            for i in 0..<objects {
                _ = try tx.put(["object": .string("i\(i)"), "n": .int(-1), "pad": .string(String(repeating: "x", count: 100))], in: items)
            }
        }
        if let index { try items.createIndex(index) }
        try store.close()
    }

    @Test(
        "a table a close stopped half-written (the output of a compaction it cut short) is not left behind: a repair after a damaged MANIFEST names no table lost (found by a black-box probe: it named one)",
        arguments: [true, false])
    func closeLeavesNoHalfTable(encrypted: Bool) throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        var configuration = Store.Configuration()
        if encrypted { configuration.encryptionKey = try EncryptionKey.random() }
        try Self.fill(path, configuration, objects: 4000)
        // Sessions of one write each, as the CLI's: an open turns the log into a table at level
        // 0, and from the fourth one starts a compaction, which the close soon after cuts short.
        for n in 0..<8 {
            let store = try Store(path: path, configuration: configuration)
            _ = try store.model("Item").put(["object": .string("i\(n)"), "n": .int(Int64(n))])
            try store.close()
            if !encrypted {
                // A finished table ends with LevelDB's table magic number; a half-written one does not.
                for table in StoreDamage.files(path, suffix: ".ldb") {
                    let bytes = try Data(contentsOf: URL(fileURLWithPath: table))
                    #expect(bytes.suffix(8) == Data([0x57, 0xfb, 0x80, 0x8b, 0x24, 0x75, 0x47, 0xdb]), "session \(n): \(table)")
                }
            }
            // A copy damaged before any open (an open removes what no version names).
            let copy = directory.child("copy-\(n)")
            try FileManager.default.copyItem(atPath: path, toPath: copy)
            let manifest = try #require(StoreDamage.files(copy, suffix: "MANIFEST-").first)
            try StoreDamage.flip(manifest, at: 30, count: 1)
            let report = try Store.repair(path: copy, configuration: configuration)
            #expect(report.filesSetAside.isEmpty, "session \(n): \(report.filesSetAside)")
        }
        let store = try Store(path: path, configuration: configuration)
        defer { try? store.close() }
        #expect(try store.model("Item").count() == 4000)
    }

    @Test(
        "short sessions, one write each, do not pile tables up at level 0: a close lets the compaction its open started finish (found by black-box probes: 250 tables on an encrypted store, 129 on a plain one with an index)",
        arguments: [true, false])
    func shortSessionsDoNotPileUp(encrypted: Bool) throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        var configuration = Store.Configuration()
        if encrypted { configuration.encryptionKey = try EncryptionKey.random() }
        // Enough that a compaction takes longer than a session of one write.
        try Self.fill(path, configuration, objects: 20_000, index: IndexDefinition("n"))
        var most = 0
        for n in 0..<16 {
            let store = try Store(path: path, configuration: configuration)
            _ = try store.model("Item").put(["object": .string("i\(n % 3)"), "n": .int(Int64(n))])
            try store.close()
            most = max(most, StoreDamage.files(path, suffix: ".ldb").count)
        }
        // An open makes a table of the last session's log; the fourth at level 0 starts a
        // compaction, which the close waits for.
        #expect(most <= LevelDB.level0CompactionTrigger + 1, "\(most) tables")
        let store = try Store(path: path, configuration: configuration)
        defer { try? store.close() }
        #expect(try ["i0", "i1", "i2"].map { try store.model("Item").find($0)?["n"] } == [15, 13, 14])
    }

    @Test(
        "a repair keeping its findings reports them again until they are forgotten, as the CLI does once its report is written (a black-box probe: a repair killed before its report was out, run again, said ok)"
    )
    func findingsKeptUntilForgotten() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        for n in 0..<3 {
            let store = try Store(path: path)
            let items = try store.model("Item")
            try store.bulkUpdate { tx in for i in 0..<200 { _ = try tx.put(["object": .string("i\(i)"), "n": .int(Int64(n))], in: items) } }
            try store.close()
        }
        let damaged = try #require(StoreDamage.files(path, suffix: ".ldb").last)
        try StoreDamage.flip(damaged, at: 40, count: 8)
        let name = (damaged as NSString).lastPathComponent
        let first = try Store.repair(path: path, keepingFindings: true)
        #expect(first.filesSetAside.map(\.file) == [name])
        let again = try Store.repair(path: path, keepingFindings: true)
        #expect(again.filesSetAside.map(\.file) == [name], "reported again: the first report may never have been seen")
        Store.forgetRepairFindings(path: path)
        let after = try Store.repair(path: path)
        #expect(after.filesSetAside.isEmpty && after.isHealthy)
    }

    @Test(
        "objects of a model never synced whose pending creates the damage took get them again, to be pushed; a synced model's are left alone (found by a black-box probe: they never reached the server, and a full sync deleted them)"
    )
    func lostCreatesRestored() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        do {
            let store = try Store(path: path)
            for name in ["Draft", "Synced"] {
                let model = try store.model(name)
                for i in 0..<10 { _ = try model.create(["object": .string("o\(i)"), "n": .int(Int64(i))]) }
            }
            // `Synced` pulled before: an object of it with no record may be the server's.
            try store.bulkUpdate { tx in
                var state = ModelSyncState()
                state.initialSyncComplete = true
                try tx.setSyncState(try store.model("Synced"), state)
            }
            try store.close()
        }
        try Self.erase(
            ["o3", "o7"].flatMap { [Keys.change("Draft", $0), Keys.change("Synced", $0)] }, partition: .user, path: path)
        let report = try Store.repair(path: path)
        #expect(report.createsRestored.map(\.model) == ["Draft", "Draft"] && report.createsRestored.map(\.objectID) == ["o3", "o7"])
        #expect(report.isHealthy)
        // Those of `Synced` are named lost, by number (a black-box probe: repair said nothing).
        #expect(report.changesLost.map(\.model) == ["Synced"] && report.changesLost.map(\.counted) == [10] && report.changesLost.map(\.lost) == [2])
        let store = try Store(path: path)
        defer { try? store.close() }
        #expect(try store.model("Draft").pendingChanges().filter { $0.kind == .create }.count == 10)
        #expect(try store.model("Synced").pendingChanges().count == 8)
    }

    @Test(
        "pending updates and deletes whose records the damage took are named lost by number, and a model whose statistics went is named (found by a black-box probe: repair and check said ok)"
    )
    func lostChangesNamed() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        do {
            let store = try Store(path: path)
            for name in ["Order", "Item"] {
                let model = try store.model(name)
                try store.bulkUpdate { tx in
                    for i in 0..<10 { try tx.writeServerObject(model, "o\(i)", ["n": .int(Int64(i))], version: .string("v1")) }
                    var state = ModelSyncState()
                    state.initialSyncComplete = true
                    try tx.setSyncState(model, state)
                }
                for i in 0..<4 { _ = try model.update("o\(i)", with: ["n": 100]) }
                for i in 4..<7 { try model.delete("o\(i)") }
            }
            try store.close()
        }
        try Self.erase([Keys.change("Order", "o1"), Keys.change("Order", "o5"), Keys.modelStatistics("Item")], partition: .user, path: path)
        let report = try Store.repair(path: path)
        #expect(report.isHealthy, "\(report.verification.problems)")
        #expect(report.changesLost.map(\.model) == ["Order"] && report.changesLost.map(\.counted) == [7] && report.changesLost.map(\.lost) == [2])
        #expect(report.countsLost == ["Item"])
        #expect(report.changesDropped.isEmpty && report.createsRestored.isEmpty)
        // Run again, the store now counts what it holds: nothing more is named.
        let again = try Store.repair(path: path)
        #expect(again.changesLost.isEmpty && again.countsLost.isEmpty)
    }

    @Test("a lost index definition: its entries go, the repair says which index to declare again, and the store checks clean")
    func lostIndexDefinition() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        do {
            let store = try Store(path: path)
            let model = try store.model("Item")
            try model.createIndex(IndexDefinition(["brand"]))
            try model.createIndex(.elements(of: "tags"))
            for i in 0..<30 { _ = try model.create(["brand": .string("b\(i % 3)"), "tags": ["x", .string("t\(i)")]]) }
            try store.close()
        }
        try Self.erase([Keys.indexDefinition("Item", 1)], partition: .user, path: path)
        let report = try Store.repair(path: path)
        #expect(report.isHealthy, "\(report.verification.problems)")
        #expect(report.indexesLost == ["Item #1"])
        #expect(report.indexesRebuilt == 1 && report.indexEntriesBefore == 30 + 60 && report.indexEntriesAfter == 60)
        let store = try Store(path: path)
        defer { try? store.close() }
        #expect(try store.model("Item").indexes.map(\.definition) == [.elements(of: "tags")])
    }

    @Test("a partition whose keys are not Satchel's is not given a marker: repair refuses it, --force aside")
    func foreignKeys() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        try Store(path: path).close()
        do {
            var options = LevelDBOptions()
            options.createIfMissing = false
            let db = try LevelDB(path: path + "/user", options: options)
            var batch = LevelDBWriteBatch()
            batch.delete(Keys.format)
            for i in 0..<10 { batch.put(Array("someone-else's key \(i)".utf8), [1, 2, 3]) }
            try db.write(batch, sync: true)
            try db.close()
        }
        #expect(throws: SatchelError.self) { try Store.repair(path: path) }
        do {
            _ = try Store.repair(path: path)
        } catch let error as SatchelError {
            #expect(error.code == .notAStore && error.message.contains("0 of 10"), "\(error)")
        }
        let forced = try Store.repair(path: path, force: true)
        #expect(forced.markersRewritten == [.user] && !forced.isHealthy, "the foreign keys are reported, not dropped")
    }
}
