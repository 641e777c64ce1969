import Foundation
import SalesforceTestServer
import Satchel
import SatchelSalesforce
import SatchelSync

/// The loopback Salesforce (the tests' server, started in this process), through the Salesforce
/// adapter and the engine. Not part of the default groups.
///
/// - `salesforce_pull`: a first pull of every record of an object into an empty store (describe,
///   SOQL pages by `nextRecordsUrl`), against fetching and parsing the same pages — the same
///   SOQL, over the same HTTP client — without storing them.
/// - `salesforce_push`: local creates, then an update of each, pushed by a sync
///   (`/composite/sobjects`, 200 records a call, then the pull that brings the records back),
///   against posting the same batches over the same HTTP client.
enum SalesforceBench {
    static func run(count: Int, directory: String?) async throws {
        let base = try Report.scratchDirectory("salesforce", given: directory)
        defer { Report.removeScratch(base, given: directory) }
        try await pull(count: count, base: base)
        try await push(count: count, base: base)
    }

    static func pull(count: Int, base: String) async throws {
        var fixture = SalesforceFixture()
        fixture.objects["Product"] = SalesforceFixture.ObjectSchema(
            keyPrefix: "01t",
            fields: [
                .init(name: "name", type: "string"), .init(name: "price", type: "int"), .init(name: "brand", type: "string"),
                .init(name: "stock", type: "int"), .init(name: "description", type: "string"),
            ])
        fixture.queryPageSize = SyncBench.pageSize
        let server = try await SalesforceServer.start(fixture)
        var generator = BenchData.Generator()
        for _ in 0..<count {
            let item = generator.next().attributes
            let record = item.filter { name, _ in ["name", "price", "brand", "stock", "description"].contains(name) }
            await server.insert("Product", Data(record.jsonBytes), id: nil)
        }
        log("salesforce: \(count) records in the loopback org at \(server.url.absoluteString), pages of \(SyncBench.pageSize)")

        let http = SyncHTTPClient(timeout: 120)
        let token = await server.token(for: "ann")
        let soql =
            "SELECT Id, LastModifiedDate, name, price, brand, stock, description, CreatedDate, SystemModstamp, IsDeleted FROM Product ORDER BY LastModifiedDate, Id"
        var pull = Double.infinity, fetch = Double.infinity
        // Interleaved rounds: noise lands on both alike; each keeps its best.
        for round in 0..<3 {
            let backend = SalesforceBackend(configuration: .init(url: server.url, timeout: 120))
            pull = min(
                pull,
                try await SyncBench.firstSync(
                    from: backend, credentials: Credentials(user: "ann", password: "secret"), count: count, path: "\(base)/pull-\(round)"
                ).0)
            let start = ContinuousClock.now
            let fetched = try await fetchAll(server.url, version: server.version, soql: soql, token: token, http: http)
            guard fetched == count else { throw SatchelError(.unknown, "fetched \(fetched) records, not \(count)") }
            fetch = min(fetch, Report.seconds(ContinuousClock.now - start))
        }
        await server.stop()
        Report.line("salesforce_pull", n: count, satchel: Double(count) / pull, unit: "records/s", baselines: [("http_fetch", Double(count) / fetch)])
    }

    /// The records of a composite call (Salesforce's most).
    static let batch = 200

    /// `salesforce_push`: `count` local creates pushed by a sync, then an update of each (a new
    /// price), pushed by another, against posting the same records in the same batches of
    /// ``batch`` (`POST`, then `PATCH` with each record's `id`) over the same HTTP client. The
    /// local writes are not timed, nor is the device's first sync (the describe). Each round
    /// writes into two new objects of the org; the sides take turns going first, phase by phase,
    /// so noise lands on both alike; each keeps its best of three.
    static func push(count: Int, base: String) async throws {
        let items = BenchData.make(count: count, seed: 7)
        var fixture = SalesforceFixture()
        let fields: [SalesforceFixture.Field] = [
            .init(name: "name", type: "string"), .init(name: "brand", type: "string"), .init(name: "price", type: "int"),
            .init(name: "quantity", type: "int"), .init(name: "sku", type: "string"), .init(name: "category", type: "string"),
            .init(name: "created", type: "string"), .init(name: "description", type: "string"),
        ]
        let rounds = 3
        for round in 0..<rounds {
            fixture.objects[satchelObject(round)] = SalesforceFixture.ObjectSchema(keyPrefix: "a0\(round)", fields: fields)
            fixture.objects[httpObject(round)] = SalesforceFixture.ObjectSchema(keyPrefix: "a1\(round)", fields: fields)
        }
        fixture.queryPageSize = SyncBench.pageSize
        let server = try await SalesforceServer.start(fixture)
        log("salesforce: \(count) local creates then \(count) updates pushed to the loopback org, \(batch) records a composite call")
        let http = SyncHTTPClient(timeout: 120)
        let token = await server.token(for: "ann")

        var pushed = Double.infinity, posted = Double.infinity
        for round in 0..<rounds {
            let backend = SalesforceBackend(configuration: .init(url: server.url, timeout: 120))
            let device = try await PushDevice(backend: backend, model: satchelObject(round), path: "\(base)/push-\(round)")
            let poster = Poster(server: server, object: httpObject(round), token: token, http: http)
            let (satchel, direct) = try await device.race(round: round, items) { try await poster.post($0, update: $1) }
            try await check(server, satchelObject(round), items)
            try await check(server, httpObject(round), items)
            pushed = min(pushed, satchel)
            posted = min(posted, direct)
        }
        await server.stop()
        Report.line(
            "salesforce_push", n: count, satchel: Double(2 * count) / pushed, unit: "changes/s",
            baselines: [("http_composite", Double(2 * count) / posted)])
    }

    static func satchelObject(_ round: Int) -> String { "PushSatchel\(round)__c" }
    static func httpObject(_ round: Int) -> String { "PushHTTP\(round)__c" }

    /// Whether the org holds `items` in `object`, every one with its new price.
    static func check(_ server: SalesforceServer, _ object: String, _ items: [BenchData.Item]) async throws {
        let records = await server.records(object).values.compactMap { try? JSONValue(parsing: $0) }
        let prices = Dictionary(records.map { ($0["sku"]?.stringValue ?? "", $0["price"]) }, uniquingKeysWith: { first, _ in first })
        guard records.count == items.count, items.allSatisfy({ prices[$0.attributes["sku"]?.stringValue ?? ""] == BulkSave.newPrice($0) }) else {
            throw SatchelError(.unknown, "\(object) holds \(records.count) records, not \(items.count) updated ones")
        }
    }

    /// The same records posted to `/composite/sobjects` over the HTTP client, checking every
    /// record's result.
    final class Poster {
        let root: URL
        let version: String
        let object: String
        let token: String
        let http: SyncHTTPClient
        /// Local id → the org's id, once the creates are posted.
        var serverIDs: [String: String] = [:]

        init(server: SalesforceServer, object: String, token: String, http: SyncHTTPClient) {
            root = server.url
            version = server.version
            self.object = object
            self.token = token
            self.http = http
        }

        /// Seconds to post every create (or update) in batches of ``SalesforceBench/batch``.
        func post(_ items: [BenchData.Item], update: Bool) async throws -> Double {
            let url = try SyncHTTPClient.url(root, "services/data/v\(version)/composite/sobjects")
            let headers = ["Authorization": "Bearer " + token, "Content-Type": "application/json"]
            let start = ContinuousClock.now
            var index = 0
            while index < items.count {
                let slice = items[index..<min(index + SalesforceBench.batch, items.count)]
                let records: [JSONValue] = slice.map { item in
                    var record: JSONObject = ["attributes": ["type": .string(object)]]
                    if update {
                        record["id"] = .string(serverIDs[item.id] ?? "")
                        record["price"] = BulkSave.newPrice(item)
                    } else {
                        for (name, value) in item.attributes { record[name] = value }
                    }
                    return .object(record)
                }
                let body: JSONObject = ["allOrNone": false, "records": .array(records)]
                let answer = try await http.send(update ? "PATCH" : "POST", url, headers: headers, body: Data(body.jsonBytes))
                let results = try JSONValue(parsing: answer.body).arrayValue ?? []
                guard answer.status == 200, results.count == slice.count, results.allSatisfy({ $0["success"] == true }) else {
                    throw SatchelError(.unknown, "\(update ? "PATCH" : "POST") /composite/sobjects: HTTP \(answer.status) \(answer.text.prefix(200))")
                }
                if !update {
                    for (item, result) in zip(slice, results) { serverIDs[item.id] = result["id"]?.stringValue }
                }
                index += slice.count
            }
            return Report.seconds(ContinuousClock.now - start)
        }
    }

    /// Runs the query and follows `nextRecordsUrl`, parsing every page; returns the record count.
    static func fetchAll(_ root: URL, version: String, soql: String, token: String, http: SyncHTTPClient) async throws -> Int {
        var url = try SyncHTTPClient.url(root, "services/data/v\(version)/query", [("q", soql)])
        var total = 0
        while true {
            let answer = try await http.send("GET", url, headers: ["Authorization": "Bearer " + token])
            guard answer.status == 200 else { throw SatchelError(.unknown, "GET \(url): HTTP \(answer.status) \(answer.text)") }
            let body = try JSONValue(parsing: answer.body)
            total += body["records"]?.arrayValue?.count ?? 0
            guard body["done"] == false, let next = body["nextRecordsUrl"]?.stringValue else { return total }
            url = try SyncHTTPClient.url(root, String(next.dropFirst()))
        }
    }

    static func log(_ text: String) { FileHandle.standardError.write(Data((text + "\n").utf8)) }
}
