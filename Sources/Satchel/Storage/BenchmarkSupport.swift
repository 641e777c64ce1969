/// The key bytes Satchel writes, for `satchel-bench`'s raw-LevelDB baseline ("same bytes"):
/// package-visible only, so the byte layouts still have one owner, `KeyCodec.swift`.
package enum BenchmarkSupport {
    /// `(doc, model, objectId)`.
    package static func documentKey(model: String, id: String) -> [UInt8] { Keys.document(model, id) }

    /// `(idx, model, indexId)`.
    package static func indexPrefix(model: String, indexID: Int) -> [UInt8] { Keys.indexPrefix(model, indexID) }

    /// `(idx, model, indexId, value, objectId)`: a one-field value index entry.
    package static func indexEntry(model: String, indexID: Int, value: JSONValue, id: String) -> [UInt8] {
        Keys.indexValueEntry(Keys.indexPrefix(model, indexID), values: [value], objectID: id)
    }

    /// The encoding of one value, to append to a prefix.
    package static func valueBytes(_ value: JSONValue) -> [UInt8] { KeyEncoder.valueBytes(value) }

    /// The object id at the end of a one-field index entry.
    package static func objectID(fromIndexEntry key: UnsafeRawBufferPointer, prefixLength: Int) throws -> String {
        try Keys.objectID(fromIndexEntry: key, prefixLength: prefixLength, valueCount: 1)
    }

    /// The smallest key after every key that starts with `prefix`.
    package static func prefixEnd(_ prefix: [UInt8]) -> [UInt8] { Keys.prefixEnd(prefix) }
}
