import CLevelDB
import Foundation

/// Every key and value of one partition of a store, read with LevelDB's C API underneath
/// Satchel: what a killed run left, before a Satchel open could finish its work (an open resumes
/// an interrupted migration).
enum RawStore {
    static func records(_ store: String, partition: String = "user") throws -> [(key: [UInt8], value: [UInt8])] {
        let options = leveldb_options_create()!
        defer { leveldb_options_destroy(options) }
        leveldb_options_set_create_if_missing(options, 0)
        var error: UnsafeMutablePointer<CChar>?
        let db = leveldb_open(options, store + "/" + partition, &error)
        if let error {
            defer { leveldb_free(error) }
            throw Finding("cannot open \(store)/\(partition) underneath Satchel: \(String(cString: error))")
        }
        defer { leveldb_close(db) }
        let read = leveldb_readoptions_create()!
        defer { leveldb_readoptions_destroy(read) }
        let iterator = leveldb_create_iterator(db, read)!
        defer { leveldb_iter_destroy(iterator) }
        var records: [(key: [UInt8], value: [UInt8])] = []
        leveldb_iter_seek_to_first(iterator)
        while leveldb_iter_valid(iterator) != 0 {
            var keyLength = 0
            var valueLength = 0
            let key = leveldb_iter_key(iterator, &keyLength)!
            let value = leveldb_iter_value(iterator, &valueLength)!
            records.append(
                (
                    Array(UnsafeRawBufferPointer(start: key, count: keyLength)),
                    Array(UnsafeRawBufferPointer(start: value, count: valueLength))
                ))
            leveldb_iter_next(iterator)
        }
        return records
    }
}
