import Foundation
import SalesforceTestServer
import Satchel
import SatchelSalesforce
import SatchelSync

/// A first pull from the loopback Salesforce (the tests' server, started in this process): every
/// record of an object into an empty store, through the Salesforce adapter and the engine
/// (describe, SOQL pages by `nextRecordsUrl`), against fetching and parsing the same pages — the
/// same SOQL, over the same HTTP client — without storing them. Not part of the default groups.
enum SalesforceBench {
    static func run(count: Int, directory: String?) async throws {
        let fileManager = FileManager.default
        let base = directory ?? fileManager.temporaryDirectory.appendingPathComponent("satchel-salesforce-bench-\(ProcessInfo.processInfo.processIdentifier)").path
        try fileManager.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { if directory == nil { try? fileManager.removeItem(atPath: base) } }

        var fixture = SalesforceFixture()
        fixture.objects["Product"] = SalesforceFixture.ObjectSchema(keyPrefix: "01t", fields: [
            .init(name: "name", type: "string"), .init(name: "price", type: "int"), .init(name: "brand", type: "string"),
            .init(name: "stock", type: "int"), .init(name: "description", type: "string"),
        ])
        fixture.queryPageSize = SyncBench.pageSize
        let server = try await SalesforceServer.start(fixture)
        defer { Task { await server.stop() } }
        var generator = BenchData.Generator()
        for _ in 0..<count {
            let item = generator.next().attributes
            let record = item.filter { name, _ in ["name", "price", "brand", "stock", "description"].contains(name) }
            await server.insert("Product", Data(record.jsonBytes), id: nil)
        }
        log("salesforce: \(count) records in the loopback org at \(server.url.absoluteString), pages of \(SyncBench.pageSize)")

        let http = SyncHTTPClient(timeout: 120)
        let token = await server.token(for: "ann")
        let soql = "SELECT Id, LastModifiedDate, name, price, brand, stock, description, CreatedDate, SystemModstamp, IsDeleted FROM Product ORDER BY LastModifiedDate, Id"
        var pull = Double.infinity, fetch = Double.infinity
        // Interleaved rounds: noise lands on both alike; each keeps its best.
        for round in 0..<3 {
            let backend = SalesforceBackend(configuration: .init(url: server.url, timeout: 120))
            pull = min(pull, try await SyncBench.firstSync(from: backend, credentials: Credentials(user: "ann", password: "secret"), count: count, path: "\(base)/pull-\(round)").0)
            let start = ContinuousClock.now
            let fetched = try await fetchAll(server.url, version: server.version, soql: soql, token: token, http: http)
            guard fetched == count else { throw SatchelError(.unknown, "fetched \(fetched) records, not \(count)") }
            fetch = min(fetch, Report.seconds(ContinuousClock.now - start))
        }
        Report.line("salesforce_pull", n: count, satchel: Double(count) / pull, unit: "records/s", baselines: [("http_fetch", Double(count) / fetch)])
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
