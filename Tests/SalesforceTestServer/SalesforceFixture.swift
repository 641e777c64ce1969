import LoopbackSupport
public import Foundation

/// What a ``SalesforceServer`` starts with, read from a JSON file in `Fixtures/salesforce`:
///
/// ```json
/// {
///   "versions": ["57.0", "58.0", "59.0"],
///   "users": {"ann": "secret"},
///   "objects": {
///     "Account": {"keyPrefix": "001", "fields": [
///       {"name": "Name", "type": "string", "nillable": false},
///       {"name": "Industry", "type": "picklist", "restrictedPicklist": true,
///        "picklistValues": [{"value": "Energy"}, {"value": "Retail"}]},
///       {"name": "Tier__c", "type": "picklist", "controllerName": "Industry",
///        "picklistValues": [{"value": "Gold", "validFor": "gAAA"}]}]}
///   },
///   "records": {"Account": [{"Id": "001Qy0000000001IAA", "Name": "Acme",
///                            "LastModifiedDate": "2024-05-01T10:00:00.000+0000"}]},
///   "files": {"00PQy0000000001MAA": "aGVsbG8="},
///   "rules": [{"object": "Account", "operation": "create", "matching": {"Name": "forbidden"},
///              "message": "That name is not allowed", "fields": ["Name"]}],
///   "queryPageSize": 2000
/// }
/// ```
///
/// Every key is optional, and so is every field attribute but `name` and `type`: a field is
/// createable, updateable and nillable unless it says otherwise, its label is its name, and a
/// picklist value's label is its value. Every object also gets the system fields `Id`,
/// `IsDeleted`, `CreatedDate`, `LastModifiedDate` and `SystemModstamp` (read-only), whether the
/// fixture lists them or not. A record may carry its `Id` and its audit stamps (kept as given:
/// fixtures have fixed times); the server assigns what it lacks. A base64 field's bytes are
/// the `files` entry of the record's `Id`. A formula field (`"calculated": true`) may say what
/// the server computes with `"formulaSum": ["FieldA", "FieldB"]` (their sum, null when all are).
public struct SalesforceFixture: Sendable {
    /// The API versions `GET /services/data/` lists; the newest is the one clients use.
    public var versions: [String] = ["57.0", "58.0", "59.0"]
    /// Username → password.
    public var users: [String: String] = ["ann": "secret", "bob": "secret"]
    /// sObject name → its describe.
    public var objects: [String: ObjectSchema] = [:]
    /// sObject name → its records, each a JSON object (which may carry its `Id`).
    public var records: [String: [Data]] = [:]
    /// The bytes of base64 fields (`Attachment.Body`, `Document.Body`, `ContentVersion.VersionData`)
    /// by record `Id`.
    public var files: [String: Data] = [:]
    /// Records per query page before `nextRecordsUrl` (Salesforce's default and maximum: 2000).
    public var queryPageSize = 2000
    public var rules: [Rule] = []

    /// One entry of a picklist's `picklistValues`.
    public struct PicklistValue: Sendable {
        public var value: String
        public var label: String
        public var active: Bool
        public var defaultValue: Bool
        /// For a dependent picklist: base64 bytes whose bit *i* (MSB first: byte `i / 8`, mask
        /// `0x80 >> (i % 8)`) says the value is valid when the controller has its *i*-th value
        /// (a checkbox controller: index 0 is `false`, 1 is `true`).
        public var validFor: String?

        public init(_ value: String, label: String? = nil, active: Bool = true, defaultValue: Bool = false, validFor: String? = nil) {
            self.value = value
            self.label = label ?? value
            self.active = active
            self.defaultValue = defaultValue
            self.validFor = validFor
        }
    }

    /// A field of a describe.
    public struct Field: Sendable {
        public var name: String
        /// `id`, `string`, `textarea`, `double`, `int`, `currency`, `percent`, `boolean`, `date`,
        /// `datetime`, `picklist`, `multipicklist`, `reference`, `base64`, `email`, `phone`, `url`.
        public var type: String
        public var label: String
        public var createable: Bool
        public var updateable: Bool
        public var nillable: Bool
        /// A formula field: computed by the server, neither createable nor updateable.
        public var calculated: Bool
        /// For a formula field, what the server computes: a JSON number of the record's sum of
        /// these fields' values (a test stand-in for Salesforce's formula language); nil: null.
        public var formulaSum: [String]?
        /// The objects a reference field may point at.
        public var referenceTo: [String]
        public var relationshipName: String?
        /// For a dependent picklist: the field that controls it.
        public var controllerName: String?
        public var dependentPicklist: Bool
        public var restrictedPicklist: Bool
        public var picklistValues: [PicklistValue]
        /// The most characters a text value may have (0: no limit).
        public var length: Int
        /// Given a value on create when the create carries none (checkboxes, default picklist values).
        public var defaultedOnCreate: Bool
        /// An external id: `PATCH /sobjects/O/<field>/<value>` upserts by it.
        public var externalId: Bool
        public var unique: Bool

        public init(
            name: String, type: String, label: String? = nil, createable: Bool = true, updateable: Bool = true,
            nillable: Bool? = nil, calculated: Bool = false, formulaSum: [String]? = nil, referenceTo: [String] = [],
            relationshipName: String? = nil, controllerName: String? = nil, dependentPicklist: Bool? = nil,
            restrictedPicklist: Bool = false, picklistValues: [PicklistValue] = [], length: Int? = nil,
            defaultedOnCreate: Bool? = nil, externalId: Bool = false, unique: Bool = false
        ) {
            self.name = name
            self.type = type
            self.label = label ?? name
            self.createable = createable && !calculated
            self.updateable = updateable && !calculated
            // A checkbox is never null: it is false.
            self.nillable = nillable ?? (type != "boolean")
            self.calculated = calculated
            self.formulaSum = formulaSum
            self.referenceTo = referenceTo
            self.relationshipName = relationshipName ?? (type == "reference" ? Self.relationship(of: name) : nil)
            self.controllerName = controllerName
            self.dependentPicklist = dependentPicklist ?? (controllerName != nil)
            self.restrictedPicklist = restrictedPicklist
            self.picklistValues = picklistValues
            self.length = length ?? Self.defaultLength(type)
            self.defaultedOnCreate = defaultedOnCreate ?? (type == "boolean" || picklistValues.contains { $0.defaultValue })
            self.externalId = externalId
            self.unique = unique
        }

        /// `AccountId` → `Account`, `Parent__c` → `Parent__r`.
        static func relationship(of name: String) -> String? {
            if name.hasSuffix("__c") { return String(name.dropLast(3)) + "__r" }
            if name.count > 2, name.hasSuffix("Id") { return String(name.dropLast(2)) }
            return nil
        }

        static func defaultLength(_ type: String) -> Int {
            switch type {
            case "id", "reference": 18
            case "string", "picklist", "url": 255
            case "email": 80
            case "phone": 40
            case "multipicklist": 4099
            case "textarea": 255
            default: 0
            }
        }
    }

    /// An sObject's describe: its key prefix (the first three characters of its ids), its
    /// fields and what may be done with it.
    public struct ObjectSchema: Sendable {
        public var keyPrefix: String
        public var label: String?
        public var fields: [Field]
        public var createable: Bool
        public var updateable: Bool
        public var deletable: Bool
        public var queryable: Bool

        public init(
            keyPrefix: String, label: String? = nil, fields: [Field], createable: Bool = true, updateable: Bool = true,
            deletable: Bool = true, queryable: Bool = true
        ) {
            self.keyPrefix = keyPrefix
            self.label = label
            self.fields = fields
            self.createable = createable
            self.updateable = updateable
            self.deletable = deletable
            self.queryable = queryable
        }
    }

    /// A validation rule or trigger that rejects some writes: `operation` (`create`, `update` or
    /// `delete`) on `object` (nil: any object), restricted to the records `ids` and to records
    /// that carry every field value of `matching` (a JSON object; for a create, the record being
    /// created; for an update, the record as the update leaves it; for a delete, the stored
    /// record). The write fails with `statusCode`, `message` and `fields`.
    public struct Rule: Sendable {
        public var object: String?
        public var operation: String
        public var ids: [String]?
        public var matching: Data?
        public var statusCode = "FIELD_CUSTOM_VALIDATION_EXCEPTION"
        public var message: String
        public var fields: [String] = []

        public init(
            object: String? = nil, operation: String, ids: [String]? = nil, matching: Data? = nil,
            statusCode: String = "FIELD_CUSTOM_VALIDATION_EXCEPTION", message: String, fields: [String] = []
        ) {
            self.object = object
            self.operation = operation
            self.ids = ids
            self.matching = matching
            self.statusCode = statusCode
            self.message = message
            self.fields = fields
        }
    }

    public init() {}

    /// Reads a fixture file.
    public init(contentsOf url: URL) throws {
        let name = url.lastPathComponent
        guard let root = JSON.parse(try Data(contentsOf: url))?.object else {
            throw SalesforceFixtureError("\(name) is not a JSON object")
        }
        if let versions = root["versions"]?.array { self.versions = versions.compactMap(\.string) }
        if let users = root["users"]?.object {
            self.users = [:]
            for (user, password) in users.members { self.users[user] = password.string }
        }
        for (objectName, describe) in root["objects"]?.object?.members ?? [] {
            objects[objectName] = try Self.schema(describe, object: objectName, file: name)
        }
        for (objectName, list) in root["records"]?.object?.members ?? [] {
            guard let list = list.array, list.allSatisfy({ $0.object != nil }) else {
                throw SalesforceFixtureError("\(name): the records of \(objectName) are not an array of objects")
            }
            records[objectName] = list.map(\.data)
        }
        for (id, base64) in root["files"]?.object?.members ?? [] {
            guard let bytes = base64.string.flatMap({ Data(base64Encoded: $0) }) else {
                throw SalesforceFixtureError("\(name): the file of \(id) is not base64")
            }
            files[id] = bytes
        }
        if let size = root["queryPageSize"]?.number { queryPageSize = Int(size) }
        for rule in root["rules"]?.array ?? [] {
            guard let operation = rule["operation"]?.string, let message = rule["message"]?.string else {
                throw SalesforceFixtureError("\(name): a rule needs an operation and a message")
            }
            rules.append(
                Rule(
                    object: rule["object"]?.string, operation: operation, ids: rule["ids"]?.array?.compactMap(\.string),
                    matching: rule["matching"]?.data,
                    statusCode: rule["statusCode"]?.string ?? "FIELD_CUSTOM_VALIDATION_EXCEPTION", message: message,
                    fields: rule["fields"]?.array?.compactMap(\.string) ?? []))
        }
    }

    /// The fixture file `name` of the repository's `Fixtures/salesforce`, found from `file` upwards.
    public static func named(_ name: String, file: String = #filePath) throws -> SalesforceFixture {
        var directory = URL(fileURLWithPath: file)
        while directory.path != "/" {
            directory.deleteLastPathComponent()
            let candidate = directory.appendingPathComponent("Fixtures/salesforce/\(name).json")
            if FileManager.default.fileExists(atPath: candidate.path) { return try SalesforceFixture(contentsOf: candidate) }
        }
        throw SalesforceFixtureError("no Salesforce fixture named \(name)")
    }

    // MARK: - Reading describes

    private static func schema(_ json: JSON, object: String, file: String) throws -> ObjectSchema {
        guard let describe = json.object, let prefix = describe["keyPrefix"]?.string, prefix.count == 3 else {
            throw SalesforceFixtureError("\(file): \(object) needs a three-character keyPrefix")
        }
        var fields: [Field] = []
        for field in describe["fields"]?.array ?? [] {
            guard let name = field["name"]?.string, let type = field["type"]?.string else {
                throw SalesforceFixtureError("\(file): a field of \(object) needs a name and a type")
            }
            let values = (field["picklistValues"]?.array ?? []).compactMap { entry -> PicklistValue? in
                guard let value = entry["value"]?.string else { return nil }
                return PicklistValue(
                    value, label: entry["label"]?.string, active: entry["active"]?.bool ?? true,
                    defaultValue: entry["defaultValue"]?.bool ?? false, validFor: entry["validFor"]?.string)
            }
            fields.append(
                Field(
                    name: name, type: type, label: field["label"]?.string, createable: field["createable"]?.bool ?? true,
                    updateable: field["updateable"]?.bool ?? true, nillable: field["nillable"]?.bool,
                    calculated: field["calculated"]?.bool ?? false, formulaSum: field["formulaSum"]?.array?.compactMap(\.string),
                    referenceTo: field["referenceTo"]?.array?.compactMap(\.string) ?? [],
                    relationshipName: field["relationshipName"]?.string, controllerName: field["controllerName"]?.string,
                    dependentPicklist: field["dependentPicklist"]?.bool, restrictedPicklist: field["restrictedPicklist"]?.bool ?? false,
                    picklistValues: values, length: field["length"]?.number.map { Int($0) },
                    defaultedOnCreate: field["defaultedOnCreate"]?.bool, externalId: field["externalId"]?.bool ?? false,
                    unique: field["unique"]?.bool ?? false))
        }
        return ObjectSchema(
            keyPrefix: prefix, label: describe["label"]?.string, fields: fields, createable: describe["createable"]?.bool ?? true,
            updateable: describe["updateable"]?.bool ?? true, deletable: describe["deletable"]?.bool ?? true,
            queryable: describe["queryable"]?.bool ?? true)
    }
}

/// A fixture that cannot be read, or a server that cannot start.
public struct SalesforceFixtureError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
