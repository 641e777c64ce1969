import Foundation
import SatchelSync
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The HTTP side of the adapter: requests with the session cookie and the client id, and the
/// mapping of answers onto ``SyncError``.
struct RhoConnectHTTP: Sendable {
    typealias Answer = SyncHTTPClient.Response

    let client: SyncHTTPClient

    /// Sends a request with the session cookie and the client id; any status is an answer (see
    /// ``check(_:_:)``).
    func send(
        _ method: String, _ url: URL, cookie: String?, clientID: String?, body: Data? = nil, contentType: String? = nil,
        maximumBytes: Int? = nil
    ) async throws(SyncError) -> Answer {
        var headers: [String: String] = [:]
        if let cookie, !cookie.isEmpty { headers["Cookie"] = cookie }
        if let clientID { headers["X-RhoConnect-CLIENT-ID"] = clientID }
        if body != nil { headers["Content-Type"] = contentType ?? "application/json" }
        return try await client.send(method, url, headers: headers, body: body, maximumBytes: maximumBytes)
    }

    /// The answer if its status is 200; else the error it stands for: 401 → `.unauthorized`, a
    /// 500 saying `Unknown client` → `.unknownClient`, others → `.server` with the status and
    /// `Retry-After`.
    @discardableResult
    static func check(_ answer: Answer, _ what: String) throws(SyncError) -> Answer {
        do throws(SyncError) { return try checkStatus(answer, what) } catch { throw error.at(answer.url.path) }
    }

    static func checkStatus(_ answer: Answer, _ what: String) throws(SyncError) -> Answer {
        switch answer.status {
        case 200:
            return answer
        case 401:
            throw SyncError(.unauthorized, "\(what): \(answer.text.isEmpty ? "not authenticated" : answer.text)", httpStatus: 401)
        case 500 where answer.text.lowercased().contains("unknown client"):
            throw SyncError(.unknownClient, "\(what): the server does not know this client (\(answer.text))", httpStatus: 500)
        default:
            let retryAfter = answer.retryAfter
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

    static func escape(_ text: String) -> String { SyncHTTPClient.escape(text) }

    static func url(_ root: URL, _ path: String, _ query: [(String, String)] = []) throws(SyncError) -> URL {
        try SyncHTTPClient.url(root, path, query)
    }
}
