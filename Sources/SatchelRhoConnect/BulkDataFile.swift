internal import CSQLite
import Foundation
import Satchel
import SatchelSync
internal import ZIPFoundation

/// A RhoConnect bulk-data file: a zip (`.rzip`) holding one SQLite database with the client's
/// schema, whose `sources` table names the models and whose `object_values` table holds one row
/// per (source, object, attribute). This file owns reading that layout.
enum BulkDataFile {
    /// The largest database a bulk file may unpack to (a guard against a zip bomb).
    static let maxSize: UInt64 = 4 << 30

    /// The objects of source `name` in the zipped bulk file `data`: object id → attributes (all
    /// strings), in id order.
    ///
    /// - Throws: ``SyncError`` `.protocolViolation` when the file is not a zip holding a
    ///   RhoConnect database.
    static func objects(of name: String, inZip data: Data) throws(SyncError) -> [(String, JSONObject)] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("satchel-bulk-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = directory.appendingPathComponent("bulk.sqlite")
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let archive = try Archive(data: data, accessMode: .read)
            guard let entry = archive.first(where: { $0.type == .file }) else { throw violation("the bulk file's zip holds no file") }
            guard entry.uncompressedSize <= maxSize else { throw violation("the bulk file's database is larger than \(maxSize) bytes") }
            _ = try archive.extract(entry, to: database)
        } catch let error as SyncError {
            throw error
        } catch {
            throw violation("the bulk file is not a zip archive (\(error))")
        }
        return try read(database.path, source: name)
    }

    static func violation(_ message: String) -> SyncError { SyncError(.protocolViolation, message) }

    private static func read(_ path: String, source name: String) throws(SyncError) -> [(String, JSONObject)] {
        var handle: OpaquePointer?
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READONLY, nil) == SQLITE_OK, let db = handle else {
            sqlite3_close(handle)
            throw violation("the bulk file's database cannot be opened")
        }
        defer { sqlite3_close(db) }
        func fail(_ what: String) -> SyncError {
            violation("the bulk file is not a RhoConnect database: \(what) (\(String(cString: sqlite3_errmsg(db))))")
        }
        func prepare(_ sql: String) throws(SyncError) -> OpaquePointer {
            var statement: OpaquePointer?
            guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else { throw fail(sql) }
            return statement
        }
        func text(_ statement: OpaquePointer, _ column: Int32) -> String? {
            sqlite3_column_text(statement, column).map { String(cString: $0) }
        }
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

        let lookup = try prepare("SELECT source_id FROM sources WHERE name = ?")
        defer { sqlite3_finalize(lookup) }
        sqlite3_bind_text(lookup, 1, name, -1, transient)
        guard sqlite3_step(lookup) == SQLITE_ROW else { return [] }  // the source is not in this partition's file
        let sourceID = sqlite3_column_int64(lookup, 0)

        let rows = try prepare("SELECT object, attrib, value FROM object_values WHERE source_id = ? ORDER BY object, attrib")
        defer { sqlite3_finalize(rows) }
        sqlite3_bind_int64(rows, 1, sourceID)
        var objects: [(String, JSONObject)] = []
        while true {
            let step = sqlite3_step(rows)
            if step == SQLITE_DONE { break }
            guard step == SQLITE_ROW else { throw fail("reading object_values") }
            guard let object = text(rows, 0), let attribute = text(rows, 1) else { continue }
            // A null value is no attribute (RhoConnect's absent rule).
            guard let value = text(rows, 2) else { continue }
            if objects.last?.0 != object { objects.append((object, JSONObject())) }
            objects[objects.count - 1].1[attribute] = .string(value)
        }
        return objects
    }
}
