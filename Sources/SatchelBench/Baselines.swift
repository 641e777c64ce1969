import CLevelDB
import Foundation
import Satchel

/// The raw baseline's keys: the shape and about the size of Satchel's — a family byte, the
/// model's name, the index number, the value (type-tagged, ordered bytes), the id — written by
/// hand, with nothing to escape (the benchmark's names, ids and values hold no 0x00). Satchel's
/// own encoding stays Satchel's: the core exports nothing for its benchmark.
enum RawKeys {
    static let objectPrefix: [UInt8] = [0x10] + Array("Product".utf8) + [0]

    static func object(_ id: String) -> [UInt8] { objectPrefix + Array(id.utf8) + [0] }

    static func indexPrefix(_ index: UInt8) -> [UInt8] { [0x20] + Array("Product".utf8) + [0, index] }

    /// A string as a terminated run of bytes; an integer as 8 big-endian bytes with the sign bit
    /// flipped, so byte order is numeric order.
    static func value(_ value: JSONValue) -> [UInt8] {
        switch value {
        case .string(let text): return [0x30] + Array(text.utf8) + [0]
        case .int(let n): return [0x21] + withUnsafeBytes(of: (UInt64(bitPattern: n) ^ (1 << 63)).bigEndian, Array.init)
        default: fatalError("the benchmark indexes strings and integers only")
        }
    }

    static func indexEntry(_ index: UInt8, _ value: JSONValue, id: String) -> [UInt8] {
        indexPrefix(index) + Self.value(value) + Array(id.utf8) + [0]
    }
}

/// Raw LevelDB through its C API: the objects as Satchel stores them (compact JSON), under keys
/// of the same shape (``RawKeys``), entries of the brand and price indexes holding their
/// objects, the same batches and the same options, with the index entries maintained by hand
/// and no other work. It returns bytes, never parsed objects: the floor under Satchel.
final class RawLevelDBSystem: BenchSystem {
    let name = "leveldb_raw"
    private let db: OpaquePointer
    private let cache: OpaquePointer
    private let filter: OpaquePointer
    private let readOptions: OpaquePointer
    private let writeOptions: OpaquePointer
    private let verifyChecksums: Bool
    private let brandPrefix = RawKeys.indexPrefix(1)
    private let pricePrefix = RawKeys.indexPrefix(2)
    private let objectPrefix = RawKeys.objectPrefix

    init(directory: String, configuration: Store.Configuration) throws {
        let options = leveldb_options_create()!
        defer { leveldb_options_destroy(options) }
        leveldb_options_set_create_if_missing(options, 1)
        leveldb_options_set_compression(options, Int32(configuration.compression ? leveldb_snappy_compression : leveldb_no_compression))
        cache = leveldb_cache_create_lru(configuration.blockCacheSize)!
        leveldb_options_set_cache(options, cache)
        filter = leveldb_filterpolicy_create_bloom(Int32(configuration.bloomFilterBitsPerKey))!
        leveldb_options_set_filter_policy(options, filter)
        leveldb_options_set_write_buffer_size(options, configuration.writeBufferSize)
        leveldb_options_set_max_open_files(options, Int32(configuration.maxOpenFiles))
        leveldb_options_set_block_size(options, configuration.blockSize)
        leveldb_options_set_max_file_size(options, configuration.maxFileSize)
        var error: UnsafeMutablePointer<CChar>?
        let path = directory + "/leveldb_raw"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard let opened = leveldb_open(options, path, &error) else { throw BenchError("leveldb_open: \(String(cString: error!))") }
        db = opened
        verifyChecksums = configuration.verifyChecksums
        readOptions = leveldb_readoptions_create()!
        leveldb_readoptions_set_verify_checksums(readOptions, configuration.verifyChecksums ? 1 : 0)  // as Satchel reads
        writeOptions = leveldb_writeoptions_create()!
    }

    private func check(_ error: UnsafeMutablePointer<CChar>?) throws {
        if let error {
            defer { leveldb_free(error) }
            throw BenchError(String(cString: error))
        }
    }

    private func put(_ batch: OpaquePointer, _ key: [UInt8], _ value: [UInt8]) {
        key.withUnsafeBufferPointer { k in
            value.withUnsafeBufferPointer { v in
                leveldb_writebatch_put(
                    batch, UnsafeRawPointer(k.baseAddress!).assumingMemoryBound(to: CChar.self), k.count,
                    UnsafeRawPointer(v.baseAddress ?? k.baseAddress!).assumingMemoryBound(to: CChar.self), v.count)
            }
        }
    }

    private func write(_ batch: OpaquePointer) throws {
        var error: UnsafeMutablePointer<CChar>?
        leveldb_write(db, writeOptions, batch, &error)
        try check(error)
    }

    func load(_ batch: [BenchData.Item]) throws {
        let writeBatch = leveldb_writebatch_create()!
        defer { leveldb_writebatch_destroy(writeBatch) }
        for item in batch {
            let bytes = item.attributes.jsonBytes
            put(writeBatch, RawKeys.object(item.id), bytes)
            put(writeBatch, RawKeys.indexEntry(1, item.attributes["brand"]!, id: item.id), bytes)
            put(writeBatch, RawKeys.indexEntry(2, item.attributes["price"]!, id: item.id), bytes)
        }
        try write(writeBatch)
    }

    /// The raw value bytes of an object, or nil.
    private func value(_ id: String) throws -> [UInt8]? {
        let key = RawKeys.object(id)
        var length = 0
        var error: UnsafeMutablePointer<CChar>?
        let value = key.withUnsafeBufferPointer { k in
            leveldb_get(db, readOptions, UnsafeRawPointer(k.baseAddress!).assumingMemoryBound(to: CChar.self), k.count, &length, &error)
        }
        try check(error)
        guard let value else { return nil }
        defer { leveldb_free(value) }
        return Array(UnsafeRawBufferPointer(start: value, count: length))
    }

    func get(_ id: String) throws -> Int { try value(id)?.count ?? 0 }

    /// The value read as ``get(_:)`` reads it, then decoded by Satchel's JSON parser: what a read
    /// by id costs at least while it decodes the whole object (the get child's floor).
    func getDecoded(_ id: String) throws -> Int { try value(id).map { try JSONObject(parsing: $0).count } ?? 0 }

    /// Index entries starting at `start`, within `prefix`, up to `limit`: each entry holds its
    /// object (as Satchel's value indexes do), so no further read is needed.
    private func readIndex(prefix: [UInt8], start: [UInt8], limit: Int?) throws -> Int {
        let iterator = leveldb_create_iterator(db, readOptions)!
        defer { leveldb_iter_destroy(iterator) }
        start.withUnsafeBufferPointer { leveldb_iter_seek(iterator, UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), $0.count) }
        var n = 0
        var bytes = 0
        while leveldb_iter_valid(iterator) != 0, n < limit ?? .max {
            var length = 0
            let key = UnsafeRawBufferPointer(start: leveldb_iter_key(iterator, &length), count: length)
            guard key.starts(with: prefix) else { break }
            _ = leveldb_iter_value(iterator, &length)
            bytes += length
            n += 1
            leveldb_iter_next(iterator)
        }
        return bytes > 0 ? n : 0
    }

    func findBrand(_ brand: String, limit: Int?) throws -> Int {
        let start = brandPrefix + RawKeys.value(.string(brand))
        return try readIndex(prefix: start, start: start, limit: limit)
    }

    func priceRange(from price: Int64, limit: Int) throws -> Int {
        try readIndex(prefix: pricePrefix, start: pricePrefix + RawKeys.value(.int(price)), limit: limit)
    }

    func updatePrice(_ id: String, to price: Int64) throws {
        guard let stored = try value(id) else { return }
        var attributes = try JSONObject(parsing: stored)
        let old = attributes["price"]!
        attributes["price"] = .int(price)
        let batch = leveldb_writebatch_create()!
        defer { leveldb_writebatch_destroy(batch) }
        let bytes = attributes.jsonBytes
        put(batch, RawKeys.object(id), bytes)
        // Both entries hold the object: rewrite the brand entry, move the price entry.
        put(batch, RawKeys.indexEntry(1, attributes["brand"]!, id: id), bytes)
        let oldKey = RawKeys.indexEntry(2, old, id: id)
        oldKey.withUnsafeBufferPointer {
            leveldb_writebatch_delete(batch, UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), $0.count)
        }
        put(batch, RawKeys.indexEntry(2, .int(price), id: id), bytes)
        try write(batch)
    }

    func scan() throws -> Int {
        // As Satchel scans: without filling the block cache.
        let scanOptions = leveldb_readoptions_create()!
        defer { leveldb_readoptions_destroy(scanOptions) }
        leveldb_readoptions_set_verify_checksums(scanOptions, verifyChecksums ? 1 : 0)
        leveldb_readoptions_set_fill_cache(scanOptions, 0)
        let iterator = leveldb_create_iterator(db, scanOptions)!
        defer { leveldb_iter_destroy(iterator) }
        let prefix = objectPrefix
        prefix.withUnsafeBufferPointer {
            leveldb_iter_seek(iterator, UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), $0.count)
        }
        var n = 0
        var bytes = 0
        while leveldb_iter_valid(iterator) != 0 {
            var length = 0
            let key = UnsafeRawBufferPointer(start: leveldb_iter_key(iterator, &length), count: length)
            guard key.starts(with: prefix) else { break }
            _ = leveldb_iter_value(iterator, &length)
            bytes += length
            n += 1
            leveldb_iter_next(iterator)
        }
        return bytes > 0 ? n : 0
    }

    func settle() throws { leveldb_compact_range(db, nil, 0, nil, 0) }

    func close() throws {
        leveldb_close(db)
        leveldb_readoptions_destroy(readOptions)
        leveldb_writeoptions_destroy(writeOptions)
        leveldb_filterpolicy_destroy(filter)
        leveldb_cache_destroy(cache)
    }
}

/// Checkpoints the WAL, and gathers statistics (ANALYZE) so that SQLite's planner picks the right
/// index: without them it may read `object_values` by `source_id` alone.
private func settleSQLite(_ db: SQLiteDatabase) throws {
    try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    try db.execute("ANALYZE")
}

/// Applies the settings all SQLite baselines share: WAL without fsync (LevelDB's default
/// durability: a process crash loses nothing, a machine crash may lose the last writes), and a
/// page cache the size of Satchel's block cache.
func configure(_ db: SQLiteDatabase, cacheBytes: Int) throws {
    try db.execute("PRAGMA journal_mode=WAL")
    try db.execute("PRAGMA synchronous=OFF")
    try db.execute("PRAGMA cache_size=-\(cacheBytes / 1024)")
}

/// SQLite with JSON documents: `docs(id TEXT PRIMARY KEY, body TEXT)` and expression indexes on
/// `json_extract(body, '$.brand')` and `'$.price'`, the way a Swift developer would store
/// objects in SQLite. Each object read is parsed with Satchel's own JSON parser (the fastest
/// at hand), so it hands the app what Satchel does: a parsed object.
final class SQLiteJSONSystem: BenchSystem {
    let name = "sqlite_json"
    private let db: SQLiteDatabase
    private let insert, get, brand, brandAll, range, update, scanAll: SQLiteStatement

    init(directory: String, configuration: Store.Configuration) throws {
        db = try SQLiteDatabase(path: directory + "/sqlite_json.db")
        try configure(db, cacheBytes: configuration.blockCacheSize)
        try db.execute("CREATE TABLE docs (id TEXT PRIMARY KEY NOT NULL, body TEXT NOT NULL)")
        try db.execute("CREATE INDEX docs_brand ON docs (json_extract(body, '$.brand'))")
        try db.execute("CREATE INDEX docs_price ON docs (json_extract(body, '$.price'))")
        insert = try db.prepare("INSERT INTO docs (id, body) VALUES (?, ?)")
        get = try db.prepare("SELECT body FROM docs WHERE id = ?")
        brand = try db.prepare("SELECT id, body FROM docs WHERE json_extract(body, '$.brand') = ? LIMIT ?")
        brandAll = try db.prepare("SELECT id, body FROM docs WHERE json_extract(body, '$.brand') = ?")
        range = try db.prepare("SELECT id, body FROM docs WHERE json_extract(body, '$.price') >= ? ORDER BY json_extract(body, '$.price') LIMIT ?")
        update = try db.prepare("UPDATE docs SET body = json_set(body, '$.price', ?) WHERE id = ?")
        scanAll = try db.prepare("SELECT id, body FROM docs")
    }

    func load(_ batch: [BenchData.Item]) throws {
        try db.execute("BEGIN")
        for item in batch {
            insert.bind(1, item.id)
            insert.bind(2, bytes: item.attributes.jsonBytes)
            try insert.run()
        }
        try db.execute("COMMIT")
    }

    func get(_ id: String) throws -> Int {
        defer { get.reset() }
        get.bind(1, id)
        return try get.step() ? try get.parsedObject(0).count : 0
    }

    private func rows(_ statement: SQLiteStatement) throws -> Int {
        defer { statement.reset() }
        var n = 0
        while try statement.step() {
            n += try statement.parsedObject(1).isEmpty ? 0 : 1
        }
        return n
    }

    func findBrand(_ value: String, limit: Int?) throws -> Int {
        if let limit {
            brand.bind(1, value)
            brand.bind(2, Int64(limit))
            return try rows(brand)
        }
        brandAll.bind(1, value)
        return try rows(brandAll)
    }

    func priceRange(from price: Int64, limit: Int) throws -> Int {
        range.bind(1, price)
        range.bind(2, Int64(limit))
        return try rows(range)
    }

    func updatePrice(_ id: String, to price: Int64) throws {
        update.bind(1, price)
        update.bind(2, id)
        try update.run()
    }

    func scan() throws -> Int { try rows(scanAll) }

    func settle() throws { try settleSQLite(db) }

    func close() throws {}
}

/// SQLite with RhoConnect's own client schema (`object_values`, one row per attribute, values as
/// text, its three indexes: rhoconnect-protocol.md §7.2). Reads gather every attribute of each
/// object found into an object, as the client does.
final class RhoConnectEAVSystem: BenchSystem {
    let name = "rhoconnect_eav"
    private let db: SQLiteDatabase
    private let insert, attributes, brand, brandAll, range, update, scanAll: SQLiteStatement

    init(directory: String, configuration: Store.Configuration) throws {
        db = try SQLiteDatabase(path: directory + "/rhoconnect_eav.db")
        try configure(db, cacheBytes: configuration.blockCacheSize)
        try db.execute(
            """
            CREATE TABLE object_values ("source_id" BIGINT default NULL, "attrib" varchar(255) default NULL,
              "object" varchar(255) default NULL, "value" varchar default NULL)
            """)
        try db.execute(#"CREATE INDEX by_src_id on object_values ("source_id")"#)
        try db.execute(#"CREATE UNIQUE INDEX by_src_object ON object_values ("object", "attrib", "source_id")"#)
        try db.execute(#"CREATE INDEX by_src_value ON object_values ("attrib", "source_id", "value")"#)
        insert = try db.prepare("INSERT INTO object_values (source_id, attrib, object, value) VALUES (1, ?, ?, ?)")
        attributes = try db.prepare("SELECT attrib, value FROM object_values WHERE object = ? AND source_id = 1")
        brand = try db.prepare("SELECT object FROM object_values WHERE attrib = 'brand' AND source_id = 1 AND value = ? LIMIT ?")
        brandAll = try db.prepare("SELECT object FROM object_values WHERE attrib = 'brand' AND source_id = 1 AND value = ?")
        range = try db.prepare(
            """
            SELECT object FROM object_values WHERE attrib = 'price' AND source_id = 1 AND CAST(value AS INTEGER) >= ?
            ORDER BY CAST(value AS INTEGER) LIMIT ?
            """)
        update = try db.prepare("UPDATE object_values SET value = ? WHERE object = ? AND attrib = 'price' AND source_id = 1")
        scanAll = try db.prepare("SELECT object, attrib, value FROM object_values WHERE source_id = 1 ORDER BY object")
    }

    private static func text(_ value: JSONValue) -> String {
        if case .string(let s) = value { return s }
        return value.description
    }

    func load(_ batch: [BenchData.Item]) throws {
        try db.execute("BEGIN")
        for item in batch {
            for (attribute, value) in item.attributes {
                insert.bind(1, attribute)
                insert.bind(2, item.id)
                insert.bind(3, Self.text(value))
                try insert.run()
            }
        }
        try db.execute("COMMIT")
    }

    /// Every attribute of one object, gathered into an object (RhoConnect's find by id).
    private func load(_ id: String) throws -> Int {
        defer { attributes.reset() }
        attributes.bind(1, id)
        var object = JSONObject()
        while try attributes.step() { object[attributes.text(0)] = .string(attributes.text(1)) }
        return object.count
    }

    func get(_ id: String) throws -> Int { try load(id) }

    private func objects(_ statement: SQLiteStatement) throws -> Int {
        var ids: [String] = []
        while try statement.step() { ids.append(statement.text(0)) }
        statement.reset()
        for id in ids { _ = try load(id) }
        return ids.count
    }

    func findBrand(_ value: String, limit: Int?) throws -> Int {
        if let limit {
            brand.bind(1, value)
            brand.bind(2, Int64(limit))
            return try objects(brand)
        }
        brandAll.bind(1, value)
        return try objects(brandAll)
    }

    func priceRange(from price: Int64, limit: Int) throws -> Int {
        range.bind(1, price)
        range.bind(2, Int64(limit))
        return try objects(range)
    }

    func updatePrice(_ id: String, to price: Int64) throws {
        update.bind(1, String(price))
        update.bind(2, id)
        try update.run()
    }

    func scan() throws -> Int {
        defer { scanAll.reset() }
        var n = 0
        var last = ""
        var current = JSONObject()
        while try scanAll.step() {
            let object = scanAll.text(0)
            if object != last {
                if !current.isEmpty { n += 1 }
                current = JSONObject()
                last = object
            }
            current[scanAll.text(1)] = .string(scanAll.text(2))
        }
        return current.isEmpty ? n : n + 1
    }

    func settle() throws { try settleSQLite(db) }

    func close() throws {}
}
