import Foundation
import LoopbackSupport

/// An error as Parse Server answers it: `{"code":<int>,"error":"<message>"}`, with the HTTP
/// status Parse maps the code to (`101` → 404, `1` → 500, every other code → 400).
struct ParseError: Error {
    var code: Int
    var message: String
    /// No route takes the request: `cannot route …` inside a batch, Express's 404 page outside.
    var isNoRoute = false

    init(_ code: Int, _ message: String) {
        self.code = code
        self.message = message
    }

    var status: Int {
        switch code {
        case 101: 404
        case 1: 500
        default: 400
        }
    }

    /// The error as a batch item's `error` member, or a whole answer's body.
    var json: JSON { .object(["code": .number(Double(code)), "error": .string(message)]) }

    // The codes of Parse.Error this server raises.
    static func objectNotFound(_ message: String = "Object not found.") -> ParseError { ParseError(101, message) }
    static func invalidQuery(_ message: String) -> ParseError { ParseError(102, message) }
    static func invalidClassName(_ name: String) -> ParseError {
        ParseError(103, "Invalid classname: \(name), classnames can only have alphanumeric characters and _, and must start with an alpha character ")
    }
    static func invalidKeyName(_ message: String) -> ParseError { ParseError(105, message) }
    static let invalidJSON = ParseError(107, "Invalid JSON")
    static func unsupportedOperator(_ name: String) -> ParseError { ParseError(108, "The \(name) operator is not supported yet.") }
    static func incorrectType(_ message: String) -> ParseError { ParseError(111, message) }
    static let invalidNestedKey = ParseError(121, "Nested keys should not contain the '$' or '.' characters")
    static let invalidSessionToken = ParseError(209, "Invalid session token")

    static func noRoute(_ method: String, _ path: String) -> ParseError {
        var error = ParseError(107, "cannot route \(method) \(path)")
        error.isNoRoute = true
        return error
    }
}

/// An HTTP answer of the server.
struct Answer {
    var status = 200
    var contentType = "application/json; charset=utf-8"
    var headers: [String: String] = [:]
    var body = Data()

    static func json(_ value: JSON, status: Int = 200, headers: [String: String] = [:]) -> Answer {
        Answer(status: status, headers: headers, body: value.data)
    }

    static func error(_ error: ParseError) -> Answer { json(error.json, status: error.status) }

    /// A wrong or missing application id or client key: 403 with no `code`, as Parse answers it.
    static let unauthorized = json(.object(["error": .string("unauthorized")]), status: 403)

    /// What Express answers for a path no route takes (Parse Server adds nothing to it).
    static func expressNotFound(_ method: String, _ path: String) -> Answer {
        Answer(status: 404, contentType: "text/html; charset=utf-8", body: Data("<pre>Cannot \(method) \(path)</pre>".utf8))
    }
}
