import Foundation
public import Satchel
import SatchelSync

/// How Satchel's objects map onto Parse objects, both ways. This file owns the wire layout of a
/// Parse object; the adapter and the tests that read the server directly both go through it.
///
/// **Ids.** An object's id is its `objectId`; the server assigns it (a create carries no id) and
/// the engine renames the local object, and the references to it, when the create's answer
/// arrives.
///
/// **Values pulled** (top-level attributes):
/// - `createdAt` and `updatedAt` are kept as attributes, the exact strings sent; they are never
///   pushed.
/// - `{"__type":"Date","iso":S}` → the string `S`, verbatim.
/// - `{"__type":"Pointer","className":C,"objectId":I}` → the string `I`; the attribute becomes an
///   association to model `C`. An array of pointers → an array of ids (to-many).
/// - `{"__type":"Object","className":C,"objectId":I,…}` (an `include`d pointer, or a nested
///   object of a cloud function's answer) → the string `I`, and the object itself goes to model
///   `C` (recursively) — CRParse's decomposition. Its fields are merged into the stored object
///   (an include may carry only some, and the same object may come twice).
/// - `{"__type":"File","name":N,"url":U}` → the string `U`, a blob attribute whose bytes the
///   engine downloads from `U`.
/// - `Bytes`, `GeoPoint`, `Polygon`, `Relation`, `ACL` and any other JSON: kept as sent.
///
/// **Values pushed.** Each attribute goes back in the type the server gave it: the adapter
/// remembers, per model and attribute, that it was a `Date`, a `File` or a `Pointer` to class
/// `C` (``WireTypes``, stored with the model as the engine's server metadata), the last type it
/// sent: a value pulled without one forgets it; a model's declared association says the same.
/// A removed attribute is `{"__op":"Delete"}`.
///
/// **Names.** A field named `object` (Satchel's id attribute, which no attribute may be named)
/// reads as the attribute `~object`, which goes back as `object`.
public enum ParseMapping {
    /// Fields the server sets: never pushed.
    static let serverFields: Set<String> = ["objectId", "createdAt", "updatedAt"]
    /// The attribute a field named `object` reads as (`object` is Satchel's id attribute; a
    /// Parse field name cannot start with `~`), and goes back from.
    static let objectField = "~object"

    /// The attribute for a field.
    static func attribute(_ field: String) -> String { field == "object" ? objectField : field }

    /// The field for an attribute.
    static func field(_ attribute: String) -> String { attribute == objectField ? "object" : attribute }

    /// What the adapter remembers of an attribute's wire type.
    public enum WireType: Sendable, Hashable {
        case date
        case file
        /// A pointer (to-one) to an object of the class.
        case pointer(String)
        /// An array of pointers (to-many) to objects of the class.
        case pointers(String)

        /// The stored form: `Date`, `File`, `Pointer:C`, `Pointers:C`.
        var text: String {
            switch self {
            case .date: "Date"
            case .file: "File"
            case .pointer(let className): "Pointer:" + className
            case .pointers(let className): "Pointers:" + className
            }
        }

        init?(text: String) {
            if text == "Date" {
                self = .date
            } else if text == "File" {
                self = .file
            } else if text.hasPrefix("Pointer:"), text.count > 8 {
                self = .pointer(String(text.dropFirst(8)))
            } else if text.hasPrefix("Pointers:"), text.count > 9 {
                self = .pointers(String(text.dropFirst(9)))
            } else {
                return nil
            }
        }

        /// The class a pointer type points to.
        var target: String? {
            switch self {
            case .pointer(let className), .pointers(let className): className
            case .date, .file: nil
            }
        }
    }

    /// The wire types of one model's attributes, kept as the engine's server metadata of the
    /// model: `{"types": {"due": "Date", "customer": "Pointer:Customer"}}`.
    public struct WireTypes: Sendable, Hashable {
        public var types: [String: WireType]

        public init(_ types: [String: WireType] = [:]) { self.types = types }

        /// Reads the stored metadata (unknown entries are skipped).
        public init(metadata: JSONValue?) {
            types = [:]
            for (name, value) in metadata?["types"]?.objectValue ?? JSONObject() {
                if let text = value.stringValue, let type = WireType(text: text) { types[name] = type }
            }
        }

        public var metadata: JSONValue {
            .object(["types": .object(JSONObject(types.map { ($0.key, JSONValue.string($0.value.text)) }))])
        }

        /// The type of `attribute`, from what the server sent or, failing that, the model's
        /// declared association.
        func type(of attribute: String, in model: ModelDefinition) -> WireType? {
            if let type = types[attribute] { return type }
            if let target = model.associations[attribute] { return .pointer(target) }
            return nil
        }
    }

    // MARK: - Pulled objects

    /// A Parse object read into Satchel's terms.
    struct Decoded {
        var object: ServerObject
        /// The `updatedAt` string (the pull's keyset).
        var updatedAt: String
        /// Wire types seen in this object's attributes.
        var types: [String: WireType] = [:]
        /// Objects nested in this one (whole, with a class and an id): class → objects.
        var related: [String: [ServerObject]] = [:]
        /// Associations of the related objects' models, seen in them.
        var relatedTypes: [String: [String: WireType]] = [:]
    }

    /// Reads one object of a `results` list; nil when it is not an object with a string
    /// `objectId` (and, when `requireUpdatedAt`, a string `updatedAt`).
    static func decode(_ value: JSONValue, requireUpdatedAt: Bool = true) -> Decoded? {
        guard let fields = value.objectValue, let id = fields["objectId"]?.stringValue, !id.isEmpty else { return nil }
        let updatedAt = fields["updatedAt"]?.stringValue
        if requireUpdatedAt && updatedAt == nil { return nil }
        var decoded = Decoded(object: ServerObject(id: id, attributes: JSONObject(), isWhole: true), updatedAt: updatedAt ?? "")
        decoded.object.version = updatedAt.map(JSONValue.string)
        var attributes = JSONObject()
        for (name, field) in fields where name != "objectId" && name != "__type" && name != "className" {
            guard !field.isNull else { continue }  // a null field reads as no attribute
            let attribute = attribute(name)
            attributes[attribute] = read(field, attribute: attribute, into: &decoded)
        }
        decoded.object.attributes = attributes
        return decoded
    }

    /// One top-level field's value as Satchel stores it, noting its wire type, file URL and
    /// nested objects.
    private static func read(_ field: JSONValue, attribute: String, into decoded: inout Decoded) -> JSONValue {
        switch field {
        case .object(let object):
            switch object["__type"]?.stringValue {
            case "Date":
                guard let iso = object["iso"]?.stringValue else { return field }
                decoded.types[attribute] = .date
                return .string(iso)
            case "Pointer":
                guard let className = object["className"]?.stringValue, let id = object["objectId"]?.stringValue else { return field }
                decoded.types[attribute] = .pointer(className)
                return .string(id)
            case "Object":
                guard let className = object["className"]?.stringValue, let id = nested(object, className: className, into: &decoded) else {
                    return field
                }
                decoded.types[attribute] = .pointer(className)
                return .string(id)
            case "File":
                guard let url = object["url"]?.stringValue ?? object["name"]?.stringValue else { return field }
                decoded.types[attribute] = .file
                // Only a URL is downloaded; anything else is kept as it is (a download would
                // fail every later sync of the model).
                if isURL(.string(url)) { decoded.object.blobURLs[attribute] = url }
                return .string(url)
            default:
                return field
            }
        case .array(let elements) where !elements.isEmpty:
            // An array of pointers (or nested objects) of one class is a to-many association.
            var ids: [JSONValue] = []
            var className: String?
            for element in elements {
                guard let object = element.objectValue, let type = object["__type"]?.stringValue, type == "Pointer" || type == "Object",
                    let elementClass = object["className"]?.stringValue, className == nil || className == elementClass,
                    let id = type == "Object" ? nested(object, className: elementClass, into: &decoded) : object["objectId"]?.stringValue
                else { return field }
                className = elementClass
                ids.append(.string(id))
            }
            if let className { decoded.types[attribute] = .pointers(className) }
            return .array(ids)
        default:
            return field
        }
    }

    /// Decomposes a nested object into `decoded.related`; returns its id. Its fields are merged
    /// into what is stored of the object, never taken as all of it: an include may carry only
    /// some (`keys`), and the same object may come twice in one answer, once with fewer. What
    /// the server removed from it comes with the object's own pull.
    private static func nested(_ object: JSONObject, className: String, into decoded: inout Decoded) -> String? {
        guard var inner = decode(.object(object), requireUpdatedAt: false) else { return nil }
        inner.object.isWhole = false
        decoded.related[className, default: []].append(inner.object)
        for (model, objects) in inner.related { decoded.related[model, default: []] += objects }
        if !inner.types.isEmpty { decoded.relatedTypes[className, default: [:]].merge(inner.types) { _, new in new } }
        for (model, types) in inner.relatedTypes { decoded.relatedTypes[model, default: [:]].merge(types) { _, new in new } }
        return inner.object.id
    }

    // MARK: - Pushed attributes

    /// A date as Parse writes one, in UTC with milliseconds (`2024-05-01T08:00:00.000Z`): a day
    /// alone (`2024-05-01`) is its midnight in UTC, a time with an offset is moved to UTC (a
    /// black-box probe: both went verbatim, which a strict server refuses). Text that is no
    /// ISO 8601 date goes as it is, for the server to judge.
    static func utcISO(_ text: String) -> String {
        if text.hasSuffix("Z"), text.utf8.count == 24 { return text }  // already Parse's form
        let day = ISO8601DateFormatter()
        day.formatOptions = [.withFullDate]
        let withFraction = ISO8601DateFormatter()
        withFraction.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let whole = ISO8601DateFormatter()
        whole.formatOptions = [.withInternetDateTime]
        let date: Date?
        if text.utf8.count == 10 {
            date = day.date(from: text)
        } else {
            date = withFraction.date(from: text) ?? whole.date(from: text)
        }
        guard let date else { return text }
        return withFraction.string(from: date)
    }

    /// A pushed attribute's value on the wire: `null` → `{"__op":"Delete"}`, dates, pointers and
    /// files in their wrappers (`file` is the uploaded file's `name` and `url`).
    static func wire(
        _ value: JSONValue, attribute: String, type: WireType?, file: (name: String, url: String)? = nil
    ) -> JSONValue {
        if value.isNull { return ["__op": "Delete"] }
        if let file { return ["__type": "File", "name": .string(file.name), "url": .string(file.url)] }
        switch (type, value) {
        case (.date?, .string(let iso)):
            return ["__type": "Date", "iso": .string(utcISO(iso))]
        case (.pointer(let className)?, .string(let id)), (.pointers(let className)?, .string(let id)):
            return pointer(className, id)
        case (.pointer(let className)?, .array(let ids)), (.pointers(let className)?, .array(let ids)):
            return .array(ids.map { $0.stringValue.map { pointer(className, $0) } ?? $0 })
        case (.file?, .string(let url)):
            // A file the server already has (its URL, never downloaded here): named by its URL.
            let name = url.split(separator: "/").last.map(String.init)?.removingPercentEncoding ?? url
            return ["__type": "File", "name": .string(name), "url": .string(url)]
        default:
            return value
        }
    }

    /// The code of a change refused before it is sent because a value cannot travel in the type
    /// the server gave its attribute (``mistyped(_:blobs:model:types:)``).
    static let mistypedCode = "mistyped"
    /// The code of an update refused before it is sent because it changes only fields Parse
    /// keeps itself (``serverFields``).
    static let readOnlyCode = "readOnly"
    /// The code of a change refused before it is sent because Parse would read part of it as
    /// its own (``reserved(_:)``).
    static let reservedCode = "reserved"

    /// What of `attributes` Parse would store as something else than written, in one line (nil:
    /// nothing): a name with a dot, which Parse takes for a path into an object (`a.b` sets `b`
    /// inside `a`); an object with a member `__op`, at any depth, which Parse applies as an
    /// operator (`{"__op":"Increment","amount":5}` adds 5); or an attribute's value of a
    /// `__type` the pull reads as another value (a `Date`, `Pointer`, `Object` or `File`
    /// wrapper comes back a string), or an array of `Pointer` or `Object` wrappers of one class
    /// (it comes back the ids): whatever the pull (``read(_:attribute:into:)``) would read as
    /// another value. Sent, the next pull would bring back what Parse made of it in place of what
    /// was written (black-box probes). Other types (`GeoPoint`, `Bytes`, `Polygon`), and
    /// wrappers deeper inside a value, come back as they went.
    static func reserved(_ attributes: JSONObject) -> String? {
        for (name, value) in attributes {
            if name.contains(".") { return "\(name): Parse reads a dot in a field name as a path into an object; rename the attribute" }
            if case .array = value, pulled(value, attribute: name) != value {
                return "\(name): an array of Pointer or Object wrappers, which the next pull would read as their ids; write the ids themselves"
            }
            if let type = value["__type"]?.stringValue, pulled(value, attribute: name) != value {
                return "\(name): a \(type) wrapper, which the next pull would read as a string; write the value itself (a date's ISO text, an id)"
            }
            if holdsOperator(value) {
                return "\(name): an object in its value has a member __op, which Parse applies as an operator, not as data; rename that member"
            }
        }
        return nil
    }

    /// `value`, an attribute's, as a pull would store it.
    private static func pulled(_ value: JSONValue, attribute: String) -> JSONValue {
        var scratch = Decoded(object: ServerObject(id: "", attributes: JSONObject(), isWhole: true), updatedAt: "")
        return read(value, attribute: attribute, into: &scratch)
    }

    private static func holdsOperator(_ value: JSONValue) -> Bool {
        switch value {
        case .object(let object): object["__op"] != nil || object.contains { holdsOperator($0.value) }
        case .array(let elements): elements.contains(where: holdsOperator)
        default: false
        }
    }

    /// Why `attributes` (a change's, `blobs` the bytes of its blob references) cannot be sent:
    /// a value in an attribute the server keeps as a `File` that is neither a blob made here
    /// nor a file's URL, or in a `Date` one that is no ISO 8601 date. Sent, such a value would
    /// be a `File` naming no file, or an invalid `Date`. Nil when every value can go.
    static func mistyped(_ attributes: JSONObject, blobs: [String: Data], model: ModelDefinition, types: WireTypes) -> String? {
        for (name, value) in attributes where !value.isNull {
            switch types.type(of: name, in: model) {
            case .file?:
                if BlobStore.isReference(value) ? blobs[name] != nil : isURL(value) { continue }
                return "\(name) holds \(quoted(value)), not a file: Parse keeps a File there (write a blob, or a file's URL)"
            case .date?:
                if let text = value.stringValue, isDate(text) { continue }
                return "\(name) holds \(quoted(value)), not a date: Parse keeps a Date there (write an ISO 8601 date, 2026-01-31T09:30:00.000Z)"
            default:
                continue
            }
        }
        return nil
    }

    private static func quoted(_ value: JSONValue) -> String { String(String(decoding: value.jsonBytes, as: UTF8.self).prefix(80)) }

    /// Whether `value` is an absolute `http`/`https` URL: a file's, downloadable.
    static func isURL(_ value: JSONValue) -> Bool {
        guard let text = value.stringValue, let url = URL(string: text), let scheme = url.scheme?.lowercased() else { return false }
        return (scheme == "http" || scheme == "https") && url.host != nil
    }

    /// Whether `text` is an ISO 8601 date with a time (fractional seconds or not) or a day.
    static func isDate(_ text: String) -> Bool {
        (try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text)) != nil
            || (try? Date.ISO8601FormatStyle().parse(text)) != nil
            || (try? Date.ISO8601FormatStyle().year().month().day().parse(text)) != nil
    }

    static func pointer(_ className: String, _ id: String) -> JSONValue {
        ["__type": "Pointer", "className": .string(className), "objectId": .string(id)]
    }

    /// The body of a create or an update: every attribute but the server's own fields.
    static func body(_ attributes: JSONObject, model: ModelDefinition, types: WireTypes, files: [String: (name: String, url: String)]) -> JSONObject {
        var body = JSONObject()
        for (name, value) in attributes where !serverFields.contains(name) {
            body[field(name)] = wire(value, attribute: name, type: types.type(of: name, in: model), file: files[name])
        }
        return body
    }
}
