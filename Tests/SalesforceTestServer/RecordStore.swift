import Foundation

/// The server's clock: the real one moved by ``advance(seconds:)``, or a frozen time.
///
/// Every write stamps ``stamp()`` — the clock at second precision, as Salesforce's
/// `LastModifiedDate` and `SystemModstamp` are — so writes within one second share a stamp.
struct ServerClock {
    /// Added to the real clock (milliseconds).
    var offset: Int64 = 0
    /// While set, the clock stands at this time.
    var frozen: Int64?

    func now() -> Int64 { frozen ?? SalesforceTime.now() + offset }

    /// The time a write stamps.
    func stamp() -> Int64 { SalesforceTime.floorSecond(now()) }

    mutating func advance(seconds: Int) {
        let delta = Int64(seconds) * SalesforceTime.second
        if let frozen { self.frozen = frozen + delta } else { offset += delta }
    }
}

/// A record as the server keeps it: every field of its object (null when unset, base64 fields
/// always null — their bytes are in ``RecordStore/blobs``), and when it was deleted.
struct StoredRecord {
    var fields: [String: JSON]
    /// When the record went to the Recycle Bin (and the delete log); nil while it lives.
    var deletedAt: Int64?
}

/// The org's data: each object's records by id (deleted ones kept, as the Recycle Bin and the
/// delete log keep them), base64 fields' bytes, the clock, and the admin's writes (the Apex /
/// data-loader view: no validation, no rules). Client writes, which are validated, are in
/// `RecordValidation.swift`.
///
/// Values are stored in their canonical form: ids in the 18-character form, datetimes as
/// `2024-05-01T10:00:00.000+0000`, dates as `2024-05-01`, `int` fields as integers, `double`,
/// `currency` and `percent` fields as decimals.
struct RecordStore {
    /// Canonical object name → schema.
    private(set) var schemas: [String: Schema]
    private let objectNames: [String: String]
    private let prefixes: [String: String]
    private(set) var records: [String: [String: StoredRecord]] = [:]
    /// `<id>/<field>` → the bytes of a base64 field.
    var blobs: [String: Data] = [:]
    var clock = ServerClock()
    private var counter = 0

    init(objects: [String: SalesforceFixture.ObjectSchema]) {
        var schemas: [String: Schema] = [:]
        var names: [String: String] = [:]
        var prefixes: [String: String] = [:]
        for (name, schema) in objects {
            schemas[name] = Schema(name: name, schema)
            names[name.lowercased()] = name
            prefixes[schema.keyPrefix] = name
        }
        self.schemas = schemas
        objectNames = names
        self.prefixes = prefixes
    }

    // MARK: - Lookup

    /// Deletes field `field` of `object` from its schema (its values are no longer served).
    mutating func removeField(_ object: String, _ field: String) {
        guard let name = objectNames[object.lowercased()], let schema = schemas[name] else { return }
        schemas[name] = schema.removing(field)
    }

    /// The schema of `name`, whatever its case.
    func schema(_ name: String) -> Schema? { objectNames[name.lowercased()].flatMap { schemas[$0] } }

    /// The object an id belongs to, by its key prefix.
    func object(ofID id: String) -> String? { prefixes[SalesforceID.prefix(id)] }

    /// The record `id` of `object`, live or deleted (`id` in canonical form).
    func record(_ object: String, _ id: String) -> StoredRecord? { records[object]?[id] }

    /// The live records of `object`, by id (creation order for the ids the server makes);
    /// `deleted` adds those in the Recycle Bin (15 days), as `queryAll` sees them.
    func rows(_ object: String, deleted: Bool = false) -> [(id: String, fields: [String: JSON])] {
        let horizon = clock.now() - 15 * SalesforceTime.day
        return (records[object] ?? [:])
            .filter { $0.value.deletedAt == nil || (deleted && $0.value.deletedAt! >= horizon) }
            .sorted { $0.key < $1.key }
            .map { ($0.key, $0.value.fields) }
    }

    // MARK: - Writing (no checks)

    /// A new id for `object`, in creation order.
    mutating func newID(_ schema: Schema) -> String {
        while true {
            counter += 1
            let id = SalesforceID.make(prefix: schema.keyPrefix, number: counter)
            if record(schema.name, id) == nil { return id }
        }
    }

    /// A record with every field null but `Id` and `IsDeleted`, and the defaults a create fills
    /// in (checkboxes false, a picklist's default value).
    func blank(_ schema: Schema, id: String) -> [String: JSON] {
        var fields: [String: JSON] = [:]
        for field in schema.fields {
            if field.type == "boolean" {
                fields[field.name] = .bool(false)
            } else if let value = field.picklistValues.first(where: { $0.defaultValue && $0.active }), field.type == "picklist" {
                fields[field.name] = .string(value.value)
            } else {
                fields[field.name] = .null
            }
        }
        fields["Id"] = .string(id)
        return fields
    }

    /// Stores `fields` as the record `id` (live), computing its formula fields.
    mutating func put(_ schema: Schema, _ id: String, _ fields: [String: JSON]) {
        var fields = fields
        for field in schema.fields where field.calculated {
            guard let terms = field.formulaSum else { continue }
            let numbers = terms.compactMap { fields[schema.field($0)?.name ?? $0]?.number }
            fields[field.name] = numbers.isEmpty ? .null : .double(numbers.reduce(0, +))
        }
        records[schema.name, default: [:]][id] = StoredRecord(fields: fields, deletedAt: nil)
    }

    /// Sends the record to the Recycle Bin and the delete log, stamped now (its
    /// `SystemModstamp` too: `getDeleted`'s `deletedDate` is it).
    mutating func markDeleted(_ object: String, _ id: String) {
        guard var record = records[object]?[id], record.deletedAt == nil else { return }
        let now = clock.stamp()
        record.deletedAt = now
        record.fields["IsDeleted"] = .bool(true)
        record.fields["SystemModstamp"] = .string(SalesforceTime.format(now))
        records[object]?[id] = record
    }

    /// A base64 field's bytes.
    func blob(_ id: String, _ field: String) -> Data? { blobs["\(id)/\(field)"] }

    mutating func setBlob(_ id: String, _ field: String, _ data: Data?) { blobs["\(id)/\(field)"] = data }

    // MARK: - The admin's writes

    /// Creates (or replaces) a record as an admin would: `id`, else the JSON's `Id`, else a new
    /// one; values converted to their field's type where they can be and stored as given where
    /// not; unknown fields ignored; stamped now unless `keepStamps` and the JSON carries stamps
    /// (fixture records). Returns the id ("" for an unknown object).
    mutating func adminInsert(_ objectName: String, _ body: JSONObject, id: String?, keepStamps: Bool) -> String {
        guard let schema = schema(objectName) else { return "" }
        let given = id ?? body["Id"]?.string ?? body["id"]?.string
        let recordID = given.flatMap(SalesforceID.canonical) ?? given ?? newID(schema)
        var fields = blank(schema, id: recordID)
        for (key, value) in body.members {
            guard let field = schema.field(key), field.name != "Id" else { continue }
            if field.type == "base64" {
                setBlob(recordID, field.name, value.string.flatMap { Data(base64Encoded: $0) })
                continue
            }
            fields[field.name] = (try? Coercion.value(value, for: field)) ?? value
        }
        let now = JSON.string(SalesforceTime.format(clock.stamp()))
        if !keepStamps || fields["CreatedDate"]?.isNull != false { fields["CreatedDate"] = now }
        if !keepStamps || fields["LastModifiedDate"]?.isNull != false { fields["LastModifiedDate"] = keepStamps ? fields["CreatedDate"] : now }
        if !keepStamps || fields["SystemModstamp"]?.isNull != false { fields["SystemModstamp"] = keepStamps ? fields["LastModifiedDate"] : now }
        fields["IsDeleted"] = .bool(false)
        put(schema, recordID, fields)
        return recordID
    }

    /// Changes a live record as an admin would: absent fields untouched, null clears one;
    /// `LastModifiedDate` and `SystemModstamp` bumped. A missing or deleted record is left so.
    mutating func adminUpdate(_ objectName: String, _ id: String, _ body: JSONObject) {
        guard let schema = schema(objectName), let recordID = SalesforceID.canonical(id),
            var record = records[schema.name]?[recordID], record.deletedAt == nil
        else { return }
        for (key, value) in body.members {
            guard let field = schema.field(key), !Schema.systemFields.contains(field.name) else { continue }
            if field.type == "base64" {
                setBlob(recordID, field.name, value.string.flatMap { Data(base64Encoded: $0) })
                continue
            }
            record.fields[field.name] = (try? Coercion.value(value, for: field)) ?? value
        }
        let now = JSON.string(SalesforceTime.format(clock.stamp()))
        record.fields["LastModifiedDate"] = now
        record.fields["SystemModstamp"] = now
        put(schema, recordID, record.fields)
    }

    // MARK: - Reading out

    /// A record as the REST API of `version` shows it: `attributes` (unless `attributes` is
    /// false) then `fields` (all the object's by default) in order; a base64 field as the URL
    /// of its bytes.
    func render(
        _ schema: Schema, _ id: String, _ stored: [String: JSON], fields: [Schema.Field]? = nil, version: String, attributes: Bool = true
    ) -> JSONObject {
        let url = "/services/data/v\(version)/sobjects/\(schema.name)/\(id)"
        var json = JSONObject()
        if attributes { json["attributes"] = .object(["type": .string(schema.name), "url": .string(url)]) }
        for field in fields ?? schema.fields {
            if field.type == "base64" {
                json[field.name] = blob(id, field.name) == nil ? .null : .string("\(url)/\(field.name)")
            } else {
                json[field.name] = stored[field.name] ?? .null
            }
        }
        return json
    }
}
