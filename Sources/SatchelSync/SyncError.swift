/// Why a sync call failed.
///
/// Shaped like ``Satchel/SatchelError``: a ``Code`` to match on, a one-line message, and for
/// server answers the HTTP status and the delay the server asked for. ``rhoConnectCode`` gives
/// the RhoConnect client's error number, for apps porting from it.
public struct SyncError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Wrapped: String, Sendable {
            case network, server, unauthorized, notLoggedIn, unknownClient, protocolViolation, versionMismatch
            case cancelled, storage, notSupported, busy, refusedChanges, insecureTransport, answerTooLarge
        }

        private let wrapped: Wrapped
        private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

        /// No answer came (connection refused, reset, timed out).
        public static let network = Code(.network)
        /// The server answered with an error status (see ``SyncError/httpStatus``).
        public static let server = Code(.server)
        /// The server refused the session or the credentials (HTTP 401): the session is dropped.
        public static let unauthorized = Code(.unauthorized)
        /// There is no session: log in first.
        public static let notLoggedIn = Code(.notLoggedIn)
        /// The server no longer knows this client; a client reset (and a fresh sync) recovers.
        public static let unknownClient = Code(.unknownClient)
        /// The answer was not what the protocol says (truncated, malformed, missing parts).
        public static let protocolViolation = Code(.protocolViolation)
        /// The server speaks another version of the protocol.
        public static let versionMismatch = Code(.versionMismatch)
        /// ``SyncEngine/stop()`` was called.
        public static let cancelled = Code(.cancelled)
        /// The store failed (see the message).
        public static let storage = Code(.storage)
        /// The server (or adapter) cannot do this.
        public static let notSupported = Code(.notSupported)
        /// A sync is already running.
        public static let busy = Code(.busy)
        /// The cycle completed, but the server refused some records (kept as refused changes).
        public static let refusedChanges = Code(.refusedChanges)
        @available(*, deprecated, renamed: "refusedChanges")
        public static let rejectedRecords = refusedChanges
        /// Plain `http://` to a host other than this machine, which the app did not allow (an
        /// adapter's `allowInsecureHTTP`).
        public static let insecureTransport = Code(.insecureTransport)
        /// An answer longer than ``AnswerLimits/maximumBytes`` (or a download longer than
        /// ``AnswerLimits/maximumDownloadBytes``), or one that never ended: cut off unread.
        public static let answerTooLarge = Code(.answerTooLarge)

        public var description: String { wrapped.rawValue }
    }

    public var code: Code
    public var message: String
    /// The HTTP status of the answer, for server errors.
    public var httpStatus: Int?
    /// How long the server asked to wait before retrying (`Retry-After`, Kinto's `Backoff`).
    public var retryAfter: Duration?
    /// The path of the request the server answered with the error (never its query: no secret
    /// travels there, but a filter might), for logs.
    public var path: String?

    /// This error, saying which request's path it came from.
    public func at(_ path: String) -> SyncError {
        var copy = self
        copy.path = path
        return copy
    }

    public init(_ code: Code, _ message: String, httpStatus: Int? = nil, retryAfter: Duration? = nil) {
        self.code = code
        self.message = message
        self.httpStatus = httpStatus
        self.retryAfter = retryAfter
    }

    /// Whether the server refused a request whole, before carrying out any of it: a refused or
    /// missing session (`401`, Parse's `209`), a refused key (`403`), or no session to send.
    public var refusedBeforeApplying: Bool {
        code == .unauthorized || code == .notLoggedIn || (code == .server && httpStatus == 403)
    }

    /// Whether trying again later may succeed: no answer, a 5xx, or a 429.
    public var isRetryable: Bool {
        switch code {
        case .network: true
        case .server: (httpStatus ?? 500) >= 500 || httpStatus == 429 || httpStatus == 408
        default: false
        }
    }

    /// The RhoConnect client's number for this error (`RhoError.h`): 1 network, 2 remote server
    /// (an unknown client included), 4 unexpected server response, 7 not logged in, 8 custom
    /// sync server (refused changes), 9 unauthorized, 10 cancelled by the user, 11 sync
    /// version, 3 runtime otherwise.
    public var rhoConnectCode: Int {
        switch code {
        case .network: 1
        case .server, .unknownClient: 2
        case .protocolViolation, .answerTooLarge: 4
        case .notLoggedIn: 7
        case .refusedChanges: 8
        case .unauthorized: 9
        case .cancelled: 10
        case .versionMismatch: 11
        default: 3
        }
    }

    public var description: String {
        "\(code): \(message)" + (httpStatus.map { " (HTTP \($0))" } ?? "")
    }
}
