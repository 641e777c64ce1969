import Foundation
import Satchel

/// `write_synced`: single-object writes on a model that records changes, each its own
/// transaction — creates of the benchmark's objects, then a new price for each — against
/// SQLite-JSON doing the same: the document inserted or updated and its change row written (one
/// per object, coalesced as Satchel's change log is) in one transaction. Both sides keep the
/// `brand` and `price` indexes. The systems alternate in slices of ``slice`` writes; each side
/// keeps its best of three rounds on fresh stores.
enum WriteSynced {
    static let slice = 500

    /// Seconds per write: Satchel's, SQLite's.
    static func run(items: [BenchData.Item], directory: String) throws -> (Double, Double) {
        var satchel = Double.infinity, sqlite = Double.infinity
        for round in 0..<3 {
            let a = try SatchelWriter(path: "\(directory)/synced-\(round)")
            let b = try SQLiteWriter(path: "\(directory)/synced-\(round).db")
            var timeA = 0.0, timeB = 0.0
            for phase in 0..<2 {
                var index = 0
                while index < items.count {
                    let chunk = items[index..<min(index + slice, items.count)]
                    // Which system goes first alternates, so neither always follows the other's work.
                    let order: [Bool] = (index / slice) % 2 == 0 ? [true, false] : [false, true]
                    for first in order {
                        let start = ContinuousClock.now
                        if first { try a.write(chunk, update: phase == 1) } else { try b.write(chunk, update: phase == 1) }
                        let seconds = Report.seconds(ContinuousClock.now - start)
                        if first { timeA += seconds } else { timeB += seconds }
                    }
                    index += slice
                }
            }
            try a.check(items)
            try b.check(items)
            try a.close()
            try b.close()
            try? FileManager.default.removeItem(atPath: "\(directory)/synced-\(round)")
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: "\(directory)/synced-\(round).db\(suffix)") }
            satchel = min(satchel, timeA / Double(2 * items.count))
            sqlite = min(sqlite, timeB / Double(2 * items.count))
        }
        return (satchel, sqlite)
    }

    private final class SatchelWriter {
        let store: Store
        let model: Model

        init(path: String) throws {
            store = try Store(path: path)
            model = try store.register(ModelDefinition(name: "Product", syncType: .incremental))
            try model.createIndex(IndexDefinition("brand"))
            try model.createIndex(IndexDefinition("price"))
        }

        func write(_ items: ArraySlice<BenchData.Item>, update: Bool) throws {
            for item in items {
                if update {
                    _ = try model.update(item.id, with: ["price": BulkSave.newPrice(item)])
                } else {
                    var attributes = item.attributes
                    attributes[Object.idAttribute] = .string(item.id)
                    _ = try model.create(attributes)
                }
            }
        }

        func check(_ items: [BenchData.Item]) throws {
            let pending = try model.pendingChanges().count
            guard try model.count() == items.count, pending == items.count else {
                throw BenchError("satchel holds \(try model.count()) objects and \(pending) pending changes, not \(items.count)")
            }
        }

        func close() throws { try store.close() }
    }

    private final class SQLiteWriter {
        let db: SQLiteDatabase
        let insert, insertChange, update, updateChange: SQLiteStatement

        init(path: String) throws {
            db = try SQLiteDatabase(path: path)
            try configure(db, cacheBytes: Store.Configuration().blockCacheSize)
            try db.execute("CREATE TABLE docs (id TEXT PRIMARY KEY NOT NULL, body TEXT NOT NULL)")
            try db.execute("CREATE INDEX docs_brand ON docs (json_extract(body, '$.brand'))")
            try db.execute("CREATE INDEX docs_price ON docs (json_extract(body, '$.price'))")
            try db.execute("CREATE TABLE changes (id TEXT PRIMARY KEY NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL)")
            insert = try db.prepare("INSERT INTO docs (id, body) VALUES (?, ?)")
            insertChange = try db.prepare("INSERT INTO changes (id, kind, body) VALUES (?, 'create', '{}')")
            update = try db.prepare("UPDATE docs SET body = json_set(body, '$.price', ?) WHERE id = ?")
            // A change already pending keeps its kind and gains the attribute (coalesced).
            updateChange = try db.prepare(
                "INSERT INTO changes (id, kind, body) VALUES (?1, 'update', json_object('price', ?2)) ON CONFLICT (id) DO UPDATE SET body = json_set(body, '$.price', ?2)"
            )
        }

        func write(_ items: ArraySlice<BenchData.Item>, update: Bool) throws {
            for item in items {
                try db.execute("BEGIN")
                if update {
                    let price = BulkSave.newPrice(item).intValue ?? 0
                    self.update.bind(1, price)
                    self.update.bind(2, item.id)
                    try self.update.run()
                    updateChange.bind(1, item.id)
                    updateChange.bind(2, price)
                    try updateChange.run()
                } else {
                    insert.bind(1, item.id)
                    insert.bind(2, bytes: item.attributes.jsonBytes)
                    try insert.run()
                    insertChange.bind(1, item.id)
                    try insertChange.run()
                }
                try db.execute("COMMIT")
            }
        }

        func check(_ items: [BenchData.Item]) throws {
            for table in ["docs", "changes"] {
                let count = try db.prepare("SELECT count(*) FROM \(table)")
                guard try count.step(), count.int(0) == Int64(items.count) else {
                    throw BenchError("sqlite's \(table) does not hold \(items.count) rows")
                }
            }
        }

        func close() throws {}
    }
}
