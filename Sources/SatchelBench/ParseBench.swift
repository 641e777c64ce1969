import Foundation
import ParseTestServer
import Satchel
import SatchelParse
import SatchelSync

/// A first pull from the loopback Parse Server (the tests' server, started in this process):
/// every object of a class into an empty store, in pages of 1,000, through the Parse adapter and
/// the engine (the id listing that finds deletions included), against fetching and parsing the
/// same pages — the same keyset queries, over the same HTTP client — without storing them (what
/// the server and HTTP cost alone). Not part of the default groups.
enum ParseBench {
    static let pageSize = SyncBench.pageSize

    static func run(count: Int, directory: String?) async throws {
        let fileManager = FileManager.default
        let base = directory ?? fileManager.temporaryDirectory.appendingPathComponent("satchel-parse-bench-\(ProcessInfo.processInfo.processIdentifier)").path
        try fileManager.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { if directory == nil { try? fileManager.removeItem(atPath: base) } }

        let server = try await ParseServer.start()
        defer { Task { await server.stop() } }
        var generator = BenchData.Generator()
        for _ in 0..<count { _ = await server.put("Product", Data(generator.next().attributes.jsonBytes), id: nil) }
        log("parse: \(count) objects in the loopback Parse Server at \(server.url.absoluteString), pages of \(pageSize)")

        let http = SyncHTTPClient(timeout: 120)
        var headers = ["X-Parse-Application-Id": server.appID]
        if let key = server.restKey { headers["X-Parse-REST-API-Key"] = key }
        var pull = Double.infinity, fetch = Double.infinity
        // Interleaved rounds: noise lands on both alike; each keeps its best.
        for round in 0..<3 {
            let backend = ParseBackend(configuration: .init(url: server.url, applicationID: server.appID, restKey: server.restKey, timeout: 120))
            pull = min(pull, try await SyncBench.firstSync(from: backend, credentials: Credentials(user: "ann", password: "secret"), count: count, path: "\(base)/pull-\(round)").0)
            let start = ContinuousClock.now
            let fetched = try await fetchAll(server.url, headers: headers, http: http)
            guard fetched == count else { throw SatchelError(.unknown, "fetched \(fetched) objects, not \(count)") }
            fetch = min(fetch, Report.seconds(ContinuousClock.now - start))
        }
        Report.line("parse_pull", n: count, satchel: Double(count) / pull, unit: "objects/s", baselines: [("http_fetch", Double(count) / fetch)])
    }

    /// Fetches every page as the adapter asks for them (a keyset on `(updatedAt, objectId)`, then
    /// the id listing) and parses each; returns the object count.
    static func fetchAll(_ mount: URL, headers: [String: String], http: SyncHTTPClient) async throws -> Int {
        var total = 0
        var last: (String, String)?
        while true {
            var query = [("order", "updatedAt,objectId"), ("limit", String(pageSize))]
            if let (date, id) = last {
                let wrapper: JSONValue = ["__type": "Date", "iso": .string(date)]
                let keyset: JSONValue = ["$or": [["updatedAt": ["$gt": wrapper]], ["updatedAt": wrapper, "objectId": ["$gt": .string(id)]]]]
                query.insert(("where", String(decoding: keyset.jsonBytes, as: UTF8.self)), at: 0)
            }
            let results = try await page(try SyncHTTPClient.url(mount, "classes/Product", query), headers: headers, http: http)
            guard let final = results.last else { break }
            total += results.count
            last = (final["updatedAt"]?.stringValue ?? "", final["objectId"]?.stringValue ?? "")
        }
        var lastID: String?
        while true {
            var query = [("keys", "objectId"), ("order", "objectId"), ("limit", "1000")]
            if let lastID {
                let after: JSONValue = ["objectId": ["$gt": .string(lastID)]]
                query.insert(("where", String(decoding: after.jsonBytes, as: UTF8.self)), at: 0)
            }
            let results = try await page(try SyncHTTPClient.url(mount, "classes/Product", query), headers: headers, http: http)
            guard let final = results.last else { break }
            lastID = final["objectId"]?.stringValue
        }
        return total
    }

    static func page(_ url: URL, headers: [String: String], http: SyncHTTPClient) async throws -> [JSONValue] {
        let answer = try await http.send("GET", url, headers: headers)
        guard answer.status == 200 else { throw SatchelError(.unknown, "GET \(url): HTTP \(answer.status) \(answer.text)") }
        return try JSONValue(parsing: answer.body)["results"]?.arrayValue ?? []
    }

    static func log(_ text: String) { FileHandle.standardError.write(Data((text + "\n").utf8)) }
}
