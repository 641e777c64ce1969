public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A loopback HTTP/1.1 server on plain sockets that does what a framework will not: on each
/// connection it answers the first request (`200`, `{}`, the connection kept), then reads the
/// next one whole — head and body — and closes the connection without answering: a server
/// that carried a request out and lost its answer, on a connection the client reused.
public final class ClosingServer: Sendable {
    /// A request as read: its request line and its body.
    public struct Request: Sendable, Equatable {
        public var line: String
        public var body: String

        public init(line: String, body: String) {
            self.line = line
            self.body = body
        }
    }

    public let url: URL
    private let listener: Int32
    private let received = RequestLog()

    /// The requests read, shared with the connections' threads, behind a pthread mutex (which
    /// ThreadSanitizer sees, unlike `Synchronization.Mutex` on Linux: the sanitizer run takes
    /// this server's test too).
    ///
    /// `@unchecked Sendable`: a box around a C mutex; `requests` is only touched while it is held.
    private final class RequestLog: @unchecked Sendable {
        private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        private var requests: [Request] = []

        init() { pthread_mutex_init(mutex, nil) }

        deinit {
            pthread_mutex_destroy(mutex)
            mutex.deallocate()
        }

        func append(_ request: Request) {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            requests.append(request)
        }

        var all: [Request] {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return requests
        }
    }

    public init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw POSIXError(.EIO) }
        self.listener = listener
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 16) == 0 else { throw POSIXError(.EADDRINUSE) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        url = URL(string: "http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))")!
        Thread.detachNewThread { [received] in
            while true {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else {
                    close(listener)  // stopped: closed here, not under an accept in another thread
                    return
                }
                Thread.detachNewThread { Self.serve(connection, into: received) }
            }
        }
    }

    /// The requests read so far, in order.
    public var requests: [Request] { received.all }

    /// Stops accepting: the accepting thread then closes the socket.
    public func stop() { shutdown(listener, Int32(SHUT_RDWR)) }

    private static func serve(_ connection: Int32, into received: RequestLog) {
        defer { close(connection) }
        var buffer: [UInt8] = []
        for answered in [true, false] {
            guard let request = read(from: connection, &buffer) else { return }
            received.append(request)
            guard answered else { return }  // closed with no answer
            let answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\n{}"
            _ = answer.utf8CString.withUnsafeBufferPointer { send(connection, $0.baseAddress, $0.count - 1, 0) }
        }
    }

    /// The next request on `connection`, read whole (its body by `Content-Length`); nil when
    /// the connection ends first.
    private static func read(from connection: Int32, _ buffer: inout [UInt8]) -> Request? {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        var chunk = [UInt8](repeating: 0, count: 4096)
        func fill() -> Bool {
            let count = recv(connection, &chunk, chunk.count, 0)
            guard count > 0 else { return false }
            buffer += chunk[..<count]
            return true
        }
        var headEnd: Int?
        while headEnd == nil {
            headEnd = buffer.indices.dropLast(3).first { Array(buffer[$0..<$0 + 4]) == separator }
            if headEnd == nil, !fill() { return nil }
        }
        let head = String(decoding: buffer[..<headEnd!], as: UTF8.self)
        let lines = head.components(separatedBy: "\r\n")
        let length =
            lines.dropFirst().compactMap { line -> Int? in
                let parts = line.split(separator: ":", maxSplits: 1)
                return parts.count == 2 && parts[0].lowercased() == "content-length" ? Int(parts[1].trimmingCharacters(in: .whitespaces)) : nil
            }.first ?? 0
        let bodyStart = headEnd! + 4
        while buffer.count < bodyStart + length {
            if !fill() { return nil }
        }
        let body = String(decoding: buffer[bodyStart..<bodyStart + length], as: UTF8.self)
        buffer.removeFirst(bodyStart + length)
        return Request(line: lines[0], body: body)
    }
}
