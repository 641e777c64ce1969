package import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The HTTP plumbing every adapter needs: an ephemeral `URLSession` (no cookie jar, no cache:
/// an adapter keeps what it must), answers of any status returned as they are, and transport
/// failures mapped onto ``SyncError``.
package struct SyncHTTPClient: Sendable {
    /// A server's answer, whatever its status.
    package struct Response: Sendable {
        package var status: Int
        /// Header fields by lower-cased name (HTTP names are case-insensitive: Kinto sends
        /// `Etag`).
        package var headers: [String: String]
        package var body: Data
        /// The URL that was asked.
        package var url: URL

        package init(status: Int, headers: [String: String], body: Data, url: URL) {
            self.status = status
            self.headers = headers
            self.body = body
            self.url = url
        }

        /// The header field `name`, looked up case-insensitively.
        package func header(_ name: String) -> String? { headers[name.lowercased()] }

        /// The start of the body as text, for error messages.
        package var text: String {
            String(decoding: body.prefix(300), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }

        /// `Retry-After` in seconds (the HTTP-date form is not used by the servers Satchel speaks to).
        package var retryAfter: Duration? { header("retry-after").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }.map { .seconds($0) } }
    }

    let session: URLSession

    /// A client that waits `timeout` seconds for each answer.
    package init(timeout: TimeInterval) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        configuration.httpCookieStorage = nil
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.timeoutIntervalForRequest = timeout
        session = URLSession(configuration: configuration)
    }

    /// Sends a request. Any status is an answer; no answer at all is ``SyncError/Code/network``
    /// (``SyncError/Code/cancelled`` when the task was cancelled).
    package func send(_ method: String, _ url: URL, headers: [String: String] = [:], body: Data? = nil) async throws(SyncError) -> Response {
        var request = URLRequest(url: url)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let body {
            request.httpBody = body
            if request.value(forHTTPHeaderField: "Content-Type") == nil { request.setValue("application/json", forHTTPHeaderField: "Content-Type") }
        }
        if request.value(forHTTPHeaderField: "Accept") == nil { request.setValue("application/json", forHTTPHeaderField: "Accept") }
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: request)
        } catch is CancellationError {
            throw SyncError(.cancelled, "the request to \(url.path) was cancelled")
        } catch {
            if Task.isCancelled { throw SyncError(.cancelled, "the request to \(url.path) was cancelled") }
            throw SyncError(.network, "no answer from \(url.host ?? "the server"): \(error.localizedDescription)")
        }
        guard let http = response as? HTTPURLResponse else { throw SyncError(.protocolViolation, "the answer from \(url.path) is not HTTP") }
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { fields[name.lowercased()] = value }
        }
        return Response(status: http.statusCode, headers: fields, body: data, url: url)
    }

    /// The `Authorization` header of HTTP basic auth for `credentials`.
    package static func basicAuthorization(_ credentials: Credentials) -> String {
        "Basic " + Data("\(credentials.user):\(credentials.password)".utf8).base64EncodedString()
    }

    // MARK: - URLs

    /// Characters left as they are in a query value or a path segment (RFC 3986 unreserved).
    static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// `text` percent-encoded for a path segment or a query value.
    package static func escape(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text }

    /// `root` + `path` (already escaped) + the query items, in order, escaped.
    package static func url(_ root: URL, _ path: String, _ query: [(String, String)] = []) throws(SyncError) -> URL {
        var text = root.absoluteString
        if !text.hasSuffix("/") { text += "/" }
        text += path
        if !query.isEmpty { text += "?" + query.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&") }
        guard let url = URL(string: text) else { throw SyncError(.protocolViolation, "cannot make a URL of \(text)") }
        return url
    }
}
