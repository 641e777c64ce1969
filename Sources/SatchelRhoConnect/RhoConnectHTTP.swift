import Foundation
import SatchelSync
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The HTTP side of the adapter: requests with the session cookie and the client id, and the
/// mapping of answers onto ``SyncError``.
struct RhoConnectHTTP: Sendable {
    /// The server's answer.
    struct Answer: Sendable {
        var status: Int
        var headers: [String: String]
        var body: Data
        var url: URL

        var text: String { String(decoding: body.prefix(300), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) }
    }

    let session: URLSession

    init(timeout: TimeInterval) {
        let configuration = URLSessionConfiguration.ephemeral
        // The session cookie is the adapter's to keep and replay, not URLSession's.
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        configuration.httpCookieStorage = nil
        configuration.urlCache = nil
        configuration.timeoutIntervalForRequest = timeout
        session = URLSession(configuration: configuration)
    }

    /// Sends a request; any status is an answer (see ``check(_:)``).
    func send(
        _ method: String, _ url: URL, cookie: String?, clientID: String?, body: Data? = nil, contentType: String? = nil
    ) async throws(SyncError) -> Answer {
        var request = URLRequest(url: url)
        request.httpMethod = method
        if let cookie, !cookie.isEmpty { request.setValue(cookie, forHTTPHeaderField: "Cookie") }
        if let clientID { request.setValue(clientID, forHTTPHeaderField: "X-RhoConnect-CLIENT-ID") }
        if let body {
            request.httpBody = body
            request.setValue(contentType ?? "application/json", forHTTPHeaderField: "Content-Type")
        }
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: request)
        } catch is CancellationError {
            throw SyncError(.cancelled, "the request to \(url.path) was cancelled")
        } catch {
            throw SyncError(.network, "no answer from \(url.host ?? "the server"): \(error.localizedDescription)")
        }
        guard let http = response as? HTTPURLResponse else { throw SyncError(.protocolViolation, "the answer is not HTTP") }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
        }
        return Answer(status: http.statusCode, headers: headers, body: data, url: url)
    }

    /// The answer if its status is 200; else the error it stands for: 401 → `.unauthorized`, a
    /// 500 saying `Unknown client` → `.unknownClient`, others → `.server` with the status and
    /// `Retry-After`.
    @discardableResult
    static func check(_ answer: Answer, _ what: String) throws(SyncError) -> Answer {
        switch answer.status {
        case 200:
            return answer
        case 401:
            throw SyncError(.unauthorized, "\(what): \(answer.text.isEmpty ? "not authenticated" : answer.text)", httpStatus: 401)
        case 500 where answer.text.lowercased().contains("unknown client"):
            throw SyncError(.unknownClient, "\(what): the server does not know this client (\(answer.text))", httpStatus: 500)
        default:
            let retryAfter = answer.headers["retry-after"].flatMap(Int.init).map { Duration.seconds($0) }
            let detail = answer.text.isEmpty ? "" : ": \(answer.text)"
            throw SyncError(.server, "\(what) failed with HTTP \(answer.status)\(detail)", httpStatus: answer.status, retryAfter: retryAfter)
        }
    }

    /// `name=value; name2=value2;` from the answer's `Set-Cookie` headers, as the RhoConnect
    /// client keeps it.
    static func cookie(from answer: Answer) -> String {
        let cookies = HTTPCookie.cookies(withResponseHeaderFields: ["Set-Cookie": answer.headers["set-cookie"] ?? ""], for: answer.url)
        return cookies.map { "\($0.name)=\($0.value);" }.joined(separator: " ")
    }

    // MARK: - URLs

    /// Characters left as they are in a query value or a path segment (RFC 3986 unreserved).
    static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    static func escape(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text }

    /// `root` + `path` (already escaped) + the query items, in order.
    static func url(_ root: URL, _ path: String, _ query: [(String, String)] = []) throws(SyncError) -> URL {
        var text = root.absoluteString
        if !text.hasSuffix("/") { text += "/" }
        text += path
        if !query.isEmpty { text += "?" + query.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&") }
        guard let url = URL(string: text) else { throw SyncError(.protocolViolation, "cannot make a URL of \(text)") }
        return url
    }
}
