/// The stored form of an object's attributes (the value under `(doc, model, objectId)`): compact
/// JSON of the attributes without the id, keys in byte order, no nulls.
enum StoredObject {
    static func encode(_ attributes: JSONObject, model: String, id: String) throws(SatchelError) -> [UInt8] {
        do {
            return try JSONWriter.encodeChecked(attributes)
        } catch {
            throw SatchelError(error.code, error.message, model: model, objectID: id)
        }
    }

    static func decode(_ bytes: UnsafeRawBufferPointer, model: String, id: String) throws(SatchelError) -> JSONObject {
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes.assumingMemoryBound(to: UInt8.self))
        } catch {
            throw SatchelError(.corruption, "object '\(id)' of model '\(model)' does not decode: \(error.reason) at byte \(error.offset)", model: model, objectID: id)
        }
        guard case .object(let object) = value else {
            throw SatchelError(.corruption, "object '\(id)' of model '\(model)' is not a JSON object", model: model, objectID: id)
        }
        return object
    }
}
