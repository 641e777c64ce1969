import Foundation
public import Satchel

/// How Satchel's objects map onto Kinto records, both ways. This file owns the wire layout of a
/// record; the adapter and the tests that look at the server directly both go through it.
///
/// **Ids.** Kinto accepts record (and collection) ids matching `^[a-zA-Z0-9][a-zA-Z0-9_-]*$`.
/// Any other id is sent as `x--` followed by the unpadded base64url encoding (RFC 4648 §5) of its
/// UTF-8 bytes, which uses only `A-Z a-z 0-9 - _`: `"bad id"` ↔ `"x--YmFkIGlk"`. So is an id
/// that matches but is itself such an encoding (the id `x--YmFkIGlk` travels encoded again);
/// every other id that matches travels as it is, `x--` or not. The mapping is one-to-one both
/// ways: a record id another client wrote (`x--notb64`, or `x--YQ`, which `a` would never
/// travel as) is the object's id as it is, and goes back unchanged.
///
/// **Attributes.** A record's `id` is the object's id (Satchel's `object` attribute), its
/// `last_modified` the object's version. Satchel attributes named `id`, `last_modified` or
/// `deleted` (Kinto's words: `deleted: true` marks a tombstone), and any name starting with
/// `~`, travel with one more `~` in front (`id` ↔ `~id`, `~x` ↔ `~~x`); a field starting with
/// `~` loses one on the way back. A field named `object` (Satchel's id attribute, which no
/// attribute may be named) reads as the attribute `~object`, which goes back as `object`. A field
/// that no attribute travels as (another client's `~x`, `~object` or `~~object`) is not read:
/// read as `x` it would overwrite the field `x`. It stays on the server: an update that removes
/// attributes never replaces the record whole.
///
/// **Attachments.** A model's blob attribute (at most one) is the record's attachment (the
/// kinto-attachment plugin's field `attachment`), read as the file's URL; a model that declares
/// none reads it as the attribute `attachment`.
///
/// **Removed attributes.** An attribute removed here is absent from the record there (the
/// adapter replaces the record, or sends a JSON Patch). A `null` field another client wrote
/// reads as no attribute (Satchel never stores nulls), and a record whose fields are all `null`
/// reads as a deleted object.
public enum KintoMapping {
    /// The prefix of encoded ids.
    static let encodedPrefix = "x--"

    /// The Kinto id for a Satchel object id (or model name).
    public static func recordID(_ id: String) -> String {
        // `objectID(id) != id` only for an encoding this function makes, of a shorter id.
        if isPlainKintoID(id) && objectID(id) == id { return id }
        var encoded = Data(id.utf8).base64EncodedString()
        encoded = encoded.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while encoded.hasSuffix("=") { encoded.removeLast() }
        return encodedPrefix + encoded
    }

    /// The Satchel object id for a Kinto record id.
    public static func objectID(_ recordID: String) -> String {
        guard recordID.hasPrefix(encodedPrefix) else { return recordID }
        var base64 = String(recordID.dropFirst(encodedPrefix.count))
        base64 = base64.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64), let id = String(data: data, encoding: .utf8), Self.recordID(id) == recordID else {
            return recordID
        }
        return id
    }

    /// Whether `id` is a valid Kinto id as it is.
    static func isPlainKintoID(_ id: String) -> Bool {
        guard let first = id.utf8.first, isAlphanumeric(first) else { return false }
        return id.utf8.allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    static let reserved: Set<String> = ["id", "last_modified", "deleted"]

    /// The attribute a record's field `object` reads as: `object` is Satchel's id attribute.
    static let objectField = "~object"

    /// The record field for a Satchel attribute.
    public static func field(_ attribute: String) -> String {
        if attribute == objectField { return "object" }
        return reserved.contains(attribute) || attribute.hasPrefix("~") ? "~" + attribute : attribute
    }

    /// The Satchel attribute for a record field (nil for Kinto's own fields, and for a field no
    /// attribute travels as).
    public static func attribute(_ field: String) -> String? {
        if field == "object" { return objectField }
        if field.hasPrefix("~") {
            let attribute = String(field.dropFirst())
            return Self.field(attribute).utf8.elementsEqual(field.utf8) ? attribute : nil
        }
        return reserved.contains(field) ? nil : field
    }

    /// A record's `data` for Satchel attributes (a `null` stays: it removes the attribute).
    public static func data(_ attributes: JSONObject) -> JSONObject {
        JSONObject(attributes.map { (field($0.key), $0.value) })
    }

    /// What a record of a listing is.
    public enum Record: Sendable, Hashable {
        /// A live record: the object's id, its attributes (nulls dropped) and version.
        case object(id: String, attributes: JSONObject, version: Int64)
        /// A tombstone, or a record whose fields are all null: the object is gone.
        case deleted(id: String, version: Int64)

        /// The record's `last_modified`.
        public var version: Int64 {
            switch self {
            case .object(_, _, let version), .deleted(_, let version): version
            }
        }
    }

    /// The kinto-attachment plugin's field: a record's one attachment, an object whose `location`
    /// is the file's URL (with its `filename`, `hash`, `mimetype` and `size`).
    public static let attachmentField = "attachment"

    /// Reads one record as ``record(_:)`` does, its attachment (the field `attachment` holding an
    /// object with a string `location`) read as the attribute `blobAttribute` holding the file's
    /// URL, which it returns too (nil: the record has no attachment). A field named
    /// `blobAttribute` is then overridden; `attachment` holding anything else is an attribute
    /// like any other.
    public static func record(_ value: JSONValue, attachmentAs blobAttribute: String) -> (record: Record, attachment: String?)? {
        guard let record = record(value) else { return nil }
        guard case .object(let id, var attributes, let version) = record,
            let location = value[attachmentField]?.objectValue?["location"]?.stringValue
        else { return (record, nil) }
        attributes[attachmentField] = nil
        attributes[blobAttribute] = .string(location)
        return (.object(id: id, attributes: attributes, version: version), location)
    }

    /// Reads one record of a listing or a response; nil when it lacks a string `id` or an integer
    /// `last_modified`.
    public static func record(_ value: JSONValue) -> Record? {
        guard let fields = value.objectValue, let recordID = fields["id"]?.stringValue, let version = fields["last_modified"]?.intValue else {
            return nil
        }
        let id = objectID(recordID)
        if fields["deleted"] == .bool(true) && fields.keys.allSatisfy(reserved.contains) {
            return .deleted(id: id, version: version)
        }
        let attributes = JSONObject(
            fields.compactMap { name, value in
                value.isNull ? nil : attribute(name).map { ($0, value) }
            })
        return attributes.isEmpty ? .deleted(id: id, version: version) : .object(id: id, attributes: attributes, version: version)
    }
}
