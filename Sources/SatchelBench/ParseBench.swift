import Foundation
import ParseTestServer
import Satchel
import SatchelParse
import SatchelSync

/// The Parse adapter against the loopback Parse Server (the tests' server, started in this
/// process). Not part of the default groups.
///
/// - `parse_pull`: a first pull of every object of a class into an empty store, in pages of
///   1,000, through the adapter and the engine (the id listing that finds deletions included),
///   against fetching and parsing the same pages — the same keyset queries, over the same HTTP
///   client — without storing them (what the server and HTTP cost alone).
/// - `parse_push`, `parse_push_object_ids`: local creates and updates pushed by syncs, with
///   request ids (the default) and with custom object ids, against posting the same `/batch`es.
enum ParseBench {
    static let pageSize = SyncBench.pageSize

    static func run(count: Int, directory: String?) async throws {
        let base = try Report.scratchDirectory("parse", given: directory)
        defer { Report.removeScratch(base, given: directory) }

        let server = try await ParseServer.start()
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
            pull = min(
                pull,
                try await SyncBench.firstSync(
                    from: backend, credentials: Credentials(user: "ann", password: "secret"), count: count, path: "\(base)/pull-\(round)"
                ).0)
            let start = ContinuousClock.now
            let fetched = try await fetchAll(server.url, headers: headers, http: http)
            guard fetched == count else { throw SatchelError(.unknown, "fetched \(fetched) objects, not \(count)") }
            fetch = min(fetch, Report.seconds(ContinuousClock.now - start))
        }
        Report.line("parse_pull", n: count, satchel: Double(count) / pull, unit: "objects/s", baselines: [("http_fetch", Double(count) / fetch)])
        await server.stop()
        try await push(count: count, base: base, protection: .requestIDs, measure: "parse_push")
        try await push(count: count, base: base, protection: .customObjectIDs, measure: "parse_push_object_ids")
    }

    /// The requests of a `/batch` (Parse's hosted limit, the adapter's default).
    static let batch = 50

    /// `parse_push` (and `parse_push_object_ids`): `count` local creates pushed by a sync, then an
    /// update of each (a new price) pushed by another, through the adapter with `protection` —
    /// request ids: each create its own request, eight at a time, and the updates in batches;
    /// custom object ids: creates and updates in batches — against posting the same objects in
    /// `/batch`es of ``batch`` over the same HTTP client. Each round writes into two new classes
    /// of a server with idempotency and custom ids on; the sides take turns going first, phase by
    /// phase; each keeps its best of three.
    static func push(count: Int, base: String, protection: ParseBackend.CreateProtection, measure: String) async throws {
        let items = BenchData.make(count: count, seed: 7)
        var fixture = ParseFixture()
        fixture.idempotency = ParseFixture.Idempotency()
        fixture.allowCustomObjectID = true
        let server = try await ParseServer.start(fixture)
        defer { Task { await server.stop() } }
        log("parse: \(count) local creates then \(count) updates pushed to the loopback Parse Server (\(protection)), against /batch of \(batch)")
        let http = SyncHTTPClient(timeout: 120)
        var headers = ["X-Parse-Application-Id": server.appID, "Content-Type": "application/json"]
        if let key = server.restKey { headers["X-Parse-REST-API-Key"] = key }
        var pushed = Double.infinity, posted = Double.infinity
        for round in 0..<3 {
            var configuration = ParseBackend.Configuration(url: server.url, applicationID: server.appID, restKey: server.restKey, timeout: 120)
            configuration.createProtection = protection
            let device = try await PushDevice(
                backend: ParseBackend(configuration: configuration), model: "PushSatchel\(round)", path: "\(base)/push-\(round)")
            let poster = Poster(mount: server.url, className: "PushHTTP\(round)", headers: headers, http: http)
            let (satchel, direct) = try await device.race(round: round, items) { try await poster.post($0, update: $1) }
            for className in ["PushSatchel\(round)", "PushHTTP\(round)"] {
                let objects = await server.objects(className).values.compactMap { try? JSONValue(parsing: $0) }
                let prices = Dictionary(objects.map { ($0["sku"]?.stringValue ?? "", $0["price"]) }, uniquingKeysWith: { first, _ in first })
                guard objects.count == items.count, items.allSatisfy({ prices[$0.attributes["sku"]?.stringValue ?? ""] == BulkSave.newPrice($0) })
                else {
                    throw SatchelError(.unknown, "\(className) holds \(objects.count) objects, not \(items.count) updated ones")
                }
            }
            pushed = min(pushed, satchel)
            posted = min(posted, direct)
        }
        Report.line(
            measure, n: count, satchel: Double(2 * count) / pushed, unit: "changes/s", baselines: [("http_batch", Double(2 * count) / posted)])
    }

    /// The same objects posted in `/batch`es over the HTTP client, checking every result.
    final class Poster {
        let mount: URL
        let className: String
        let headers: [String: String]
        let http: SyncHTTPClient
        /// Local id → objectId, once the creates are posted.
        var serverIDs: [String: String] = [:]

        init(mount: URL, className: String, headers: [String: String], http: SyncHTTPClient) {
            self.mount = mount
            self.className = className
            self.headers = headers
            self.http = http
        }

        /// Seconds to post every create (or update) in batches of ``ParseBench/batch``.
        func post(_ items: [BenchData.Item], update: Bool) async throws -> Double {
            let url = try SyncHTTPClient.url(mount, "batch")
            let path = mount.path + "/classes/" + className
            let start = ContinuousClock.now
            var index = 0
            while index < items.count {
                let slice = items[index..<min(index + ParseBench.batch, items.count)]
                let requests: [JSONValue] = slice.map { item in
                    if update {
                        return [
                            "method": "PUT", "path": .string(path + "/" + (serverIDs[item.id] ?? "")), "body": ["price": BulkSave.newPrice(item)],
                        ]
                    }
                    return ["method": "POST", "path": .string(path), "body": .object(item.attributes)]
                }
                let body: JSONObject = ["requests": .array(requests)]
                let answer = try await http.send("POST", url, headers: headers, body: Data(body.jsonBytes))
                let results = try JSONValue(parsing: answer.body).arrayValue ?? []
                guard answer.status == 200, results.count == slice.count, results.allSatisfy({ $0["success"] != nil }) else {
                    throw SatchelError(.unknown, "POST /batch: HTTP \(answer.status) \(answer.text.prefix(200))")
                }
                if !update {
                    for (item, result) in zip(slice, results) { serverIDs[item.id] = result["success"]?["objectId"]?.stringValue }
                }
                index += slice.count
            }
            return Report.seconds(ContinuousClock.now - start)
        }
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
