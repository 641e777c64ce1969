public import Foundation
import FlyingFox
import FlyingSocks
import Synchronization

/// A loopback server that answers like a broken or hostile one: bodies far larger than any
/// page, bodies that never end or trickle forever, JSON of ten million values or a hundred
/// thousand levels, redirects to plain `http://` elsewhere. It counts the bytes it managed to
/// send, so a test can tell that a client stopped reading early (its memory stayed bounded)
/// rather than swallowing the whole answer.
public final class HostileServer: Sendable {
    /// What the server answers with.
    public enum Answer: Sendable {
        /// `bytes` of `[0,0,0,…]`-like filler, announced by `Content-Length` or sent chunked.
        case huge(bytes: Int, announced: Bool)
        /// A chunked body that never ends.
        case endless
        /// One byte every `interval`, forever.
        case trickle(interval: Duration)
        /// A JSON array of `count` zeros (`[0,0,…]`), sent chunked.
        case array(count: Int)
        /// `depth` nested arrays (`[[[…]]]`), sent chunked.
        case nested(depth: Int)
        /// A redirect to `location`.
        case redirect(location: String)
        /// A plain JSON body.
        case json(String)
        /// `status` with a plain text body.
        case status(Int, String)
        /// A 401 with a JSON body and `WWW-Authenticate: <scheme> realm="Realm"` (Kinto's answer
        /// to a wrong password).
        case challenge(scheme: String, body: String)
    }

    public let url: URL
    private let http: HTTPServer
    private let task: Task<Void, any Error>
    private let answers: [String: Answer]
    private let counter: ByteCounter
    private let requestCounter = ByteCounter()
    private let credentialCounter = ByteCounter()

    /// Starts a server answering each path with `answers[path]` (404 for others).
    public static func start(_ answers: [String: Answer]) async throws -> HostileServer {
        // FlyingFox answers 500 to a request its handler has not answered within the timeout:
        // under ThreadSanitizer, with the 200 MB answers of other tests running, the handler
        // once waited longer than 30 s to be scheduled (two tests got a 500 instead of their
        // answer). The answers here are made at once; the timeout is only a backstop.
        let (http, port, task) = try await LoopbackHTTP.start("hostile", timeout: 600)
        let server = HostileServer(http: http, task: task, port: port, answers: answers)
        await http.appendRoute("*") { [weak server] request in
            guard let server else { return HTTPResponse(statusCode: .internalServerError) }
            return server.respond(request)
        }
        return server
    }

    private init(http: HTTPServer, task: Task<Void, any Error>, port: UInt16, answers: [String: Answer]) {
        self.http = http
        self.task = task
        self.url = URL(string: "http://127.0.0.1:\(port)")!
        self.answers = answers
        self.counter = ByteCounter()
    }

    /// The body bytes handed to the connection so far, over every request.
    public var bytesSent: Int { counter.value }
    /// The requests received so far.
    public var requestsReceived: Int { requestCounter.value }
    /// The requests received so far that carried a credential: a `Cookie`, an `Authorization`,
    /// or a header of Parse's or RhoConnect's own (`X-Parse-…`, `X-RhoConnect-…`), or a
    /// `client_id` in the query.
    public var requestsWithCredentials: Int { credentialCounter.value }

    public func stop() async {
        await http.stop(timeout: 1)
        task.cancel()
    }

    private func respond(_ request: HTTPRequest) -> HTTPResponse {
        requestCounter.add(1)
        let credential = request.headers.keys.contains { name in
            let name = name.rawValue.lowercased()
            return name == "cookie" || name == "authorization" || name.hasPrefix("x-parse-") || name.hasPrefix("x-rhoconnect-")
        }
        if credential || request.query.contains(where: { $0.name == "client_id" }) { credentialCounter.add(1) }
        guard let answer = answers[request.path] else { return HTTPResponse(statusCode: .notFound) }
        let json: HTTPHeaders = [.contentType: "application/json"]
        switch answer {
        case .huge(let bytes, let announced):
            let body = GeneratedBody(counter: counter, limit: bytes) { offset, count in Self.zeros(from: offset, count) }
            return HTTPResponse(
                statusCode: .ok, headers: json, body: announced ? HTTPBodySequence(from: body, count: bytes) : HTTPBodySequence(from: body))
        case .endless:
            let body = GeneratedBody(counter: counter, limit: nil) { offset, count in Self.zeros(from: offset, count) }
            return HTTPResponse(statusCode: .ok, headers: json, body: HTTPBodySequence(from: body))
        case .trickle(let interval):
            let body = GeneratedBody(counter: counter, limit: nil, chunk: 1, pause: interval) { _, count in
                [UInt8](repeating: UInt8(ascii: "["), count: count)
            }
            return HTTPResponse(statusCode: .ok, headers: json, body: HTTPBodySequence(from: body))
        case .array(let count):
            // "[" + "0," × (count - 1) + "0]": after the bracket, the filler shifted by one.
            let total = 2 * count + 1
            let body = GeneratedBody(counter: counter, limit: total) { offset, length in
                var bytes = Self.zeros(from: offset - 1, length)
                if offset == 0 { bytes[0] = UInt8(ascii: "[") }
                if offset + length == total { bytes[length - 1] = UInt8(ascii: "]") }
                return bytes
            }
            return HTTPResponse(statusCode: .ok, headers: json, body: HTTPBodySequence(from: body))
        case .nested(let depth):
            let body = GeneratedBody(counter: counter, limit: 2 * depth) { offset, count in
                (offset..<offset + count).map { $0 < depth ? UInt8(ascii: "[") : UInt8(ascii: "]") }
            }
            return HTTPResponse(statusCode: .ok, headers: json, body: HTTPBodySequence(from: body))
        case .redirect(let location):
            var headers = HTTPHeaders()
            headers[.location] = location
            return HTTPResponse(statusCode: .found, headers: headers)
        case .json(let text):
            return HTTPResponse(statusCode: .ok, headers: json, body: Data(text.utf8))
        case .status(let code, let text):
            return HTTPResponse(statusCode: HTTPStatusCode(code, phrase: "Status"), body: Data(text.utf8))
        case .challenge(let scheme, let text):
            var headers = json
            headers[HTTPHeader("WWW-Authenticate")] = "\(scheme) realm=\"Realm\""
            return HTTPResponse(statusCode: .unauthorized, headers: headers, body: Data(text.utf8))
        }
    }

    /// `count` bytes of `0,0,0,…` as they stand from `offset` on (even offsets hold `0`).
    static func zeros(from offset: Int, _ count: Int) -> [UInt8] {
        let start = offset & 1 == 0 ? 0 : 1
        return Array(filler[start..<start + count])
    }

    /// `0,0,0,…`, one byte longer than any chunk, made once.
    static let filler: [UInt8] = (0..<(GeneratedBody.largestChunk + 1)).map { $0 & 1 == 0 ? UInt8(ascii: "0") : UInt8(ascii: ",") }
}

/// The count of body bytes a ``HostileServer`` produced (an atomic, which ThreadSanitizer sees,
/// unlike `Mutex` on Linux).
final class ByteCounter: Sendable {
    private let count = Atomic(0)
    var value: Int { count.load(ordering: .relaxed) }
    func add(_ n: Int) { count.add(n, ordering: .relaxed) }
}

/// A body made as it is sent: `make(offset, count)` gives `count` bytes from `offset` on, up to
/// `limit` bytes or without end, at most `chunk` bytes at a time, with an optional pause between
/// chunks.
struct GeneratedBody: AsyncBufferedSequence, Sendable {
    typealias Element = UInt8
    static let largestChunk = 64 * 1024
    let counter: ByteCounter
    let limit: Int?
    var chunk: Int
    var pause: Duration?
    let make: @Sendable (_ offset: Int, _ count: Int) -> [UInt8]

    init(
        counter: ByteCounter, limit: Int?, chunk: Int = GeneratedBody.largestChunk, pause: Duration? = nil,
        make: @escaping @Sendable (_ offset: Int, _ count: Int) -> [UInt8]
    ) {
        self.counter = counter
        self.limit = limit
        self.chunk = Swift.min(chunk, Self.largestChunk)
        self.pause = pause
        self.make = make
    }

    func makeAsyncIterator() -> Iterator { Iterator(body: self) }

    struct Iterator: AsyncBufferedIteratorProtocol {
        let body: GeneratedBody
        var offset = 0

        mutating func next() async throws -> UInt8? { try await nextBuffer(suggested: 1)?.first }

        mutating func nextBuffer(suggested count: Int) async throws -> [UInt8]? {
            if let limit = body.limit, offset >= limit { return nil }
            if let pause = body.pause, offset > 0 { try await Task.sleep(for: pause) }
            try Task.checkCancellation()
            let wanted = Swift.min(Swift.max(1, Swift.min(count, body.chunk)), body.limit.map { $0 - offset } ?? .max)
            let buffer = body.make(offset, wanted)
            offset += wanted
            body.counter.add(wanted)
            return buffer
        }
    }
}
