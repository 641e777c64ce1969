import CSQLite
import Foundation
import Satchel

/// Aggregates and full-text search, against SQLite on the same objects (JSON text in a table,
/// an expression index on the brand, an FTS5 table over the descriptions):
/// - `aggregate_group`: the sum of prices by brand (an indexed attribute), every object;
/// - `aggregate_filtered`: the count and mean price of one brand's objects, by category;
/// - `fts_index`: building the full-text index over every description;
/// - `fts_query`: a two-word ranked query, the best 20.
/// Times per operation; rounds interleaved, each system keeping its best.
enum QueryBench {
    static func run(count: Int, directory: String?) throws {
        let base = try Report.scratchDirectory("queries", given: directory)
        defer { Report.removeScratch(base, given: directory) }
        FileHandle.standardError.write(Data("queries: \(count) objects, aggregates and full-text search\n".utf8))

        let store = try Store(path: base + "/satchel")
        defer { try? store.close() }
        let products = try store.register(ModelDefinition(name: "Product", syncType: .none))
        try products.createIndex(IndexDefinition("brand"))
        let sqlite = try SQLiteDatabase(path: base + "/sqlite.db")
        try configure(sqlite, cacheBytes: Store.Configuration().blockCacheSize)
        try sqlite.execute("CREATE TABLE docs (id TEXT PRIMARY KEY NOT NULL, body TEXT NOT NULL)")
        try sqlite.execute("CREATE INDEX docs_brand ON docs (json_extract(body, '$.brand'))")
        let insert = try sqlite.prepare("INSERT INTO docs (id, body) VALUES (?1, ?2)")
        var generator = BenchData.Generator()
        var written = 0
        while written < count {
            let batch = (0..<min(1000, count - written)).map { _ in generator.next() }
            try store.bulkUpdate { tx in
                for item in batch {
                    var attributes = item.attributes
                    attributes[Object.idAttribute] = .string(item.id)
                    try tx.put(attributes, in: products)
                }
            }
            try sqlite.execute("BEGIN")
            for item in batch {
                insert.reset()
                insert.bind(1, item.id)
                insert.bind(2, bytes: item.attributes.jsonBytes)
                try insert.run()
            }
            try sqlite.execute("COMMIT")
            written += batch.count
        }

        // Aggregates.
        let groupSQL = try sqlite.prepare(
            "SELECT json_extract(body, '$.brand') AS b, sum(json_extract(body, '$.price')) FROM docs GROUP BY b ORDER BY b")
        let filteredSQL = try sqlite.prepare(
            "SELECT json_extract(body, '$.category') AS c, count(*), avg(json_extract(body, '$.price')) FROM docs WHERE json_extract(body, '$.brand') = ?1 GROUP BY c ORDER BY c"
        )
        var satchelGroup = Double.infinity, sqliteGroup = Double.infinity
        var satchelFiltered = Double.infinity, sqliteFiltered = Double.infinity
        let brands = BenchData.brands
        for round in 0..<5 {
            var groups = 0, rows = 0
            satchelGroup = min(
                satchelGroup,
                try Report.seconds(repeats: 1, warmUp: round == 0) {
                    groups = try products.aggregate(groupBy: ["brand"], [.sum("price")]).count
                })
            sqliteGroup = min(
                sqliteGroup,
                try Report.seconds(repeats: 1, warmUp: round == 0) {
                    groupSQL.reset()
                    rows = 0
                    while try groupSQL.step() { rows += 1 }
                })
            guard groups == rows else { throw BenchError("aggregate_group: Satchel found \(groups) groups, SQLite \(rows)") }
            let brand = brands[round % brands.count]
            satchelFiltered = min(
                satchelFiltered,
                try Report.seconds(repeats: 3, warmUp: true) {
                    groups = try products.aggregate(where: "brand" == .string(brand), groupBy: ["category"], [.count, .avg("price")]).count
                })
            sqliteFiltered = min(
                sqliteFiltered,
                try Report.seconds(repeats: 3, warmUp: true) {
                    filteredSQL.reset()
                    filteredSQL.bind(1, brand)
                    rows = 0
                    while try filteredSQL.step() { rows += 1 }
                })
            guard groups == rows else { throw BenchError("aggregate_filtered: Satchel found \(groups) groups, SQLite \(rows)") }
        }
        Report.line("aggregate_group", n: count, satchel: satchelGroup * 1e3, unit: "ms", baselines: [("sqlite_json", sqliteGroup * 1e3)])
        Report.line("aggregate_filtered", n: count, satchel: satchelFiltered * 1e3, unit: "ms", baselines: [("sqlite_json", sqliteFiltered * 1e3)])

        // Full-text search: the index built once each (timed), then queries.
        let satchelIndex = try Report.seconds(repeats: 1, warmUp: false) { try products.createIndex(.text("description")) }
        let sqliteIndex = try Report.seconds(repeats: 1, warmUp: false) {
            try sqlite.execute("CREATE VIRTUAL TABLE fts USING fts5(description)")
            try sqlite.execute("INSERT INTO fts (rowid, description) SELECT rowid, json_extract(body, '$.description') FROM docs")
        }
        Report.line("fts_index", n: count, satchel: satchelIndex, unit: "s", baselines: [("sqlite_fts5", sqliteIndex)])
        let querySQL = try sqlite.prepare("SELECT rowid FROM fts WHERE fts MATCH ?1 ORDER BY rank LIMIT 20")
        let queries = ["light portable", "sturdy quiet", "solar wireless", "rugged modern", "classic smart"]
        var satchelQuery = Double.infinity, sqliteQuery = Double.infinity
        for (round, query) in queries.enumerated() {
            var found = 0, rows = 0
            satchelQuery = min(
                satchelQuery, try Report.seconds(repeats: 3, warmUp: round == 0) { found = try products.search(query, limit: 20).count })
            sqliteQuery = min(
                sqliteQuery,
                try Report.seconds(repeats: 3, warmUp: round == 0) {
                    querySQL.reset()
                    querySQL.bind(1, query)
                    rows = 0
                    while try querySQL.step() { rows += 1 }
                })
            guard found == rows else { throw BenchError("fts_query '\(query)': Satchel found \(found), SQLite \(rows)") }
        }
        Report.line("fts_query", n: count, satchel: satchelQuery * 1e3, unit: "ms", baselines: [("sqlite_fts5", sqliteQuery * 1e3)])
    }
}
