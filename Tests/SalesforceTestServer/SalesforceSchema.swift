import Foundation

/// An sObject as the server knows it: the fixture's describe plus the system fields every
/// object has, with Salesforce's case-insensitive lookup of field names, and its describe JSON.
struct Schema: Sendable {
    typealias Field = SalesforceFixture.Field

    let name: String
    let label: String
    let keyPrefix: String
    let createable, updateable, deletable, queryable: Bool
    /// `Id`, `IsDeleted`, the fixture's fields, `CreatedDate`, `LastModifiedDate`, `SystemModstamp`.
    private(set) var fields: [Field]
    private var positions: [String: Int]

    /// The system fields, maintained by the server alone.
    static let systemFields: Set<String> = ["Id", "IsDeleted", "CreatedDate", "LastModifiedDate", "SystemModstamp"]

    init(name: String, _ schema: SalesforceFixture.ObjectSchema) {
        self.name = name
        label = schema.label ?? name
        keyPrefix = schema.keyPrefix
        createable = schema.createable
        updateable = schema.updateable
        deletable = schema.deletable
        queryable = schema.queryable
        func system(_ name: String, _ type: String, label: String) -> Field {
            Field(name: name, type: type, label: label, createable: false, updateable: false, nillable: false, defaultedOnCreate: true)
        }
        let own = schema.fields.filter { field in !Self.systemFields.contains { $0.caseInsensitiveCompare(field.name) == .orderedSame } }
        fields =
            [system("Id", "id", label: "Record ID"), system("IsDeleted", "boolean", label: "Deleted")] + own + [
                system("CreatedDate", "datetime", label: "Created Date"),
                system("LastModifiedDate", "datetime", label: "Last Modified Date"),
                system("SystemModstamp", "datetime", label: "System Modstamp"),
            ]
        var positions: [String: Int] = [:]
        for (index, field) in fields.enumerated() { positions[field.name.lowercased()] = index }
        self.positions = positions
    }

    /// The field called `name`, whatever its case.
    /// The schema without field `name`, as an admin's deletion of the field leaves it.
    func removing(_ name: String) -> Schema {
        var copy = self
        copy.fields.removeAll { $0.name.caseInsensitiveCompare(name) == .orderedSame }
        copy.positions = [:]
        for (index, field) in copy.fields.enumerated() { copy.positions[field.name.lowercased()] = index }
        return copy
    }

    func field(_ name: String) -> Field? { positions[name.lowercased()].map { fields[$0] } }

    /// The first base64 field (`Body`, `VersionData`), where fixture files go.
    var blobField: Field? { fields.first { $0.type == "base64" } }

    // MARK: - Picklists

    /// Whether `value` of the dependent picklist `field` is valid when its controller holds
    /// `controller`: bit *i* of the value's `validFor` (MSB first) for the controller's *i*-th
    /// value (a checkbox: 0 is false, 1 is true). A value with no `validFor` is valid for none.
    func isValid(_ value: String, of field: Field, controller: JSON) -> Bool {
        guard let controllerName = field.controllerName, let controllerField = self.field(controllerName) else { return true }
        let index: Int?
        if controllerField.type == "boolean" {
            index = controller.bool == true ? 1 : 0
        } else {
            index = controller.string.flatMap { current in controllerField.picklistValues.firstIndex { $0.value == current } }
        }
        guard let index, let entry = field.picklistValues.first(where: { $0.value == value }),
            let bytes = entry.validFor.flatMap({ Data(base64Encoded: $0) }), index / 8 < bytes.count
        else { return false }
        return bytes[index / 8] & (0x80 >> (index % 8)) != 0
    }

    // MARK: - Describe

    /// The object's `describe` as `GET /sobjects/O/describe` answers it.
    func describe(version: String, children: [(object: String, field: Field)]) -> JSON {
        let base = "/services/data/v\(version)/sobjects/\(name)"
        var json: JSONObject = [
            "name": .string(name), "label": .string(label), "labelPlural": .string(label + "s"),
            "keyPrefix": .string(keyPrefix), "custom": .bool(name.hasSuffix("__c")),
            "createable": .bool(createable), "updateable": .bool(updateable), "deletable": .bool(deletable),
            "queryable": .bool(queryable), "retrieveable": .bool(true), "replicateable": .bool(true),
            "searchable": .bool(true), "undeletable": .bool(deletable), "layoutable": .bool(true),
        ]
        json["fields"] = .array(fields.map(describe))
        json["childRelationships"] = .array(
            children.map { child in
                .object([
                    "childSObject": .string(child.object), "field": .string(child.field.name),
                    "relationshipName": .string(child.object.hasSuffix("__c") ? String(child.object.dropLast(3)) + "s__r" : child.object + "s"),
                    "cascadeDelete": .bool(false), "restrictedDelete": .bool(false),
                ])
            })
        json["recordTypeInfos"] = .array([])
        json["urls"] = .object([
            "sobject": .string(base), "describe": .string(base + "/describe"), "rowTemplate": .string(base + "/{ID}"),
        ])
        return .object(json)
    }

    private func describe(_ field: Field) -> JSON {
        var json: JSONObject = [
            "name": .string(field.name), "label": .string(field.label), "type": .string(field.type),
            "soapType": .string(Self.soapType(field.type)), "length": .int(Int64(field.length)),
            "byteLength": .int(Int64(field.length * 3)), "precision": .int(["double", "currency", "percent"].contains(field.type) ? 18 : 0),
            "scale": .int(["double", "currency", "percent"].contains(field.type) ? 2 : 0),
            "digits": .int(field.type == "int" ? 9 : 0),
            "nillable": .bool(field.nillable), "createable": .bool(field.createable), "updateable": .bool(field.updateable),
            "calculated": .bool(field.calculated), "calculatedFormula": .null, "defaultedOnCreate": .bool(field.defaultedOnCreate),
            "defaultValue": .null, "externalId": .bool(field.externalId), "idLookup": .bool(field.name == "Id" || field.externalId),
            "unique": .bool(field.unique), "custom": .bool(field.name.hasSuffix("__c")),
            "nameField": .bool(field.name == "Name"), "autoNumber": .bool(false), "caseSensitive": .bool(false),
            "htmlFormatted": .bool(false), "filterable": .bool(field.type != "textarea" && field.type != "base64"),
            "sortable": .bool(!["textarea", "base64", "multipicklist"].contains(field.type)),
            "groupable": .bool(!["textarea", "base64", "multipicklist", "double", "currency", "percent", "datetime"].contains(field.type)),
            "referenceTo": .array(field.referenceTo.map(JSON.string)),
            "relationshipName": field.relationshipName.map(JSON.string) ?? .null,
            "controllerName": field.controllerName.map(JSON.string) ?? .null,
            "dependentPicklist": .bool(field.dependentPicklist), "restrictedPicklist": .bool(field.restrictedPicklist),
        ]
        json["picklistValues"] = .array(
            field.picklistValues.map { value in
                .object([
                    "active": .bool(value.active), "defaultValue": .bool(value.defaultValue), "label": .string(value.label),
                    "validFor": value.validFor.map(JSON.string) ?? .null, "value": .string(value.value),
                ])
            })
        return .object(json)
    }

    static func soapType(_ type: String) -> String {
        switch type {
        case "id", "reference": "tns:ID"
        case "boolean": "xsd:boolean"
        case "int": "xsd:int"
        case "double", "currency", "percent": "xsd:double"
        case "date": "xsd:date"
        case "datetime": "xsd:dateTime"
        case "base64": "xsd:base64Binary"
        default: "xsd:string"
        }
    }
}
