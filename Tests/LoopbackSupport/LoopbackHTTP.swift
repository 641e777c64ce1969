public import Foundation
public import FlyingFox
import FlyingSocks

/// A request a loopback server received, for tests to inspect: the servers' request logs.
public struct LoopbackRequest: Sendable {
    public var method: String
    /// The path without the query, e.g. `/parse/classes/Product`.
    public var path: String
    /// The query's parameters, percent-decoded.
    public var query: [String: String]
    /// The headers, by lower-cased name.
    public var headers: [String: String]
    public var body: Data

    public init(method: String, path: String, query: [String: String], headers: [String: String], body: Data) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
    }
}

/// Starting a loopback server's HTTP side.
public enum LoopbackHTTP {
    /// An HTTP server listening on 127.0.0.1, its port, and the task running it.
    ///
    /// The server binds port 0 and the kernel picks the port as it binds: a port chosen first and
    /// bound after can be taken meanwhile (by another test's server, or by one of the tests'
    /// outgoing connections), and the server then never listens.
    public static func start(_ what: String, timeout: TimeInterval = 30) async throws -> (http: HTTPServer, port: UInt16, task: Task<Void, any Error>)
    {
        let http = HTTPServer(address: try .inet(ip4: "127.0.0.1", port: 0), timeout: timeout, logger: .disabled)
        let task = Task { try await http.run() }
        try await http.waitUntilListening(timeout: 30)
        guard case .ip4(_, let port)? = await http.listeningAddress else {
            task.cancel()
            throw LoopbackError(description: "the loopback \(what) server has no port")
        }
        return (http, port, task)
    }
}

/// A loopback test server: an actor that answers every request of its HTTP server.
public protocol LoopbackServing: Actor {
    func handle(_ request: HTTPRequest) async -> HTTPResponse
}

extension LoopbackHTTP {
    /// Starts an HTTP server on 127.0.0.1, makes the loopback server that answers it (`make`
    /// gets the HTTP server, its port and the task running it), and routes every request to it;
    /// returns the loopback server.
    public static func serve<Server: LoopbackServing>(
        _ what: String, _ make: (HTTPServer, UInt16, Task<Void, any Error>) -> Server
    ) async throws -> Server {
        let (http, port, task) = try await start(what)
        let server = make(http, port, task)
        await http.appendRoute("*") { [weak server] request in
            guard let server else { return HTTPResponse(statusCode: .internalServerError) }
            return await server.handle(request)
        }
        return server
    }
}

/// A loopback server could not start.
public struct LoopbackError: Error, CustomStringConvertible {
    public var description: String
}
