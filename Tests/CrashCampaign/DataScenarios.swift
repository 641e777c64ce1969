import Foundation
import Satchel
import SatchelTestSupport

/// The scenarios of a store's life after day one: a backup killed mid-copy, and stores damaged
/// as disks damage them, then repaired.
extension Campaign {
    // MARK: - Backup

    /// A digest of every object of every model, in id order: equal digests, equal data.
    static func digest(_ store: Store) throws -> (objects: Int, hash: UInt64) {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        var objects = 0
        for definition in store.models {
            for byte in definition.name.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
            try store.model(definition.name).forEach { object in
                objects += 1
                for byte in object.description.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
            }
        }
        return (objects, hash)
    }

    /// `satchel backup DEST` of a store of `backupObjects` objects (an index, a local model, a
    /// session), killed mid-copy, twice on the same destination, then run to its end. After
    /// each kill: the source passes `check` and holds what it held; nothing is at DEST, or a
    /// whole copy; the unfinished copy (`DEST.incomplete`) is refused as a store; the backup run
    /// again finishes, and its copy checks clean and holds what the source holds.
    mutating func backupScenario() throws -> Tally {
        var tally = Tally()
        let started = ContinuousClock.now
        let directory = try freshDirectory("backup")
        let file = directory + "/items.jsonl"
        let count = settings.backupObjects
        try Self.writeItems(count, to: file)
        let db = directory + "/store"
        try newItemStore(db)
        let source = try withStore(db) { store in
            _ = try store.importObjects(from: URL(fileURLWithPath: file), into: try store.model("Item"))
            _ = try store.register(ModelDefinition(name: "Setting", partition: .local)).put(["object": "theme", "value": "dark"])
            return try Self.digest(store)
        }
        let destination = directory + "/copy"
        let command = ["--db", db, "backup", destination]
        let full = try satchelOK(command)
        try verifyBackup(db, destination, source: source, complete: true)
        while tally.kills < settings.kills {
            try? FileManager.default.removeItem(atPath: destination)
            for _ in 0..<2 where tally.kills < settings.kills {
                let run = try satchel(command, killAfter: moment(within: full.seconds))
                if run.killed { tally.kills += 1 } else { tally.finished += 1 }
                do { try verifyBackup(db, destination, source: source, complete: !run.killed) } catch {
                    tally.failures.append("backup, kill \(tally.kills): \(error)")
                }
                // A finished copy is in the way of the next.
                if !run.killed { try? FileManager.default.removeItem(atPath: destination) }
            }
            try? FileManager.default.removeItem(atPath: destination)
            try satchelOK(command)
            do { try verifyBackup(db, destination, source: source, complete: true) } catch {
                tally.failures.append("backup, after kill \(tally.kills): \(error)")
            }
        }
        tally.seconds = Self.seconds(ContinuousClock.now - started)
        return tally
    }

    func verifyBackup(_ db: String, _ destination: String, source: (objects: Int, hash: UInt64), complete: Bool) throws {
        try checkStore(db)
        let now = try withStore(db) { try Self.digest($0) }
        try require(now == source, "the source changed: \(now.objects) objects (digest \(now.hash)), was \(source.objects)")
        // Every directory a killed backup can leave: each refused as a store, by the library and
        // by the CLI, and none created into.
        let marked = FileManager.default.fileExists(atPath: destination + "/SATCHEL-BACKUP-INCOMPLETE")
        for partial in [destination + ".incomplete-new", destination + ".incomplete"] + (marked ? [destination] : [])
        where FileManager.default.fileExists(atPath: partial) {
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: partial)) ?? []
            // An empty directory (killed as it was made) holds no copy: a new store may be made
            // there, as in any empty directory, so only the read below is tried on it.
            if !entries.isEmpty {
                do {
                    try Store(path: partial).close()
                    throw Finding("the unfinished copy \(partial) opened as a store")
                } catch let error as SatchelError {
                    try require(error.code == .notAStore, "the unfinished copy was refused with \(error.code), not notAStore")
                }
            }
            let read = try satchel(["--db", partial, "find", "Item", "--count"])
            try require(read.status == 1 && read.stdout.isEmpty, "satchel read the unfinished copy: \(read.stdout)")
            let after = (try? FileManager.default.contentsOfDirectory(atPath: partial)) ?? []
            try require(after.sorted() == entries.sorted(), "reading the unfinished copy \(partial) wrote into it")
        }
        if marked {
            try require(!complete, "the finished backup at \(destination) is still marked unfinished")
            return
        }
        let exists = FileManager.default.fileExists(atPath: destination)
        try require(exists || !complete, "the finished backup left nothing at \(destination)")
        guard exists else { return }
        try checkStore(destination)
        let copy = try withStore(destination) { try Self.digest($0) }
        try require(copy == source, "the copy holds \(copy.objects) objects (digest \(copy.hash)), the source \(source.objects)")
    }

    // MARK: - Migration

    /// The migration the scenario kills: every data step, an index, a fixed schema.
    static let migrationJSON = #"""
        {"name":"v2","steps":[{"rename":"name","to":"title"},{"add":"archived","default":false},{"convert":"price","to":"string"},
        {"remove":"tags"},{"createIndex":"title"},{"schema":{"title":"string","n":"integer","brand":"string","price":"string","archived":"boolean"}}]}
        """#

    /// Item `k` after the migration.
    static func migratedItem(_ k: Int) -> JSONObject {
        var item = item(k)
        item["title"] = item["name"]
        item["name"] = nil
        item["archived"] = false
        item["price"] = .string(String(decoding: item["price"]!.jsonBytes, as: UTF8.self))
        item["tags"] = nil
        return item
    }

    /// `satchel migrate Item FILE` over `migrateObjects` objects (an index on brand), killed
    /// mid-way. After each kill, read underneath Satchel before anything
    /// opens the store: every object is item k before the migration or after it, never between;
    /// those after are exactly the ones up to the recorded cursor (all once it is recorded
    /// applied). Then `check` (whose open finishes the migration) passes, and every object is
    /// after it, the index on title holds one entry per object, the migration is recorded once.
    mutating func migrateScenario() throws -> Tally {
        var tally = Tally()
        let started = ContinuousClock.now
        let directory = try freshDirectory("migrate")
        let file = directory + "/items.jsonl"
        let count = settings.migrateObjects
        try Self.writeItems(count, to: file)
        let template = directory + "/template"
        try newItemStore(template)
        try withStore(template) { store in _ = try store.importObjects(from: URL(fileURLWithPath: file), into: try store.model("Item")) }
        let steps = directory + "/v2.json"
        try Self.migrationJSON.write(toFile: steps, atomically: true, encoding: .utf8)
        let db = directory + "/store"
        let command = ["--db", db, "migrate", "Item", steps]
        func fresh() throws {
            try? FileManager.default.removeItem(atPath: db)
            try FileManager.default.copyItem(atPath: template, toPath: db)
        }
        try fresh()
        let full = try satchelOK(command)
        try verifyMigrated(db, count: count)
        while tally.kills < settings.kills {
            // One kill per store: the next open finishes what the kill left.
            try fresh()
            do {
                let run = try satchel(command, killAfter: moment(within: full.seconds))
                if run.killed { tally.kills += 1 } else { tally.finished += 1 }
                do {
                    // Killed while it was checking the objects: nothing was written, nothing
                    // to finish; the migration runs again.
                    let stage = try verifyMigrationUnderway(db, count: count)
                    if run.killed { tally.landed[stage, default: 0] += 1 }
                    if stage == "while checking" { try satchelOK(command) }
                    try verifyMigrated(db, count: count)
                } catch {
                    tally.failures.append("migrate, kill \(tally.kills): \(error)")
                }
            }
        }
        tally.seconds = Self.seconds(ContinuousClock.now - started)
        return tally
    }

    /// What a killed migration left, read underneath Satchel; returns where the kill landed:
    /// while checking (nothing written), while writing, or after (recorded applied).
    func verifyMigrationUnderway(_ db: String, count: Int) throws -> String {
        var cursor: String?
        var underway = false
        var applied = false
        var after: [Int] = []
        var objects = 0
        for (key, value) in try RawStore.records(db) {
            guard let (family, elements) = try? KeyBytes.decode(key) else { throw Finding("an undecodable key") }
            if family == 0x01, elements.first == "migrating", elements.last == "Item" {
                let state = try JSONObject(parsing: value)
                underway = true
                cursor = state["cursor"]?.stringValue
            } else if family == 0x01, elements.first == "migration", elements.last == "v2" {
                applied = true
            } else if family == 0x02, elements.first == "Item", let id = elements.last?.stringValue {
                guard let k = Self.itemNumber(id), k < count else { throw Finding("an object \(id) that was never written") }
                let attributes = try JSONObject(parsing: value)
                objects += 1
                if attributes == Self.migratedItem(k) {
                    after.append(k)
                } else if attributes != Self.item(k) {
                    throw Finding("object \(id) is neither before nor after the migration: \(attributes)")
                }
            }
        }
        try require(objects == count, "\(objects) objects, not \(count)")
        if applied {
            try require(!underway && after.count == count, "recorded applied with \(after.count) of \(count) objects after it")
        } else if let cursor, let last = Self.itemNumber(cursor) {
            try require(after == Array(0...last), "the cursor is at \(cursor), the objects after the migration are \(after.count) others")
        } else {
            try require(after.isEmpty, "\(after.count) objects rewritten before the migration recorded a batch")
        }
        return applied ? "after" : underway ? "while writing" : "while checking"
    }

    /// After an open finished the migration.
    func verifyMigrated(_ db: String, count: Int) throws {
        try checkStore(db)
        try withStore(db) { store in
            let model = try store.model("Item")
            let applied = try model.appliedMigrations
            try require(applied == ["v2"], "applied: \(applied)")
            var seen = 0
            try model.forEach { object in
                guard let k = Self.itemNumber(object.id), object.attributes == Self.migratedItem(k) else {
                    throw Finding("object \(object.id) is not migrated: \(object.attributes)")
                }
                seen += 1
            }
            try require(seen == count, "\(seen) objects, not \(count)")
            let index = try model.indexes.first { $0.definition == IndexDefinition("title") }
            try require(index?.isReady == true && index?.entries == count, "the title index: \(String(describing: index))")
            guard case .fixedSchema = try model.definition.kind else { throw Finding("the model did not take its fixed schema") }
        }
    }

    // MARK: - Damage

    /// What the damage scenario counted over all its stores.
    struct DamageFigures {
        var stores = 0
        var objects = 0
        /// Objects whose record's bytes were still whole somewhere in the damaged files.
        var survived = 0
        var salvaged = 0
        var queries = 0
        /// Indexes whose definition the damage took, declared again after the repair said so.
        var indexesDeclaredAgain = 0
    }

    /// Item `k` of the damage scenario: its serial first (keys are stored sorted), so that its
    /// record's bytes can be found in the files.
    static func damageItem(_ k: Int) -> JSONObject {
        [
            "a": .string("S\(k)Z"), "brand": .string("brand-\(k % 10)"), "n": .int(Int64(k)),
            "text": .string(String(repeating: "x", count: 60 + k % 80)),
        ]
    }

    /// Stores of `damageObjects` objects (written without compression, so that their records'
    /// bytes can be found), each damaged one way, in turn: bytes flipped in tables, bytes
    /// flipped in every table's first block, a log cut short, MANIFEST gone, CURRENT gone.
    /// Then `satchel repair`; it must succeed, and after it `check` passes, every object left is
    /// one that was written, exactly, and each brand's indexed count equals the scan's.
    mutating func damageScenario(figures: inout DamageFigures) throws -> Tally {
        var tally = Tally()
        let started = ContinuousClock.now
        let directory = try freshDirectory("damage")
        let count = settings.damageObjects
        let kinds = ["flipped bytes", "first blocks", "log cut short", "MANIFEST gone", "CURRENT gone"]
        var trial = 0
        while tally.kills < settings.kills {
            let kind = kinds[trial % kinds.count]
            trial += 1
            let db = directory + "/store"
            try? FileManager.default.removeItem(atPath: db)
            try? FileManager.default.removeItem(atPath: db + ".died")
            var configuration = Store.Configuration()
            configuration.compression = false
            configuration.writeBufferSize = 256 << 10  // several tables
            do {
                let store = try Store(path: db, configuration: configuration)
                let model = try store.model("Item")
                try model.createIndex(IndexDefinition(["brand"], storesObjects: false))
                for start in stride(from: 0, to: count, by: 1000) {
                    try store.bulkUpdate { tx in
                        for k in start..<min(start + 1000, count) {
                            var object = Self.damageItem(k)
                            object["object"] = .string(Self.itemID(k))
                            _ = try tx.put(object, in: model)
                        }
                    }
                }
                if kind == "log cut short" {
                    // A clean close empties the log into a table: the writes sit in the log only
                    // when the process died after them. What such a death leaves: the directory
                    // as it is while the store is open.
                    try StoreDamage.copyWhileOpen(db, to: db + ".died")
                }
                try store.close()
            }
            if kind == "log cut short" {
                try FileManager.default.removeItem(atPath: db)
                try FileManager.default.moveItem(atPath: db + ".died", toPath: db)
            } else {
                // Into tables (a clean close empties the log into one), opened once more.
                try Store(path: db, configuration: configuration).close()
            }
            try damage(db, kind: kind)
            tally.kills += 1
            figures.stores += 1
            figures.objects += count
            figures.survived += Self.survivingRecords(db, count: count)
            do {
                let repaired = try satchel(["--db", db, "repair"])
                try require(repaired.status == 0, "repair after \(kind) exited \(repaired.status): \(repaired.stdout.suffix(300)) \(repaired.stderr)")
                if repaired.stdout.contains("index Item #1 had lost its definition") {
                    // Its definition was in a damaged first block: repair said so; declare it again.
                    try satchelOK(["--db", db, "index", "Item", "brand", "--keys-only"])
                    figures.indexesDeclaredAgain += 1
                }
                try checkStore(db)
                let exported = try satchelOK(["--db", db, "export", "Item"]).stdout.split(separator: "\n")
                var brands: [String: Int] = [:]
                for line in exported {
                    let object = try JSONObject(parsing: String(line))
                    guard let id = object["object"]?.stringValue, let k = Self.itemNumber(id) else {
                        throw Finding("an object that was never written: \(line)")
                    }
                    var expected = Self.damageItem(k)
                    expected["object"] = .string(id)
                    try require(object == expected, "object \(id) after \(kind) and repair is not as written: \(line)")
                    brands[expected["brand"]?.stringValue ?? "", default: 0] += 1
                }
                figures.salvaged += exported.count
                for b in 0..<10 {
                    let answer = try satchelOK(["--db", db, "find", "Item", "--where", "brand=brand-\(b)", "--count", "--require-index"])
                    let indexed = answer.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
                    try require(
                        indexed == String(brands["brand-\(b)"] ?? 0),
                        "after \(kind): brand-\(b) indexed \(indexed), scanned \(brands["brand-\(b)"] ?? 0)")
                    figures.queries += 1
                }
            } catch {
                tally.failures.append("damage \(trial) (\(kind)): \(error)")
            }
        }
        tally.seconds = Self.seconds(ContinuousClock.now - started)
        return tally
    }

    /// Damages the closed store at `db` one way.
    mutating func damage(_ db: String, kind: String) throws {
        let tables = StoreDamage.files(db, suffix: ".ldb")
        switch kind {
        case "flipped bytes":
            // 1 to 200 bytes in one table's data (after its first block; the first blocks have their own kind).
            guard let table = tables.isEmpty ? nil : tables[Int(random.next() % UInt64(tables.count))] else { throw Finding("no table to damage") }
            try StoreDamage.flipRandomBytes(table, count: 1 + Int(random.next() % 200), within: 0.02...0.9, random: &random)
        case "first blocks":
            for table in tables { try StoreDamage.flip(table, at: 4 + Int(random.next() % 64), count: 8) }
        case "log cut short":
            guard let log = StoreDamage.files(db, suffix: ".log").max(by: { StoreDamage.size($0) < StoreDamage.size($1) }) else {
                throw Finding("no log to cut")
            }
            try StoreDamage.truncate(log, to: Int(Double(StoreDamage.size(log)) * random.unit()))
        case "MANIFEST gone":
            for manifest in StoreDamage.files(db, suffix: "MANIFEST-") { try FileManager.default.removeItem(atPath: manifest) }
        default:
            try FileManager.default.removeItem(atPath: db + "/user/CURRENT")
        }
    }

    /// How many of items 0..<count have their record's bytes whole in the store's files.
    static func survivingRecords(_ db: String, count: Int) -> Int {
        var found = Set<Int>()
        let opening = Array(#"{"a":"S"#.utf8)
        for file in StoreDamage.files(db, suffix: ".ldb") + StoreDamage.files(db, suffix: ".log") {
            guard let bytes = try? [UInt8](Data(contentsOf: URL(fileURLWithPath: file))) else { continue }
            var i = 0
            while i + opening.count < bytes.count {
                guard bytes[i] == opening[0], bytes[i..<(i + opening.count)].elementsEqual(opening) else {
                    i += 1
                    continue
                }
                var j = i + opening.count
                var k = 0
                while j < bytes.count, bytes[j] >= 0x30 && bytes[j] <= 0x39 {
                    k = k * 10 + Int(bytes[j] - 0x30)
                    j += 1
                }
                if k < count {
                    let expected = damageItem(k).jsonBytes
                    if i + expected.count <= bytes.count && bytes[i..<(i + expected.count)].elementsEqual(expected) { found.insert(k) }
                }
                i += 1
            }
        }
        return found.count
    }
}
