package import Foundation
package import Satchel
import Synchronization
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
        /// The URL that answered: another than ``url`` when the server redirected a `GET`.
        package var answeredURL: URL
        /// The most array elements and object members ``json(_:)`` reads.
        package var maximumValues: Int

        package init(
            status: Int, headers: [String: String], body: Data, url: URL, answeredURL: URL? = nil, maximumValues: Int = AnswerLimits().maximumValues
        ) {
            self.status = status
            self.headers = headers
            self.body = body
            self.url = url
            self.answeredURL = answeredURL ?? url
            self.maximumValues = maximumValues
        }

        /// The body as JSON, read within the limits (``AnswerLimits/maximumValues`` values, and
        /// ``Satchel/JSONValue/maxDepth`` levels of nesting below ``envelopeDepth`` levels of
        /// the answer's own).
        ///
        /// - Throws: ``SyncError`` `.protocolViolation` naming `what` when the body is not JSON
        ///   or passes a limit.
        package func json(_ what: String) throws(SyncError) -> JSONValue {
            do {
                return try JSONValue(parsing: body, maximumValues: maximumValues, maximumDepth: JSONValue.maxDepth + Self.envelopeDepth)
            } catch let error as SatchelError {
                throw SyncError(.protocolViolation, "\(what): the answer is not JSON that Satchel reads (\(body.count) bytes: \(error.message))")
                    .at(url.path)
            } catch {
                throw SyncError(.protocolViolation, "\(what): the answer is not JSON (\(body.count) bytes)").at(url.path)
            }
        }

        /// The levels an answer may keep an object in: a page's, a batch's (Kinto's
        /// `{"responses":[{"body":{"data":{…}}}]}` is four), so that an object as deep as a
        /// store holds reads inside them (a black-box probe: one 254 levels deep was pushed, and
        /// every later pull of its model failed).
        static let envelopeDepth = 8

        /// The header field `name`, looked up case-insensitively.
        package func header(_ name: String) -> String? { headers[name.lowercased()] }

        /// The start of the body as text, for error messages.
        package var text: String {
            // One line, for an error message: an HTML page's line breaks and indentation become
            // single spaces.
            String(decoding: body.prefix(300), as: UTF8.self).split(whereSeparator: \.isWhitespace).joined(separator: " ")
        }

        /// How long `Retry-After` asks to wait: its seconds, or the time until its HTTP date
        /// (zero for one past); nil without the header or with one of neither form.
        package var retryAfter: Duration? { retryAfter(now: Date()) }

        /// `Retry-After` as of `now`.
        package func retryAfter(now: Date) -> Duration? {
            guard let text = header("retry-after")?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { return nil }
            if text.utf8.allSatisfy({ (48...57).contains($0) }) {
                // Delay-seconds; more than Int64 holds is as good as forever.
                return .seconds(Int64(text) ?? .max)
            }
            guard let date = HTTPDate.parse(text) else { return nil }
            let interval = date.timeIntervalSince(now)
            return interval > 0 ? .milliseconds(Int64((interval * 1000).rounded(.up))) : .zero
        }
    }

    /// What the client accepts of servers.
    package let limits: AnswerLimits
    /// Whether plain `http://` may go to hosts that are not this machine.
    package let allowInsecureHTTP: Bool
    private let transport: Transport

    /// A client that waits `timeout` seconds for each answer to move, reads at most what
    /// `limits` allows, and refuses plain `http://` to other hosts unless `allowInsecureHTTP`.
    package init(timeout: TimeInterval, limits: AnswerLimits = AnswerLimits(), allowInsecureHTTP: Bool = false) {
        self.limits = limits
        self.allowInsecureHTTP = allowInsecureHTTP
        transport = Transport(timeout: timeout, allowInsecureHTTP: allowInsecureHTTP, maximumDuration: limits.maximumDuration)
    }

    /// Sends a request. Any status is an answer; no answer at all is ``SyncError/Code/network``
    /// (``SyncError/Code/cancelled`` when the task was cancelled). The body may be at most
    /// `maximumBytes` long (``AnswerLimits/maximumBytes`` by default; downloads of files pass
    /// ``AnswerLimits/maximumDownloadBytes``): a longer one, or one that never ends, is
    /// ``SyncError/Code/answerTooLarge``, cut off as soon as it passes the limit.
    package func send(
        _ method: String, _ url: URL, headers: [String: String] = [:], body: Data? = nil, maximumBytes: Int? = nil
    ) async throws(SyncError) -> Response {
        try Self.checkTransport(url, allowInsecureHTTP: allowInsecureHTTP)
        var request = URLRequest(url: url)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let body {
            request.httpBody = body
            if request.value(forHTTPHeaderField: "Content-Type") == nil { request.setValue("application/json", forHTTPHeaderField: "Content-Type") }
        }
        if request.value(forHTTPHeaderField: "Accept") == nil { request.setValue("application/json", forHTTPHeaderField: "Accept") }
        let (data, response) = try await transport.exchange(request, maximumBytes: maximumBytes ?? limits.maximumBytes)
        guard let http = response as? HTTPURLResponse else { throw SyncError(.protocolViolation, "the answer from \(url.path) is not HTTP") }
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { fields[name.lowercased()] = value }
        }
        return Response(status: http.statusCode, headers: fields, body: data, url: url, answeredURL: http.url, maximumValues: limits.maximumValues)
    }

    /// Refuses plain `http://` to a host other than this machine, unless allowed: the password,
    /// the session and the data would cross the network readable by anyone on the way.
    package static func checkTransport(_ url: URL, allowInsecureHTTP: Bool) throws(SyncError) {
        // No request can fetch another scheme's URL (a server's `mailto:` or `file:` value):
        // said as such, not as a network failure to retry.
        guard ["http", "https"].contains(url.scheme?.lowercased() ?? "") else {
            throw SyncError(.protocolViolation, "'\(url.absoluteString)' is not an http or https URL")
        }
        guard url.scheme?.lowercased() == "http", !allowInsecureHTTP else { return }
        let host = (url.host ?? "").lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        if host == "localhost" || host == "::1" || host.hasPrefix("127.") { return }
        throw SyncError(
            .insecureTransport,
            "refusing plain http:// to \(host.isEmpty ? "the server" : host): passwords, sessions and data would cross the network unencrypted; use https://, or allow it with allowInsecureHTTP (satchel: --insecure)"
        )
    }

    /// The `Authorization` header of HTTP basic auth for `credentials`.
    package static func basicAuthorization(_ credentials: Credentials) -> String {
        "Basic " + Data("\(credentials.user):\(credentials.password)".utf8).base64EncodedString()
    }

    // MARK: - URLs

    /// Characters left as they are in a query value or a path segment (RFC 3986 unreserved).
    static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// Whether `a` and `b` have the same scheme, host and port: a server's credentials go only
    /// to its own origin, never to a host a URL in its data names (a file on a CDN).
    package static func sameOrigin(_ a: URL, _ b: URL) -> Bool {
        func port(_ url: URL) -> Int? { url.port ?? (url.scheme?.lowercased() == "https" ? 443 : url.scheme?.lowercased() == "http" ? 80 : nil) }
        return a.scheme?.lowercased() == b.scheme?.lowercased() && a.host?.lowercased() == b.host?.lowercased() && port(a) == port(b)
    }

    /// The headers (lowercased) that carry a server's credentials: a request holding one follows
    /// no redirect to another origin.
    static let credentialHeaders: Set<String> = [
        "authorization", "cookie", "x-parse-session-token", "x-parse-master-key", "x-parse-rest-api-key", "x-parse-javascript-key",
        "x-parse-client-key", "x-parse-application-id",
    ]

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

/// The URL session behind a ``SyncHTTPClient`` and the delegate that reads its answers: each
/// body is collected up to its limit, and the exchange fails the moment it passes it, or runs
/// past the longest a request may take; a hostile or broken server cannot make the client hold
/// more than the limit or wait for ever. Redirects to plain `http://` elsewhere are refused like
/// requests.
///
/// What swift-corelibs-foundation's URLSession (Linux, Swift 6.3) does not do, seen against a
/// loopback server streaming without end: a cancelled task goes on reading, to the end of the
/// body or for ever, and may never report its end; `timeoutIntervalForResource` is not
/// enforced. So an exchange that fails ends at once for the caller (its bytes are dropped as
/// they come), and its session, with its connections, is thrown away (`invalidateAndCancel`,
/// which does end the transfer) and replaced by a fresh one; a watchdog stands in for the
/// resource timeout. The session is invalidated too when the client goes (a session keeps its
/// delegate until then).
private final class Transport: Sendable {
    private let session: Locked<URLSession>
    let delegate: AnswerCollector
    let timeout: TimeInterval
    let maximumDuration: TimeInterval

    init(timeout: TimeInterval, allowInsecureHTTP: Bool, maximumDuration: TimeInterval) {
        let delegate = AnswerCollector(allowInsecureHTTP: allowInsecureHTTP)
        self.delegate = delegate
        self.timeout = timeout
        self.maximumDuration = maximumDuration
        session = Locked(Self.makeSession(timeout: timeout, delegate: delegate))
        delegate.onAbort { [weak self] session, reason in self?.replace(session, because: reason) }
    }

    deinit { session.withLock { $0 }.invalidateAndCancel() }

    static func makeSession(timeout: TimeInterval, delegate: AnswerCollector) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        configuration.httpCookieStorage = nil
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.timeoutIntervalForRequest = timeout
        return URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    /// Replaces `old` (when it is still the current session) and throws it away with its
    /// connections and tasks. The exchanges still under way on it end now, with an error saying
    /// `reason`: a task cancelled with its session may never report its end (see above).
    func replace(_ old: URLSession, because reason: String) {
        let replaced = session.withLock { current -> Bool in
            guard current === old else { return false }
            current = Self.makeSession(timeout: timeout, delegate: delegate)
            return true
        }
        guard replaced else { return }
        delegate.failAll(in: old, SyncError(.network, "no whole answer: the connection was closed because \(reason); the request may be sent again"))
        DispatchQueue.global().async { old.invalidateAndCancel() }
    }

    func exchange(_ request: URLRequest, maximumBytes: Int) async throws(SyncError) -> (Data, URLResponse) {
        let url = request.url
        let session = session.withLock { $0 }
        let task = session.dataTask(with: request)
        let (delegate, seconds) = (self.delegate, maximumDuration)
        let watchdog = Task {
            try await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
            delegate.fail(
                task, SyncError(.network, "no whole answer from \(url?.host ?? "the server") within \(Int(seconds)) s (AnswerLimits.maximumDuration)")
            )
        }
        defer { watchdog.cancel() }
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    delegate.begin(task, in: session, maximumBytes: maximumBytes, continuation)
                    task.resume()
                }
            } onCancel: {
                delegate.fail(task, SyncError(.cancelled, "the request to \(url?.path ?? "the server") was cancelled"))
            }
        } catch let error as SyncError {
            throw error
        } catch {
            let path = url?.path ?? ""
            if Task.isCancelled || (error as? URLError)?.code == .cancelled {
                throw SyncError(.cancelled, "the request to \(path) was cancelled")
            }
            // Said in words, not as Foundation's code (a black-box probe: "NSURLErrorDomain error -1001").
            let reason =
                (error as? URLError)?.code == .timedOut
                ? "nothing came for \(Int(timeout)) s (timed out)" : error.localizedDescription
            throw SyncError(.network, "no answer from \(url?.host ?? "the server"): \(reason)")
        }
    }
}

/// The sessions' delegate: one ``Exchange`` per task under way.
private final class AnswerCollector: NSObject, URLSessionDataDelegate, Sendable {
    struct Exchange: Sendable {
        var data = Data()
        var maximumBytes: Int
        /// The session of the task.
        let session: ObjectIdentifier
        var continuation: CheckedContinuation<(Data, URLResponse), any Error>
        /// Why the exchange fails when its task completes (a redirect not followed).
        var failure: SyncError?
        /// The answer the exchange ends with when its task completes (a 401 whose challenge
        /// was cancelled), in place of the task's.
        var challenged: URLResponse?
    }

    let allowInsecureHTTP: Bool
    private let exchanges = Locked<[ObjectIdentifier: Exchange]>([:])
    private let abort = Locked<(@Sendable (URLSession, String) -> Void)?>(nil)

    init(allowInsecureHTTP: Bool) { self.allowInsecureHTTP = allowInsecureHTTP }

    /// What to do with a session whose transfer must stop, and why (for the other exchanges on it).
    func onAbort(_ handler: @escaping @Sendable (URLSession, String) -> Void) { abort.withLock { $0 = handler } }

    func begin(
        _ task: URLSessionTask, in session: URLSession, maximumBytes: Int, _ continuation: CheckedContinuation<(Data, URLResponse), any Error>
    ) {
        exchanges.withLock {
            $0[ObjectIdentifier(task)] = Exchange(maximumBytes: maximumBytes, session: ObjectIdentifier(session), continuation: continuation)
        }
    }

    /// Ends the exchange of `task` now with `failure` (unless it ended already); with `session`,
    /// throws that session away first, which is what stops the transfer (see ``Transport``), so
    /// that what the caller sends next goes on a fresh session.
    func fail(
        _ task: URLSessionTask, _ failure: SyncError, in session: URLSession? = nil, because reason: String = "another answer on it was refused"
    ) {
        guard let exchange = exchanges.withLock({ $0.removeValue(forKey: ObjectIdentifier(task)) }) else { return }
        if let session { abort.withLock { $0 }?(session, reason) } else { DispatchQueue.global().async { task.cancel() } }
        exchange.continuation.resume(throwing: failure)
    }

    /// Ends every exchange still under way on `session` with `failure`.
    func failAll(in session: URLSession, _ failure: SyncError) {
        let ended = exchanges.withLock { exchanges -> [Exchange] in
            let keys = exchanges.filter { $0.value.session == ObjectIdentifier(session) }.map(\.key)
            return keys.compactMap { exchanges.removeValue(forKey: $0) }
        }
        for exchange in ended { exchange.continuation.resume(throwing: failure) }
    }

    private func tooLarge(_ task: URLSessionTask, _ limit: Int) -> SyncError {
        SyncError(
            .answerTooLarge,
            "the answer from \(task.originalRequest?.url?.path ?? "the server") is larger than \(limit) bytes: refused (see AnswerLimits)")
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        let limit = exchanges.withLock { $0[ObjectIdentifier(dataTask)]?.maximumBytes } ?? .max
        if response.expectedContentLength > Int64(limit) { fail(dataTask, tooLarge(dataTask, limit), in: session) }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let over = exchanges.withLock { exchanges -> Int? in
            let key = ObjectIdentifier(dataTask)
            guard var exchange = exchanges[key] else { return nil }
            guard exchange.data.count + data.count <= exchange.maximumBytes else { return exchange.maximumBytes }
            // The buffer is taken out of the dictionary while it grows, so appending does not
            // copy it.
            exchanges[key] = nil
            exchange.data.append(data)
            exchanges[key] = exchange
            return nil
        }
        if let over { fail(dataTask, tooLarge(dataTask, over), in: session) }
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        // A redirect not followed ends the exchange when its task completes, with the redirect
        // as its answer: cancelling the task here instead raced with the completion handler,
        // and swift-corelibs-foundation stopped the process ("Received callback for HTTP
        // redirection, but we're not waiting for it", seen under ThreadSanitizer).
        func refuse(_ failure: SyncError) {
            exchanges.withLock { $0[ObjectIdentifier(task)]?.failure = failure }
            completionHandler(nil)
        }
        // A redirect of a request with a body may send it on without its body (swift-corelibs
        // URLSession does, for a 307): only `GET` and `HEAD` follow one.
        if let method = task.originalRequest?.httpMethod, method != "GET" && method != "HEAD" {
            let from = task.originalRequest?.url?.path ?? "the request"
            let to = request.url?.absoluteString ?? "another address"
            refuse(
                SyncError(
                    .protocolViolation,
                    "\(method) \(from) was redirected to \(to), which is not followed for a request that sends data: check the server URL"
                ))
            return
        }
        // A request carrying credentials follows a redirect within its server's origin only: they
        // would go to a host nobody named (a black-box probe: a Parse session token, a
        // Salesforce bearer token, a Kinto password), and its answer be taken as the server's
        // (a Parse listing of ids that another host answered empty deleted every object here).
        if let original = task.originalRequest, let from = original.url, let to = request.url, !SyncHTTPClient.sameOrigin(from, to),
            let headers = original.allHTTPHeaderFields, headers.keys.contains(where: { SyncHTTPClient.credentialHeaders.contains($0.lowercased()) })
        {
            refuse(
                SyncError(
                    .protocolViolation,
                    "\(original.httpMethod ?? "GET") \(from.path) was redirected to another server (\(to.host ?? to.absoluteString)), which is not given this server's credentials: check the server URL"
                ))
            return
        }
        if let url = request.url {
            do throws(SyncError) {
                try SyncHTTPClient.checkTransport(url, allowInsecureHTTP: allowInsecureHTTP)
            } catch {
                refuse(SyncError(.insecureTransport, "a redirect to \(url.host ?? "another host"): \(error.message)"))
                return
            }
        }
        completionHandler(request)
    }

    /// libcurl asks for the body again: the connection it reused from an earlier exchange
    /// closed before any answer came, and it means to send the request again on a new one.
    /// swift-corelibs cannot give a body held as data twice: the request went again without it
    /// and waited out the timeout, a core busy all along (seen against a server that read a
    /// POST, carried it out and closed the connection). And a request sent again unseen may be
    /// carried out twice. So the exchange ends now, as one whose answer was lost: the caller
    /// decides what to send again (the sync engine, with what it knows of the server).
    func urlSession(
        _ session: URLSession, task: URLSessionTask, needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void
    ) {
        let host = task.originalRequest?.url?.host ?? "the server"
        fail(
            task,
            SyncError(.network, "no answer from \(host): the connection closed after the request was sent, which may have been carried out"),
            in: session, because: "a request on it went unanswered")
        completionHandler(nil)
    }

    /// A 401 naming an authentication scheme (`WWW-Authenticate`, as Kinto answers a wrong
    /// password). The client sends its credentials itself and has no others: swift-corelibs
    /// URLSession would wait for ever for some (a black-box probe: a Kinto 401 hung the sync),
    /// so the challenge is cancelled and the exchange ends with the 401 as its answer, its body
    /// unread, for the adapter to say what its server refused. A server-trust challenge (TLS,
    /// on Apple platforms) is left to the system.
    func urlSession(
        _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        #if canImport(Darwin)
        guard challenge.protectionSpace.authenticationMethod != NSURLAuthenticationMethodServerTrust else {
            completionHandler(.performDefaultHandling, nil)
            return
        }
        #endif
        let url = task.originalRequest?.url ?? URL(fileURLWithPath: "/")
        let answer = challenge.failureResponse ?? HTTPURLResponse(url: url, statusCode: 401, httpVersion: nil, headerFields: nil)
        exchanges.withLock { $0[ObjectIdentifier(task)]?.challenged = answer }
        completionHandler(.cancelAuthenticationChallenge, nil)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let exchange = exchanges.withLock({ $0.removeValue(forKey: ObjectIdentifier(task)) }) else { return }
        if let failure = exchange.failure {
            exchange.continuation.resume(throwing: failure)
        } else if let challenged = exchange.challenged {
            exchange.continuation.resume(returning: (Data(), challenged))
        } else if let error {
            exchange.continuation.resume(throwing: error)
        } else if let response = task.response {
            exchange.continuation.resume(returning: (exchange.data, response))
        } else {
            exchange.continuation.resume(throwing: SyncError(.protocolViolation, "no answer from \(task.originalRequest?.url?.path ?? "the server")"))
        }
    }
}
