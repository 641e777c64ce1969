/// The stored form of an object (the value under `(obj, model, objectId)`), one of two:
///
/// - `{…}`: compact JSON of the attributes without the id, keys in byte order, no nulls;
/// - `01` *version* `00` `{…}`: the same, after the object's version on the server (compact JSON
///   of what the adapter gave), for a synced object whose version the sync engine knows.
///
/// JSON text never holds a `00` byte and a stored object's JSON starts with `{`, so the first
/// byte tells the forms apart and the first `00` ends the version. Keeping the version in the
/// object's own record makes a pulled object one key, not two: the separate version record
/// (`ver`) is kept for an object that is gone while its version is still needed (a local delete
/// waiting to be pushed, whose base it is) and for an object made here, whose version comes with
/// its push's result (not worth writing the whole object again), and is read for an object whose
/// record carries no version (those, and one an earlier format stored so). Index entries that
/// store objects copy the attributes' JSON only.
enum StoredObject {
    /// The first byte of a record that carries a version.
    static let versionMark: UInt8 = 0x01
    static let versionEnd: UInt8 = 0x00

    /// The attributes' JSON (what index entries copy).
    static func encode(_ attributes: JSONObject, model: String, id: String) throws(SatchelError) -> [UInt8] {
        do {
            return try JSONWriter.encodeChecked(attributes)
        } catch {
            throw SatchelError(error.code, error.message, model: model, objectID: id)
        }
    }

    /// The record of attributes encoded as `json`, carrying `version` (its compact JSON) when
    /// given.
    static func record(json: [UInt8], version: [UInt8]?) -> [UInt8] {
        guard let version else { return json }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(version.count + json.count + 2)
        bytes.append(versionMark)
        bytes.append(contentsOf: version)
        bytes.append(versionEnd)
        bytes.append(contentsOf: json)
        return bytes
    }

    /// The record's two parts: its version's JSON (nil when it carries none) and its attributes'
    /// JSON.
    static func split(_ bytes: UnsafeRawBufferPointer, model: String, id: String) throws(SatchelError) -> (
        version: UnsafeRawBufferPointer?, attributes: UnsafeRawBufferPointer
    ) {
        guard bytes.first == versionMark else { return (nil, bytes) }
        guard let end = bytes.firstIndex(of: versionEnd) else {
            throw SatchelError(.corruption, "object '\(id)' of model '\(model)' has a version without its end", model: model, objectID: id)
        }
        return (UnsafeRawBufferPointer(rebasing: bytes[1..<end]), UnsafeRawBufferPointer(rebasing: bytes[(end + 1)...]))
    }

    /// The version's JSON a record carries (nil when none), copied.
    static func versionBytes(_ bytes: UnsafeRawBufferPointer, model: String, id: String) throws(SatchelError) -> [UInt8]? {
        try split(bytes, model: model, id: id).version.map { Array($0) }
    }

    /// The attributes' JSON of a record, copied.
    static func attributesBytes(_ bytes: UnsafeRawBufferPointer, model: String, id: String) throws(SatchelError) -> [UInt8] {
        Array(try split(bytes, model: model, id: id).attributes)
    }

    /// The version a record carries (nil when none).
    static func version(_ bytes: UnsafeRawBufferPointer, model: String, id: String) throws(SatchelError) -> JSONValue? {
        guard let version = try split(bytes, model: model, id: id).version else { return nil }
        do {
            return try JSONParser.parse(version.assumingMemoryBound(to: UInt8.self))
        } catch {
            throw SatchelError(
                .corruption, "the version of object '\(id)' of model '\(model)' does not decode: \(error.reason)", model: model, objectID: id)
        }
    }

    /// The attributes of a record (its version skipped).
    static func decode(_ bytes: UnsafeRawBufferPointer, model: String, id: String) throws(SatchelError) -> JSONObject {
        let json = try split(bytes, model: model, id: id).attributes
        let value: JSONValue
        do {
            value = try JSONParser.parse(json.assumingMemoryBound(to: UInt8.self))
        } catch {
            throw SatchelError(
                .corruption, "object '\(id)' of model '\(model)' does not decode: \(error.reason) at byte \(error.offset)", model: model, objectID: id
            )
        }
        guard case .object(let object) = value else {
            throw SatchelError(.corruption, "object '\(id)' of model '\(model)' is not a JSON object", model: model, objectID: id)
        }
        return object
    }
}
