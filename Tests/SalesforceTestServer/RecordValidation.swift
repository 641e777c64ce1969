import Foundation
import LoopbackSupport

/// How a value in a request body becomes a field's value, as Salesforce's JSON reader does it:
/// lenient where Salesforce is (`"12"` into an `int`, `12` into a text field, `"true"` into a
/// checkbox, an empty string into a text field is null), and a `JSON_PARSER_ERROR` for the whole
/// call where it is not (`"abc"` into a number, an array anywhere but a field that is none).
enum Coercion {
    typealias Field = SalesforceFixture.Field

    static let textTypes: Set<String> = [
        "string", "textarea", "picklist", "multipicklist", "email", "phone", "url", "combobox", "encryptedstring",
    ]

    static func value(_ value: JSON, for field: Field) throws(APIError) -> JSON {
        if value.isNull { return .null }
        switch field.type {
        case "boolean":
            if let bool = value.bool { return .bool(bool) }
            if let text = value.string?.lowercased(), text == "true" || text == "false" { return .bool(text == "true") }
        case "int":
            if case .int = value { return value }
            if case .double(let number) = value, number == number.rounded(), abs(number) < 9e18 { return .int(Int64(number)) }
            if let text = value.string, let number = Int64(text.trimmingCharacters(in: .whitespaces)) { return .int(number) }
        case "double", "currency", "percent":
            if let number = value.number { return .double(number) }
            if let text = value.string, let number = Double(text.trimmingCharacters(in: .whitespaces)), number.isFinite {
                return .double(number)
            }
        case "date":
            if let text = value.string {
                if let days = SalesforceTime.parseDate(text) { return .string(SalesforceTime.formatDate(days: days)) }
                if let instant = SalesforceTime.parse(text) {
                    return .string(SalesforceTime.formatDate(days: SalesforceTime.floorDays(instant)))
                }
            }
        case "datetime":
            if let text = value.string {
                // A time without a zone is taken as UTC.
                if let instant = SalesforceTime.parse(text) ?? SalesforceTime.parse(text + "Z") {
                    return .string(SalesforceTime.format(instant))
                }
                if let days = SalesforceTime.parseDate(text) { return .string(SalesforceTime.format(days * SalesforceTime.day)) }
            }
        case "id", "reference":
            if let text = value.string { return text.isEmpty ? .null : .string(SalesforceID.canonical(text) ?? text) }
        case "base64":
            if let text = value.string, Data(base64Encoded: text) != nil { return value }
        default:
            switch value {
            case .string(let text): return text.isEmpty ? .null : value
            case .int(let number): return .string(String(number))
            case .double(let number): return .string(number.description)
            case .bool(let bool): return .string(bool ? "true" : "false")
            default: break
            }
        }
        throw APIError.jsonParser(
            "Cannot deserialize instance of \(javaType(field.type)) from \(token(value)) value \(value.string ?? value.text) or request may be missing a required field"
        )
    }

    private static func javaType(_ type: String) -> String {
        switch type {
        case "boolean": "boolean"
        case "int": "int"
        case "double", "currency", "percent": "double"
        case "date": "date"
        case "datetime": "datetime"
        case "base64": "base64"
        case "id", "reference": "reference"
        default: "string"
        }
    }

    private static func token(_ value: JSON) -> String {
        switch value {
        case .null: "VALUE_NULL"
        case .bool(let bool): bool ? "VALUE_TRUE" : "VALUE_FALSE"
        case .int: "VALUE_NUMBER_INT"
        case .double: "VALUE_NUMBER_FLOAT"
        case .string: "VALUE_STRING"
        case .array: "START_ARRAY"
        case .object: "START_OBJECT"
        }
    }
}

/// A record's fields as a client write gives them: each resolved to its field (whatever the
/// case the client wrote it in) and converted to the field's type.
struct Changes {
    var values: [(field: Schema.Field, value: JSON)] = []

    /// Reads a record of a request body; members named in `skipping` (lower-cased: `attributes`,
    /// and an update's `id`) are not fields. An unknown field or a value of the wrong type fails
    /// the whole call, as Salesforce's deserializer does.
    init(_ body: JSONObject, _ schema: Schema, skipping: Set<String>) throws(APIError) {
        for (key, value) in body.members where !skipping.contains(key.lowercased()) {
            guard let field = schema.field(key) else { throw .noSuchColumn(key, schema.name) }
            values.append((field, try Coercion.value(value, for: field)))
        }
    }

    func contains(_ name: String) -> Bool { values.contains { $0.field.name == name } }
}

/// The writes of API clients: Salesforce's checks, in its order — object and field access,
/// required fields, values (ids, lengths, e-mail addresses, restricted picklists), dependent
/// picklists, references, then validation rules and triggers — each failure a
/// ``RefusedChange`` as a collection answers it.
extension RecordStore {
    typealias Rule = SalesforceFixture.Rule

    /// Creates a record; its id, or why not.
    mutating func create(_ schema: Schema, _ changes: Changes, rules: [Rule]) -> Result<String, RefusedChange> {
        guard schema.createable else { return .failure(.insufficientAccess) }
        if changes.contains("Id") { return .failure(.idOnInsert) }
        let forbidden = changes.values.filter { !$0.field.createable }.map(\.field.name)
        if !forbidden.isEmpty { return .failure(.notWritable(forbidden)) }
        var id = ""
        var fields = blank(schema, id: "")
        for (field, value) in changes.values where field.type != "base64" { fields[field.name] = value }
        let missing = schema.fields.filter { field in
            guard !field.nillable, field.createable, !field.defaultedOnCreate else { return false }
            if field.type == "base64" { return changes.values.first { $0.field.name == field.name }?.value.isNull != false }
            return fields[field.name]?.isNull != false
        }
        if !missing.isEmpty { return .failure(.requiredMissing(missing.map(\.name))) }
        if let error = check(schema, changes, record: fields, rules: rules, operation: "create", id: nil) { return .failure(error) }
        id = newID(schema)
        fields["Id"] = .string(id)
        let now = JSON.string(SalesforceTime.format(clock.stamp()))
        fields["CreatedDate"] = now
        fields["LastModifiedDate"] = now
        fields["SystemModstamp"] = now
        put(schema, id, fields)
        for (field, value) in changes.values where field.type == "base64" {
            setBlob(id, field.name, value.string.flatMap { Data(base64Encoded: $0) })
        }
        return .success(id)
    }

    /// Updates the record `id` (canonical) of `schema`: absent fields untouched, null clears one.
    mutating func update(_ schema: Schema, _ id: String, _ changes: Changes, rules: [Rule]) -> RefusedChange? {
        guard let stored = record(schema.name, id) else { return .invalidCrossReference }
        if stored.deletedAt != nil { return .entityIsDeleted }
        guard schema.updateable else { return .insufficientAccess }
        let forbidden = changes.values.filter { !$0.field.updateable }.map(\.field.name)
        if !forbidden.isEmpty { return .notWritable(forbidden) }
        let cleared = changes.values.filter { !$0.field.nillable && $0.value.isNull }.map(\.field.name)
        if !cleared.isEmpty { return .requiredMissing(cleared) }
        var fields = stored.fields
        for (field, value) in changes.values where field.type != "base64" { fields[field.name] = value }
        if let error = check(schema, changes, record: fields, rules: rules, operation: "update", id: id) { return error }
        let now = JSON.string(SalesforceTime.format(clock.stamp()))
        fields["LastModifiedDate"] = now
        fields["SystemModstamp"] = now
        put(schema, id, fields)
        for (field, value) in changes.values where field.type == "base64" {
            setBlob(id, field.name, value.string.flatMap { Data(base64Encoded: $0) })
        }
        return nil
    }

    /// Deletes the record `id` (canonical, of any object): to the Recycle Bin and the delete log.
    mutating func delete(_ id: String, rules: [Rule]) -> RefusedChange? {
        guard let object = object(ofID: id), let schema = schemas[object], let stored = record(object, id) else {
            return .invalidCrossReference
        }
        if stored.deletedAt != nil { return .entityIsDeleted }
        guard schema.deletable else { return .insufficientAccess }
        if let error = rejection(rules, "delete", schema, id: id, record: stored.fields) { return error }
        markDeleted(object, id)
        return nil
    }

    // MARK: - Checks

    /// The first failure of a create or update whose result would be `record`.
    private func check(
        _ schema: Schema, _ changes: Changes, record: [String: JSON], rules: [Rule], operation: String, id: String?
    ) -> RefusedChange? {
        for (field, value) in changes.values where !value.isNull {
            if let error = check(field, value) { return error }
        }
        for field in schema.fields where field.controllerName != nil {
            guard let controllerName = field.controllerName, let controller = schema.field(controllerName),
                changes.contains(field.name) || changes.contains(controller.name),
                let value = record[field.name]?.string
            else { continue }
            let controlling = record[controller.name] ?? .null
            let values = field.type == "multipicklist" ? value.split(separator: ";").map(String.init) : [value]
            for single in values where !schema.isValid(single, of: field, controller: controlling) {
                let shown = controlling.string ?? (controlling.bool.map { $0 ? "true" : "false" } ?? "null")
                return RefusedChange(
                    statusCode: "FIELD_INTEGRITY_EXCEPTION",
                    message:
                        "\(field.label): bad value for dependent picklist field: '\(single)' is not valid when \(controller.label) is '\(shown)'",
                    fields: [field.name])
            }
        }
        return rejection(rules, operation, schema, id: id, record: record)
    }

    /// Whether one given value suits its field.
    private func check(_ field: Schema.Field, _ value: JSON) -> RefusedChange? {
        switch field.type {
        case "reference":
            guard let text = value.string, let id = SalesforceID.canonical(text) else {
                return RefusedChange(
                    statusCode: "MALFORMED_ID", message: "\(field.label): id value of incorrect type: \(value.string ?? value.text)",
                    fields: [field.name])
            }
            guard let target = object(ofID: id), field.referenceTo.contains(target) else {
                return RefusedChange(
                    statusCode: "FIELD_INTEGRITY_EXCEPTION", message: "\(field.label): id value of incorrect type: \(text)", fields: [field.name])
            }
            guard let referenced = record(target, id) else {
                return RefusedChange(statusCode: "INVALID_CROSS_REFERENCE_KEY", message: "invalid cross reference id", fields: [field.name])
            }
            if referenced.deletedAt != nil {
                return RefusedChange(statusCode: "ENTITY_IS_DELETED", message: "entity is deleted", fields: [field.name])
            }
        case "picklist", "multipicklist":
            guard field.restrictedPicklist, let text = value.string else { break }
            let allowed = Set(field.picklistValues.filter(\.active).map(\.value))
            let values = field.type == "multipicklist" ? text.split(separator: ";").map(String.init) : [text]
            if let bad = values.first(where: { !allowed.contains($0) }) {
                return RefusedChange(
                    statusCode: "INVALID_OR_NULL_FOR_RESTRICTED_PICKLIST", message: "\(field.label): bad value for restricted picklist field: \(bad)",
                    fields: [field.name])
            }
        case "email":
            if let text = value.string, !Self.isEmail(text) {
                return RefusedChange(
                    statusCode: "INVALID_EMAIL_ADDRESS", message: "\(field.label): invalid email address: \(text)", fields: [field.name])
            }
        default: break
        }
        if Coercion.textTypes.contains(field.type), field.length > 0, let text = value.string, text.count > field.length {
            return RefusedChange(
                statusCode: "STRING_TOO_LONG", message: "\(field.label): data value too large: \(text) (max length=\(field.length))",
                fields: [field.name])
        }
        return nil
    }

    private static func isEmail(_ text: String) -> Bool {
        let parts = text.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !text.contains(" ") else { return false }
        let domain = parts[1].split(separator: ".", omittingEmptySubsequences: false)
        return domain.count >= 2 && domain.allSatisfy { !$0.isEmpty }
    }

    /// The first rule that rejects `operation` on a record (`id`: nil for a create) whose fields
    /// are `record`, as its error. A `matching` member that names no field is ignored.
    func rejection(_ rules: [Rule], _ operation: String, _ schema: Schema, id: String?, record: [String: JSON]) -> RefusedChange? {
        for rule in rules where rule.operation == operation {
            if let object = rule.object, object.caseInsensitiveCompare(schema.name) != .orderedSame { continue }
            if let ids = rule.ids, !ids.contains(where: { SalesforceID.canonical($0) == id && id != nil }) { continue }
            if let matching = rule.matching {
                guard let wanted = JSON.parse(matching)?.object else { continue }
                let matches = wanted.members.allSatisfy { key, value in
                    guard let field = schema.field(key) else { return true }
                    let expected = (try? Coercion.value(value, for: field)) ?? value
                    return (record[field.name] ?? .null) == expected
                }
                if !matches { continue }
            }
            return RefusedChange(statusCode: rule.statusCode, message: rule.message, fields: rule.fields)
        }
        return nil
    }
}
