import Foundation
import LoopbackSupport

/// An error that fails a whole REST call, as Salesforce answers it: a JSON **array**
/// `[{"message":…,"errorCode":…,"fields":[…]}]` (`fields` only when the error names some), with
/// its HTTP status.
struct APIError: Error {
    var status: Int
    var errorCode: String
    var message: String
    var fields: [String]?

    init(_ status: Int, _ errorCode: String, _ message: String, fields: [String]? = nil) {
        self.status = status
        self.errorCode = errorCode
        self.message = message
        self.fields = fields
    }

    var json: JSON {
        var error: JSONObject = ["message": .string(message), "errorCode": .string(errorCode)]
        if let fields { error["fields"] = .array(fields.map(JSON.string)) }
        return .array([.object(error)])
    }

    // The errors of the REST API this server raises.
    static let invalidSession = APIError(401, "INVALID_SESSION_ID", "Session expired or invalid")
    static let notFound = APIError(404, "NOT_FOUND", "The requested resource does not exist")
    static let entityIsDeleted = APIError(404, "ENTITY_IS_DELETED", "entity is deleted")
    static func malformedQuery(_ message: String) -> APIError { APIError(400, "MALFORMED_QUERY", message) }
    static func invalidField(_ message: String) -> APIError { APIError(400, "INVALID_FIELD", message) }
    static func invalidType(_ message: String) -> APIError { APIError(400, "INVALID_TYPE", message) }
    static func jsonParser(_ message: String) -> APIError { APIError(400, "JSON_PARSER_ERROR", message) }
    static func replicationDate(_ message: String) -> APIError { APIError(400, "INVALID_REPLICATION_DATE", message) }
    static func methodNotAllowed(_ method: String, allowed: [String]) -> APIError {
        APIError(405, "METHOD_NOT_ALLOWED", "HTTP Method '\(method)' not allowed. Allowed are \(allowed.joined(separator: ","))")
    }

    /// `No such column 'X' on sobject of type O`: a body naming a field the object lacks.
    static func noSuchColumn(_ field: String, _ object: String) -> APIError {
        invalidField("No such column '\(field)' on sobject of type \(object)")
    }

    /// `sObject type 'X' is not supported.`: a body naming an object the org lacks.
    static func unsupportedType(_ object: String) -> APIError { invalidType("sObject type '\(object)' is not supported.") }

    /// A single-record write's per-record failure, as a REST call answers it: HTTP 400 with the
    /// refused change's code as `errorCode` (a missing or deleted record is 404).
    init(_ error: RefusedChange) {
        let status = ["ENTITY_IS_DELETED", "NOT_FOUND"].contains(error.statusCode) ? 404 : 400
        self.init(status, error.statusCode, error.message, fields: error.fields)
    }
}

/// A record's failure inside an sObject Collection answer:
/// `{"statusCode":…,"message":…,"fields":[…]}` (note `statusCode`, not `errorCode`).
struct RefusedChange: Error {
    var statusCode: String
    var message: String
    var fields: [String] = []

    var json: JSON {
        .object(["statusCode": .string(statusCode), "message": .string(message), "fields": .array(fields.map(JSON.string))])
    }

    static let entityIsDeleted = RefusedChange(statusCode: "ENTITY_IS_DELETED", message: "entity is deleted")
    static let invalidCrossReference = RefusedChange(statusCode: "INVALID_CROSS_REFERENCE_KEY", message: "invalid cross reference id")
    static let rolledBack = RefusedChange(
        statusCode: "ALL_OR_NONE_OPERATION_ROLLED_BACK",
        message: "Record rolled back because not all records were valid and the request was using AllOrNone header")
    static func malformedID(_ id: String) -> RefusedChange { RefusedChange(statusCode: "MALFORMED_ID", message: "malformed id \(id)") }
    static func requiredMissing(_ fields: [String]) -> RefusedChange {
        RefusedChange(
            statusCode: "REQUIRED_FIELD_MISSING", message: "Required fields are missing: [\(fields.joined(separator: ", "))]", fields: fields)
    }
    static func notWritable(_ fields: [String]) -> RefusedChange {
        RefusedChange(
            statusCode: "INVALID_FIELD_FOR_INSERT_UPDATE",
            message:
                "Unable to create/update fields: \(fields.joined(separator: ", ")). Please check the security settings of this field and verify that it is read/write for your profile or permission set.",
            fields: fields)
    }
    static let idOnInsert = RefusedChange(
        statusCode: "INVALID_FIELD_FOR_INSERT_UPDATE", message: "cannot specify Id in an insert call", fields: ["Id"])
    static let insufficientAccess = RefusedChange(statusCode: "INSUFFICIENT_ACCESS_OR_READONLY", message: "insufficient access rights on object id")
}

/// An HTTP answer of the server.
struct Answer {
    var status = 200
    var contentType = "application/json;charset=UTF-8"
    var headers: [String: String] = [:]
    var body = Data()

    static func json(_ value: JSON, status: Int = 200, headers: [String: String] = [:]) -> Answer {
        Answer(status: status, headers: headers, body: value.data)
    }

    static func error(_ error: APIError) -> Answer {
        var answer = json(error.json, status: error.status)
        if error.status == 401 { answer.headers["WWW-Authenticate"] = "Token" }
        return answer
    }

    /// `204 No Content` (a PATCH or DELETE that worked).
    static let noContent = Answer(status: 204, contentType: "", body: Data())
}
