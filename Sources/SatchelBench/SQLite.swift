import CSQLite
import Foundation
import Satchel

/// Just enough of SQLite's C API for the baselines: a connection and prepared statements.
final class SQLiteDatabase {
    private(set) var handle: OpaquePointer?

    init(path: String) throws {
        guard sqlite3_open(path, &handle) == SQLITE_OK else { throw BenchError("sqlite3_open: \(message)") }
    }

    deinit { sqlite3_close(handle) }

    var message: String { String(cString: sqlite3_errmsg(handle)) }

    func execute(_ sql: String) throws {
        var error: UnsafeMutablePointer<CChar>?
        guard sqlite3_exec(handle, sql, nil, nil, &error) == SQLITE_OK else {
            let text = error.map { String(cString: $0) } ?? message
            sqlite3_free(error)
            throw BenchError("\(sql): \(text)")
        }
    }

    func prepare(_ sql: String) throws -> SQLiteStatement { try SQLiteStatement(self, sql) }
}

/// SQLITE_TRANSIENT: SQLite copies bound text before the call returns.
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

final class SQLiteStatement {
    private var statement: OpaquePointer?
    private let database: SQLiteDatabase

    init(_ database: SQLiteDatabase, _ sql: String) throws {
        self.database = database
        guard sqlite3_prepare_v2(database.handle, sql, -1, &statement, nil) == SQLITE_OK else {
            throw BenchError("prepare \(sql): \(database.message)")
        }
    }

    deinit { sqlite3_finalize(statement) }

    func reset() {
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
    }

    func bind(_ index: Int32, _ text: String) {
        sqlite3_bind_text(statement, index, text, -1, transient)
    }

    func bind(_ index: Int32, bytes: [UInt8]) {
        _ = bytes.withUnsafeBufferPointer { b in
            sqlite3_bind_text(statement, index, UnsafeRawPointer(b.baseAddress)?.assumingMemoryBound(to: CChar.self), Int32(b.count), transient)
        }
    }

    func bind(_ index: Int32, _ value: Int64) { sqlite3_bind_int64(statement, index, value) }

    /// Steps once: true while a row is available.
    func step() throws -> Bool {
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw BenchError("step: \(database.message)")
        }
    }

    /// Runs a statement that returns no rows.
    func run() throws {
        _ = try step()
        reset()
    }

    func text(_ column: Int32) -> String {
        guard let p = sqlite3_column_text(statement, column) else { return "" }
        return String(cString: p)
    }

    /// The byte length of a text column (reading it without building a String).
    func textLength(_ column: Int32) -> Int {
        _ = sqlite3_column_text(statement, column)
        return Int(sqlite3_column_bytes(statement, column))
    }

    func int(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }

    /// A text column parsed as a JSON object, straight from SQLite's buffer.
    func parsedObject(_ column: Int32) throws -> JSONObject {
        guard let p = sqlite3_column_text(statement, column) else { return JSONObject() }
        let count = Int(sqlite3_column_bytes(statement, column))
        return try JSONObject(parsing: UnsafeBufferPointer(start: p, count: count))
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
