import Foundation
import Satchel

/// The scenarios that stay on the device: an import, a transaction writer, an index build.
extension Campaign {
    // MARK: - Import

    /// Item `k` of the generated data: what the store must hold for it, whole.
    static func item(_ k: Int) -> JSONObject {
        [
            "n": .int(Int64(k)), "name": .string("item \(k)"), "brand": .string("brand-\(k % 20)"),
            "price": .double(Double(k % 1000) + 0.25), "tags": .array([.string("t\(k % 7)"), .string("t\(k % 11)")]),
        ]
    }

    static func itemID(_ k: Int) -> String { "item-" + String(repeating: "0", count: max(0, 7 - String(k).count)) + String(k) }

    static func itemNumber(_ id: String) -> Int? { id.hasPrefix("item-") ? Int(id.dropFirst(5)) : nil }

    /// Writes items 0..<count as JSON lines, each with its id.
    static func writeItems(_ count: Int, to path: String) throws {
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        var chunk: [UInt8] = []
        for k in 0..<count {
            var object = item(k)
            object["object"] = .string(itemID(k))
            chunk += object.jsonBytes
            chunk.append(0x0A)
            if chunk.count > 1 << 20 {
                try handle.write(contentsOf: chunk)
                chunk.removeAll(keepingCapacity: true)
            }
        }
        try handle.write(contentsOf: chunk)
    }

    /// A new store at `db` with the Item model and an index on `brand`.
    func newItemStore(_ db: String, indexed: Bool = true) throws {
        try? FileManager.default.removeItem(atPath: db)
        try withStore(db) { store in
            let model = try store.register(ModelDefinition(name: "Item"))
            if indexed { try model.createIndex(IndexDefinition("brand")) }
        }
    }

    /// An import of `importObjects` objects (JSON lines, batches of 1,000), killed mid-way, again
    /// and again. After each kill: `check` passes, the store holds a whole number of batches, and
    /// they are the file's first items, each exactly as in the file. The import run to its end
    /// then holds every item once.
    mutating func importScenario() throws -> Tally {
        var tally = Tally()
        let started = ContinuousClock.now
        let directory = try freshDirectory("import")
        let file = directory + "/items.jsonl"
        let count = settings.importObjects
        try Self.writeItems(count, to: file)
        let db = directory + "/store"
        let command = ["--db", db, "import", "Item", file, "--progress", "none"]

        try newItemStore(db)
        let full = try satchelOK(command)
        try verifyImport(db, count: count, complete: true)
        while tally.kills < settings.kills {
            try newItemStore(db)
            // Two kills on the same store (the second on a store recovered from the first), then
            // the import to its end.
            for fraction in [1.0, 1.0] where tally.kills < settings.kills {
                let run = try satchel(command, killAfter: moment(within: full.seconds, fraction: fraction))
                if run.killed { tally.kills += 1 } else { tally.finished += 1 }
                do { try verifyImport(db, count: count, complete: !run.killed) } catch {
                    tally.failures.append("import, kill \(tally.kills): \(error)")
                }
            }
            try satchelOK(command)
            do { try verifyImport(db, count: count, complete: true) } catch { tally.failures.append("import, after kill \(tally.kills): \(error)") }
        }
        tally.seconds = Self.seconds(ContinuousClock.now - started)
        return tally
    }

    func verifyImport(_ db: String, count: Int, complete: Bool) throws {
        try checkStore(db)
        try withStore(db) { store in
            let model = try store.model("Item")
            let stored = try model.count()
            try require(
                complete ? stored == count : stored % 1000 == 0 || stored == count, "\(stored) objects: not whole batches of 1000 (of \(count))")
            var seen = 0
            try model.forEach { object in
                guard let k = Self.itemNumber(object.id), k < stored else {
                    throw Finding("object \(object.id) is not among the file's first \(stored) items")
                }
                try require(object.attributes == Self.item(k), "object \(object.id) is not whole: \(object.attributes)")
                seen += 1
            }
            try require(seen == stored, "\(seen) objects read, statistics say \(stored)")
            let entries = try model.indexes.first?.entries ?? -1
            try require(entries == stored, "the brand index has \(entries) entries for \(stored) objects")
        }
    }

    // MARK: - Transactions

    /// A writer (this executable's `bulk-writer` mode) committing one `bulkUpdate` after another,
    /// each changing every one of `bulkObjects` objects, creating one and deleting another; it
    /// prints `committed R` after each. After each kill the store holds exactly one round, the
    /// last acknowledged or the one after it (committed, not yet acknowledged), in every object.
    mutating func bulkScenario() throws -> Tally {
        var tally = Tally()
        let started = ContinuousClock.now
        let directory = try freshDirectory("bulk")
        let db = directory + "/store"
        try withStore(db) { store in
            let model = try store.register(ModelDefinition(name: "Counter"))
            try model.createIndex(IndexDefinition("round"))
            try store.bulkUpdate { tx in
                for k in 0..<settings.bulkObjects { _ = try tx.put(["object": .string("c\(k)"), "k": .int(Int64(k)), "round": 0], in: model) }
                _ = try tx.put(["object": "marker", "round": 0], in: model)
            }
        }
        // The time of one transaction, from a writer allowed three.
        let calibration = try run(settings.campaign, ["bulk-writer", db, "3"])
        try require(calibration.status == 0, "the bulk writer failed: \(calibration.stderr)")
        let perRound = calibration.seconds / 3
        var acknowledged = try withStore(db) { try Self.round(of: $0) }
        while tally.kills < settings.kills {
            let run = try run(settings.campaign, ["bulk-writer", db, "0"], killAfter: moment(within: perRound * 4))
            if run.killed { tally.kills += 1 } else { tally.finished += 1 }
            if let last = run.stdout.split(separator: "\n").last(where: { $0.hasPrefix("committed ") }), let round = Int(last.dropFirst(10)) {
                acknowledged = round
            }
            do {
                try checkStore(db)
                let round = try withStore(db) { store in
                    let round = try Self.round(of: store)
                    let model = try store.model("Counter")
                    let atRound = try model.count(where: ["round": .int(Int64(round))]), objects = try model.count()
                    try require(atRound == settings.bulkObjects + 2, "\(atRound) objects at round \(round), not every one")
                    try require(objects == settings.bulkObjects + 2, "\(objects) objects, not \(settings.bulkObjects + 2)")
                    let landed = try model.find("extra-\(round)") != nil && model.find("extra-\(round - 1)") == nil
                    try require(landed, "round \(round)'s create and delete did not land together")
                    return round
                }
                try require(round == acknowledged || round == acknowledged + 1, "round \(round) stored, \(acknowledged) acknowledged")
                acknowledged = round
            } catch {
                tally.failures.append("bulk, kill \(tally.kills): \(error)")
            }
        }
        tally.seconds = Self.seconds(ContinuousClock.now - started)
        return tally
    }

    /// The round the marker object holds.
    static func round(of store: Store) throws -> Int {
        guard let round = try store.model("Counter").find("marker")?.attributes["round"]?.intValue else { throw Finding("no marker") }
        return Int(round)
    }

    /// The `bulk-writer DB ROUNDS` mode: commits ROUNDS transactions (0: until killed), each
    /// moving every Counter object to the next round, creating `extra-R` and deleting
    /// `extra-(R-1)`; prints `committed R` after each.
    static func bulkWriter(_ arguments: [String]) throws {
        guard arguments.count == 2, let rounds = Int(arguments[1]) else { throw Finding("usage: bulk-writer DB ROUNDS") }
        let store = try Store(path: arguments[0])
        defer { try? store.close() }
        let model = try store.model("Counter")
        var round = try round(of: store)
        var done = 0
        while rounds == 0 || done < rounds {
            round += 1
            let next = round
            let ids = try model.findAll().map(\.id)
            try store.bulkUpdate { tx in
                for id in ids where !id.hasPrefix("extra-") { _ = try tx.update(id, with: ["round": .int(Int64(next))], in: model) }
                _ = try tx.put(["object": .string("extra-\(next)"), "round": .int(Int64(next))], in: model)
                _ = try tx.delete("extra-\(next - 1)", in: model)
            }
            FileHandle.standardOutput.write(Data("committed \(next)\n".utf8))
            done += 1
        }
    }

    // MARK: - Index build

    /// `satchel index Item brand,n` over `indexObjects` objects, killed mid-build. After each
    /// kill: `check` passes, and a query on `brand` answers exactly (a half-built index is not
    /// used); the build run again finishes, and the index then has one entry per object.
    mutating func indexScenario() throws -> Tally {
        var tally = Tally()
        let started = ContinuousClock.now
        let directory = try freshDirectory("index")
        let file = directory + "/items.jsonl"
        let count = settings.indexObjects
        try Self.writeItems(count, to: file)
        let template = directory + "/template"
        try newItemStore(template, indexed: false)
        try withStore(template) { store in _ = try store.importObjects(from: URL(fileURLWithPath: file), into: try store.model("Item")) }
        let db = directory + "/store"
        let command = ["--db", db, "index", "Item", "brand,n"]
        func fresh() throws {
            try? FileManager.default.removeItem(atPath: db)
            try FileManager.default.copyItem(atPath: template, toPath: db)
        }
        try fresh()
        let full = try satchelOK(command)
        try verifyIndex(db, count: count, complete: true)
        while tally.kills < settings.kills {
            try fresh()
            for fraction in [1.0, 0.6] where tally.kills < settings.kills {
                let run = try satchel(command, killAfter: moment(within: full.seconds, fraction: fraction))
                if run.killed { tally.kills += 1 } else { tally.finished += 1 }
                do { try verifyIndex(db, count: count, complete: !run.killed) } catch {
                    tally.failures.append("index, kill \(tally.kills): \(error)")
                }
            }
            try satchelOK(command)
            do { try verifyIndex(db, count: count, complete: true) } catch { tally.failures.append("index, after kill \(tally.kills): \(error)") }
        }
        tally.seconds = Self.seconds(ContinuousClock.now - started)
        return tally
    }

    func verifyIndex(_ db: String, count: Int, complete: Bool) throws {
        try checkStore(db)
        // Items k with k % 20 == 3 have brand-3.
        let expected = (count + 16) / 20
        let answer = try satchelOK(["--db", db, "find", "Item", "--where", "brand=brand-3", "--count"])
        try require(
            answer.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == String(expected),
            "find brand=brand-3 --count said \(answer.stdout), not \(expected)")
        try withStore(db) { store in
            let model = try store.model("Item")
            let objects = try model.count()
            try require(objects == count, "\(objects) objects, not \(count)")
            let index = try model.indexes.first { $0.definition == IndexDefinition("brand", "n") }
            if complete || index?.isReady == true {
                try require(index?.isReady == true, "the finished build left the index not ready")
                try require(index?.entries == count, "the ready index has \(index?.entries ?? -1) entries for \(count) objects")
            }
        }
    }
}
