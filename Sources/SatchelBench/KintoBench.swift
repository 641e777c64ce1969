import Foundation
import Satchel
import SatchelKinto
import SatchelSync

/// A first pull from a real Kinto server: every record of a collection into an empty store, in
/// pages of 1,000, through the Kinto adapter and the engine, against fetching and parsing the same
/// pages over the same HTTP client without storing them (what the network and Kinto cost alone).
/// Needs a running server (`scripts/kinto.sh start DIR`); not part of the default groups.
enum KintoBench {
    static let pageSize = SyncBench.pageSize

    static func run(url: URL, bucket: String, credentials: Credentials, count: Int, directory: String?) async throws {
        let base = try Report.scratchDirectory("kinto", given: directory)
        defer { Report.removeScratch(base, given: directory) }

        let http = SyncHTTPClient(timeout: 120)
        let authorization = SyncHTTPClient.basicAuthorization(credentials)
        let records = try SyncHTTPClient.url(url, "buckets/\(bucket)/collections/Product/records")
        let held = try await fetchAll(records, http: http, authorization: authorization)
        if held == 0 {
            try await seed(url: url, bucket: bucket, count: count, http: http, authorization: authorization)
        } else if held != count {
            throw SatchelError(.invalidArgument, "bucket \(bucket) holds \(held) products, not \(count): use another bucket or --objects \(held)")
        }
        log("kinto: \(count) records in \(url.absoluteString) bucket \(bucket), pages of \(pageSize)")

        var pull = Double.infinity, fetch = Double.infinity
        for round in 0..<3 {
            let backend = KintoBackend(url: url, bucket: bucket)
            pull = min(pull, try await SyncBench.firstSync(from: backend, credentials: credentials, count: count, path: "\(base)/pull-\(round)").0)
            let start = ContinuousClock.now
            let fetched = try await fetchAll(records, http: http, authorization: authorization)
            guard fetched == count else { throw SatchelError(.unknown, "fetched \(fetched) records, not \(count)") }
            fetch = min(fetch, Report.seconds(ContinuousClock.now - start))
        }
        Report.line("kinto_pull", n: count, satchel: Double(count) / pull, unit: "records/s", baselines: [("http_fetch", Double(count) / fetch)])
        try await push(
            url: url, bucket: bucket, credentials: credentials, count: min(count, pushCount), base: base, http: http, authorization: authorization)
    }

    /// Records the push measure sends: Kinto on PostgreSQL writes a few hundred a second, so more
    /// would take minutes a round.
    static let pushCount = 1000

    /// `kinto_push`: `count` local creates pushed by a sync (in `/batch` requests of 25, `PUT` with
    /// `If-None-Match: *`, then the pull that brings the records' versions back), against posting
    /// the same batches over the same HTTP client; each round into new collections, the two
    /// sides alternating which goes first; each keeps its best of three.
    static func push(url: URL, bucket: String, credentials: Credentials, count: Int, base: String, http: SyncHTTPClient, authorization: String)
        async throws
    {
        let items = BenchData.make(count: count, seed: 7)
        let headers = ["Authorization": authorization]
        let stamp = Int(Date().timeIntervalSince1970)
        let batch = KintoBackend(url: url, bucket: bucket).capabilities.maxPushBatch ?? 25
        log("kinto: \(count) local creates pushed, in batches of \(batch)")

        func collection(_ name: String) async throws {
            let path = "buckets/\(bucket)/collections/\(name)"
            let answer = try await http.send("PUT", try SyncHTTPClient.url(url, path), headers: headers, body: Data(#"{"data":{}}"#.utf8))
            guard answer.status == 200 || answer.status == 201 else {
                throw SatchelError(.unknown, "PUT \(path): HTTP \(answer.status) \(answer.text)")
            }
        }
        func satchel(_ name: String, path: String) async throws -> Double {
            let store = try Store(path: path)
            defer {
                try? store.close()
                try? FileManager.default.removeItem(atPath: path)
            }
            let model = try store.register(ModelDefinition(name: name, syncType: .incremental))
            try await store.bulkUpdate { tx in
                for item in items { _ = try tx.save(Object(id: item.id, attributes: item.attributes), in: model) }
            }
            let engine = SyncEngine(store: store, backend: KintoBackend(url: url, bucket: bucket))
            try await engine.logIn(credentials)
            let start = ContinuousClock.now
            let report = try await engine.sync()
            let seconds = Report.seconds(ContinuousClock.now - start)
            guard report.accepted == count, report.refused == 0 else {
                throw SatchelError(.unknown, "the push was accepted for \(report.accepted) of \(count) records")
            }
            return seconds
        }
        func direct(_ name: String) async throws -> Double {
            let path = "/buckets/\(bucket)/collections/\(name)/records/"
            let start = ContinuousClock.now
            var index = 0
            while index < items.count {
                let requests: [JSONValue] = items[index..<min(index + batch, items.count)].map { item in
                    [
                        "method": "PUT", "path": .string(path + KintoMapping.recordID(item.id)), "headers": ["If-None-Match": "*"],
                        "body": ["data": .object(KintoMapping.data(item.attributes))],
                    ]
                }
                let body: JSONObject = ["requests": .array(requests)]
                let answer = try await http.send("POST", try SyncHTTPClient.url(url, "batch"), headers: headers, body: Data(body.jsonBytes))
                let statuses = try JSONValue(parsing: answer.body)["responses"]?.arrayValue?.compactMap { $0["status"]?.intValue } ?? []
                guard answer.status == 200, statuses.count == requests.count, statuses.allSatisfy({ $0 == 201 }) else {
                    throw SatchelError(.unknown, "POST /batch: HTTP \(answer.status) \(answer.text.prefix(200))")
                }
                index += requests.count
            }
            return Report.seconds(ContinuousClock.now - start)
        }

        var pushed = Double.infinity, posted = Double.infinity
        for round in 0..<3 {
            let (mine, theirs) = ("PushSatchel\(stamp)r\(round)", "PushHTTP\(stamp)r\(round)")
            try await collection(mine)
            try await collection(theirs)
            if round % 2 == 0 {
                pushed = min(pushed, try await satchel(mine, path: "\(base)/push-\(round)"))
                posted = min(posted, try await direct(theirs))
            } else {
                posted = min(posted, try await direct(theirs))
                pushed = min(pushed, try await satchel(mine, path: "\(base)/push-\(round)"))
            }
        }
        Report.line("kinto_push", n: count, satchel: Double(count) / pushed, unit: "records/s", baselines: [("http_batch", Double(count) / posted)])
    }

    /// Fetches every page as the adapter asks for them and parses each; returns the record count.
    static func fetchAll(_ records: URL, http: SyncHTTPClient, authorization: String) async throws -> Int {
        var next: URL? = try SyncHTTPClient.url(records, "", [("_sort", "last_modified"), ("_limit", String(pageSize))])
        var total = 0
        while let url = next {
            let answer = try await http.send("GET", url, headers: ["Authorization": authorization])
            if answer.status == 404 || answer.status == 403 { return 0 }
            guard answer.status == 200 else { throw SatchelError(.unknown, "GET \(url): HTTP \(answer.status) \(answer.text)") }
            total += try JSONValue(parsing: answer.body)["data"]?.arrayValue?.count ?? 0
            next = answer.header("next-page").flatMap(URL.init(string:))
        }
        return total
    }

    /// Creates the bucket and collection and writes `count` bench products, 25 a batch.
    static func seed(url: URL, bucket: String, count: Int, http: SyncHTTPClient, authorization: String) async throws {
        log("kinto: writing \(count) records through the API (slow: a few hundred a second)")
        let headers = ["Authorization": authorization]
        let empty = Data(#"{"data":{}}"#.utf8)
        _ = try await http.send("PUT", try SyncHTTPClient.url(url, "buckets/\(bucket)"), headers: headers, body: empty)
        _ = try await http.send("PUT", try SyncHTTPClient.url(url, "buckets/\(bucket)/collections/Product"), headers: headers, body: empty)
        var generator = BenchData.Generator()
        var written = 0
        while written < count {
            let requests: [JSONValue] = (written..<min(written + 25, count)).map { _ in
                let item = generator.next()
                let path = "/buckets/\(bucket)/collections/Product/records/\(KintoMapping.recordID(item.id))"
                return ["method": "PUT", "path": .string(path), "body": ["data": .object(KintoMapping.data(item.attributes))]]
            }
            let body: JSONObject = ["requests": .array(requests)]
            let answer = try await http.send("POST", try SyncHTTPClient.url(url, "batch"), headers: headers, body: Data(body.jsonBytes))
            guard answer.status == 200 else { throw SatchelError(.unknown, "seeding: HTTP \(answer.status) \(answer.text)") }
            written += requests.count
        }
    }

    static func log(_ text: String) { FileHandle.standardError.write(Data((text + "\n").utf8)) }
}
