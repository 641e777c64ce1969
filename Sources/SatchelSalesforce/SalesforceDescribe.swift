import Foundation
public import Satchel

/// What Salesforce's `describe` says of an sObject, as the adapter uses it: the fields, which
/// may be created and updated, references, and picklists (dependent ones decoded). This file owns
/// the reading of a describe answer and the decoding of `validFor`.
public struct SalesforceDescribe: Sendable, Hashable {
    /// One field.
    public struct Field: Sendable, Hashable {
        public var name: String
        /// Salesforce's type: `id`, `string`, `boolean`, `int`, `double`, `currency`, `date`,
        /// `datetime`, `reference`, `picklist`, `multipicklist`, `base64`, …
        public var type: String
        public var createable: Bool
        public var updateable: Bool
        /// The objects a `reference` field points to.
        public var referenceTo: [String]
        /// The active values of a picklist, in the server's order.
        public var picklistValues: [String]
        /// Every entry of the picklist's `picklistValues` as describe lists them, inactive ones
        /// included: a dependent picklist's `validFor` bit *i* is this field's entry *i* when it
        /// controls one.
        public var allPicklistValues: [String]
        public var restrictedPicklist: Bool
        /// The field that controls a dependent picklist.
        public var controllerName: String?
        /// For a dependent picklist: each active value → the indexes of the controller's entries
        /// (``allPicklistValues``, inactive ones included) it is valid for.
        public var validFor: [String: [Int]]
    }

    public var name: String
    /// Fields in the server's order.
    public var fields: [Field]

    /// Reads a describe answer; nil when it is not one (no `name`, or no `fields` list of
    /// objects with a `name` and a `type`).
    public init?(_ value: JSONValue) {
        guard let name = value["name"]?.stringValue, let list = value["fields"]?.arrayValue else { return nil }
        var fields: [Field] = []
        for item in list {
            guard let fieldName = item["name"]?.stringValue, let type = item["type"]?.stringValue else { return nil }
            var values: [String] = []
            var entries: [String] = []
            var validFor: [String: [Int]] = [:]
            for entry in item["picklistValues"]?.arrayValue ?? [] {
                // An entry without a string value still holds its place: bit i is entry i.
                let value = entry["value"]?.stringValue
                entries.append(value ?? "")
                guard let value, entry["active"]?.boolValue != false else { continue }
                values.append(value)
                if let bits = entry["validFor"]?.stringValue { validFor[value] = Self.indexes(validFor: bits) }
            }
            fields.append(
                Field(
                    name: fieldName, type: type, createable: item["createable"]?.boolValue ?? false,
                    updateable: item["updateable"]?.boolValue ?? false,
                    referenceTo: item["referenceTo"]?.arrayValue?.compactMap(\.stringValue) ?? [], picklistValues: values, allPicklistValues: entries,
                    restrictedPicklist: item["restrictedPicklist"]?.boolValue ?? false, controllerName: item["controllerName"]?.stringValue,
                    validFor: validFor))
        }
        self.name = name
        self.fields = fields
    }

    /// The field named `name`.
    public func field(_ name: String) -> Field? { fields.first { $0.name == name } }

    /// The controller indexes a `validFor` value sets: base64 bytes, bit *i* (most significant
    /// first in each byte) for the controller's *i*-th entry of `picklistValues` as describe
    /// lists them, inactive entries included.
    public static func indexes(validFor base64: String) -> [Int] {
        guard let bytes = Data(base64Encoded: base64) else { return [] }
        var indexes: [Int] = []
        for (offset, byte) in bytes.enumerated() {
            for bit in 0..<8 where byte & (0x80 >> UInt8(bit)) != 0 { indexes.append(offset * 8 + bit) }
        }
        return indexes
    }

    /// The active values of picklist `field`, or, for a dependent picklist and a controller
    /// value, the active values valid for it (`"true"`/`"false"` for a checkbox controller:
    /// index 1 and 0). A controller value that is inactive has its index too.
    /// nil when `field` is not a picklist of this object, or `value` is not one of
    /// ``controllerValues(of:)``.
    public func picklist(_ field: String, controller value: String? = nil) -> [String]? {
        guard let picklist = self.field(field), ["picklist", "multipicklist"].contains(picklist.type) else { return nil }
        guard let value, let controllerName = picklist.controllerName else { return picklist.picklistValues }
        guard let index = controllerIndex(controllerName, value) else { return nil }
        return picklist.picklistValues.filter { picklist.validFor[$0]?.contains(index) == true }
    }

    /// The values of the field that controls dependent picklist `field`, as describe lists them
    /// (inactive ones included; `false` and `true` for a checkbox): a value's index among them is
    /// its bit in `validFor`. nil when `field` is not a dependent picklist.
    public func controllerValues(of field: String) -> [String]? {
        guard let controllerName = self.field(field)?.controllerName, let controller = self.field(controllerName) else { return nil }
        return Self.values(of: controller)
    }

    /// The entries of controlling field `controller`, in the order their bits follow.
    private static func values(of controller: Field) -> [String] {
        controller.type == "boolean" ? ["false", "true"] : controller.allPicklistValues
    }

    /// The index of `value` among the entries of `controller` as describe lists them, inactive
    /// ones included: a checkbox's false is 0, true 1 (in any case).
    func controllerIndex(_ controller: String, _ value: String) -> Int? {
        guard let field = self.field(controller), !value.isEmpty else { return nil }
        return Self.values(of: field).firstIndex(of: field.type == "boolean" ? value.lowercased() : value)
    }

    /// The picklists as Satchel's attribute choices: local writes are checked against them.
    public var choices: [String: AttributeChoices] {
        var choices: [String: AttributeChoices] = [:]
        for field in fields where field.type == "picklist" && !field.picklistValues.isEmpty {
            var entry = AttributeChoices(values: field.picklistValues, restricted: field.restrictedPicklist)
            if let controllerName = field.controllerName, let controller = self.field(controllerName) {
                entry.controller = controllerName
                // Bit i is the controller's entry i, inactive entries included.
                let keys = Self.values(of: controller)
                for (index, key) in keys.enumerated() where !key.isEmpty && entry.validFor[key] == nil {
                    entry.validFor[key] = field.picklistValues.filter { field.validFor[$0]?.contains(index) == true }
                }
            }
            choices[field.name] = entry
        }
        return choices
    }

    /// The fields' types as Satchel's attribute types: numbers (`int` as integers; `double`,
    /// `currency`, `percent` as numbers), booleans, and strings for the rest (ids, references,
    /// picklists, dates and datetimes, `base64` fields' blob references).
    public var attributeTypes: [String: AttributeType] {
        var types: [String: AttributeType] = [:]
        for field in fields where field.name != "Id" {
            switch field.type {
            case "int", "long": types[field.name] = .integer
            case "double", "currency", "percent": types[field.name] = .number
            case "boolean": types[field.name] = .boolean
            case "address", "location", "anyType": types[field.name] = .any
            default: types[field.name] = .string
            }
        }
        return types
    }

    /// Reference fields → the object they point to (the first of `referenceTo`).
    public var associations: [String: String] {
        var associations: [String: String] = [:]
        for field in fields where field.type == "reference" {
            if let target = field.referenceTo.first { associations[field.name] = target }
        }
        return associations
    }

    /// Fields whose bytes are a blob (`base64`: an Attachment's or Document's `Body`, a
    /// ContentVersion's `VersionData`).
    public var blobFields: [String] { fields.filter { $0.type == "base64" }.map(\.name) }
}
