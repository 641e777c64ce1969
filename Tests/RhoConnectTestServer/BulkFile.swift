internal import CSQLite
import Foundation
internal import ZIPFoundation

/// Builds a bulk-data file as RhoConnect's bulk job does: a SQLite database with the client's
/// schema (`client_info`, `object_values`, `changed_values`, `sources`), zipped.
enum BulkFile {
    static let schema = """
        CREATE TABLE client_info ("client_id" VARCHAR(255) default NULL, "session" VARCHAR(255) default NULL,
          "token" VARCHAR(255) default NULL, "token_sent" BIGINT default 0, "reset" BIGINT default 0,
          "port" VARCHAR(10) default NULL, "last_sync_success" VARCHAR(100) default NULL);
        CREATE TABLE object_values ("source_id" BIGINT default NULL, "attrib" varchar(255) default NULL,
          "object" varchar(255) default NULL, "value" varchar default NULL);
        CREATE TABLE changed_values ("source_id" BIGINT default NULL, "attrib" varchar(255) default NULL,
          "object" varchar(255) default NULL, "value" varchar default NULL, "attrib_type" varchar(255) default NULL,
          "update_type" varchar(255) default NULL, "sent" BIGINT default 0);
        CREATE TABLE sources ("source_id" BIGINT PRIMARY KEY, "name" VARCHAR(255) default NULL,
          "token" BIGINT default NULL, "sync_priority" BIGINT, "partition" VARCHAR(255), "sync_type" VARCHAR(255),
          "metadata" varchar default NULL, "last_updated" BIGINT default 0, "last_inserted_size" BIGINT default 0,
          "last_deleted_size" BIGINT default 0, "last_sync_duration" BIGINT default 0,
          "last_sync_success" BIGINT default 0, "backend_refresh_time" BIGINT default 0,
          "source_attribs" varchar default NULL, "schema" varchar default NULL, "schema_version" varchar default NULL,
          "associations" varchar default NULL, "blob_attribs" varchar default NULL);
        CREATE INDEX by_src_id on object_values ("source_id");
        CREATE UNIQUE INDEX by_src_object ON object_values ("object", "attrib", "source_id");
        CREATE INDEX by_src_value ON object_values ("attrib", "source_id", "value");
        """

    /// The zipped database holding `sources` (name → objects), the entry named `entryName`.
    static func build(_ sources: [(name: String, partition: String, objects: [String: [String: String]])], entryName: String) throws -> Data {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rhoconnect-bulk-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent(entryName).path
        var handle: OpaquePointer?
        guard sqlite3_open(path, &handle) == SQLITE_OK, let db = handle else { throw FixtureError("cannot create \(path)") }
        defer { sqlite3_close(db) }
        try exec(db, schema + "\nBEGIN;")
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        var insertSource: OpaquePointer?
        var insertValue: OpaquePointer?
        sqlite3_prepare_v2(db, "INSERT INTO sources (source_id, name, partition, sync_type) VALUES (?, ?, ?, 'incremental')", -1, &insertSource, nil)
        sqlite3_prepare_v2(db, "INSERT INTO object_values (source_id, attrib, object, value) VALUES (?, ?, ?, ?)", -1, &insertValue, nil)
        defer {
            sqlite3_finalize(insertSource)
            sqlite3_finalize(insertValue)
        }
        for (index, source) in sources.enumerated() {
            let id = Int64(index + 1)
            sqlite3_bind_int64(insertSource, 1, id)
            sqlite3_bind_text(insertSource, 2, source.name, -1, transient)
            sqlite3_bind_text(insertSource, 3, source.partition, -1, transient)
            guard sqlite3_step(insertSource) == SQLITE_DONE else { throw FixtureError("insert into sources failed") }
            sqlite3_reset(insertSource)
            for (object, attributes) in source.objects {
                for (attribute, value) in attributes {
                    sqlite3_bind_int64(insertValue, 1, id)
                    sqlite3_bind_text(insertValue, 2, attribute, -1, transient)
                    sqlite3_bind_text(insertValue, 3, object, -1, transient)
                    sqlite3_bind_text(insertValue, 4, value, -1, transient)
                    guard sqlite3_step(insertValue) == SQLITE_DONE else { throw FixtureError("insert into object_values failed") }
                    sqlite3_reset(insertValue)
                }
            }
        }
        try exec(db, "COMMIT;")
        let archive = try Archive(data: Data(), accessMode: .create)
        try archive.addEntry(with: entryName, relativeTo: directory, compressionMethod: .deflate)
        guard let data = archive.data else { throw FixtureError("the zip archive has no data") }
        return data
    }

    static func exec(_ db: OpaquePointer, _ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw FixtureError(String(cString: sqlite3_errmsg(db))) }
    }
}
