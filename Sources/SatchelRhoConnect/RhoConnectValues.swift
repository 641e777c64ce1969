import Satchel
import SatchelSync

/// RhoConnect's values are strings: every attribute travels as one, and a property-bag model
/// keeps what arrives as strings. This file owns the conversion both ways.
enum RhoConnectValues {
    /// The wire form of a local value: strings as they are, numbers and booleans as their JSON
    /// text, arrays and objects as JSON text; null stays null (an attribute removed).
    static func outgoing(_ value: JSONValue) -> JSONValue {
        switch value {
        case .null, .string: value
        default: .string(String(decoding: value.jsonBytes, as: UTF8.self))
        }
    }

    static func outgoing(_ attributes: JSONObject) -> JSONObject {
        var result = JSONObject()
        for (name, value) in attributes { result[name] = outgoing(value) }
        return result
    }

    /// A value as the model stores it: kept as it came, unless the model is fixed-schema and
    /// declares the attribute's type, in which case the string is read as that type. An empty
    /// string is a nil on the server (RhoConnect stores a nil so): no value, the attribute gone
    /// (a black-box probe: a removal the server kept as "" stopped the model's pulls for good).
    ///
    /// - Throws: ``SyncError`` `.protocolViolation` when a typed attribute's text is not of its
    ///   type (the page is then not applied).
    static func incoming(_ value: JSONValue, attribute: String, of model: ModelDefinition) throws(SyncError) -> JSONValue {
        guard case .fixedSchema(let schema) = model.kind, case .string(let text) = value, let type = schema[attribute] else {
            return value
        }
        func invalid() -> SyncError {
            SyncError(
                .protocolViolation,
                "attribute '\(attribute)' of \(model.name) is declared \(type.rawValue), but the server sent \"\(text.prefix(80))\"")
        }
        switch type {
        case .string, .any:
            return value
        case _ where text.isEmpty:
            return .null
        case .integer:
            guard let number = Int64(text) else { throw invalid() }
            return .int(number)
        case .number:
            if let number = Int64(text) { return .int(number) }
            guard let number = Double(text), number.isFinite else { throw invalid() }
            return .double(number)
        case .boolean:
            switch text.lowercased() {
            case "true", "1": return .bool(true)
            case "false", "0": return .bool(false)
            default: throw invalid()
            }
        case .array, .object:
            guard let parsed = try? JSONValue(parsing: text.utf8, maximumValues: AnswerLimits().maximumValues) else { throw invalid() }
            switch (type, parsed) {
            case (.array, .array), (.object, .object): return parsed
            default: throw invalid()
            }
        }
    }

    static func incoming(_ attributes: JSONObject, of model: ModelDefinition) throws(SyncError) -> JSONObject {
        guard case .fixedSchema = model.kind else { return attributes }
        var result = JSONObject()
        for (name, value) in attributes { result[name] = try incoming(value, attribute: name, of: model) }
        return result
    }
}
