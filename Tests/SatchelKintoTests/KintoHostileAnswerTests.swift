import Foundation
import Satchel
import SatchelKinto
import SatchelSync
import SatchelSyncTesting
import Testing

/// Answers a real Kinto cannot be made to give on cue, from an in-process stub: malformed or
/// truncated bodies, and the server asking clients to wait.
// One test at a time: each starts a loopback server, whose socket pool holds a Dispatch thread
// in epoll_wait while it runs. Every such test at once, beside the other suites, reached
// Dispatch's limit of threads in full runs: URLSession's queues got none, and clients timed out.
@Suite("Kinto adapter: hostile answers, Backoff and Retry-After", .serialized)
struct KintoHostileAnswerTests {
    static let product = ModelDefinition(name: "Product")
    static let page = #"{"data":[{"id":"p1","last_modified":10,"name":"One"}]}"#

    /// A device logged in to the stub, with one object pulled and a local change pending.
    static func device(_ stub: KintoStub, retries: Int = 1) async throws -> SyncClient {
        let backend = KintoBackend(url: await stub.root, bucket: "b")
        let client = try SyncClient(backend: backend, models: [product], pageSize: 10, retry: RetryPolicy(maxAttempts: retries))
        await client.record()
        try await client.engine.logIn(Credentials(user: "ann", password: "pw"))
        await stub.enqueue([.init(status: 200, body: page)])
        try await client.engine.sync(models: ["Product"])
        try client.model("Product").update("p1", with: ["name": "Local"])
        return client
    }

    /// A device with two attempts per call, whose next push is answered with `Backoff: seconds`.
    static func backedOff(seconds: Int) async throws -> (KintoStub, SyncClient) {
        let stub = try await KintoStub.start()
        let device = try await device(stub, retries: 2)
        await stub.enqueue([
            .init(
                status: 200, headers: ["Backoff": "\(seconds)"],
                body: #"{"responses":[{"status":200,"body":{"data":{"id":"p1","last_modified":12,"name":"Local"}}}]}"#)
        ])
        return (stub, device)
    }

    static let malformedPulls: [(String, KintoStub.Answer)] = [
        ("truncated JSON", .init(status: 200, body: #"{"data":[{"id":"p2","last_modified":11,"na"#)),
        ("not JSON", .init(status: 200, body: "<html>proxy error</html>")),
        ("no data list", .init(status: 200, body: #"{"data":5}"#)),
        ("a record without id", .init(status: 200, body: #"{"data":[{"last_modified":11,"name":"x"}]}"#)),
        ("a string last_modified", .init(status: 200, body: #"{"data":[{"id":"p2","last_modified":"11"}]}"#)),
        ("a next page on another server", .init(status: 200, headers: ["Next-Page": "http://evil.example/v1/x"], body: #"{"data":[]}"#)),
        // As the cursor, Kinto refuses it on every later pull (found by a black-box probe).
        (
            "a record later than the collection's timestamp",
            .init(status: 200, headers: ["ETag": #""20""#], body: #"{"data":[{"id":"p2","last_modified":1000000000020,"name":"x"}]}"#)
        ),
    ]

    @Test(arguments: malformedPulls.map(\.0))
    func malformedPageLeavesTheStoreAsItWas(_ name: String) async throws {
        let stub = try await KintoStub.start()
        let device = try await Self.device(stub)
        let answer = try #require(Self.malformedPulls.first { $0.0 == name }?.1)
        // The push goes through; the pull's answer is the bad one.
        await stub.enqueue([
            .init(status: 200, body: #"{"responses":[{"status":200,"body":{"data":{"id":"p1","last_modified":12,"name":"Local"}}}]}"#), answer,
        ])
        let before = try device.objects("Product")
        await #expect(throws: SyncError.self) { try await device.engine.sync(models: ["Product"]) }
        #expect(device.log.notifications(.error).last?.errorCode == .protocolViolation)
        #expect(try device.objects("Product") == before)
        #expect(try device.store.verify().problems == [])
        // The next, good answer converges.
        await stub.enqueue([
            .init(status: 200, body: #"{"data":[{"id":"p1","last_modified":12,"name":"Local"},{"id":"p2","last_modified":13,"name":"Two"}]}"#)
        ])
        try await device.engine.sync(models: ["Product"])
        #expect(try device.objects("Product") == ["p1": ["name": "Local"], "p2": ["name": "Two"]])
        await stub.stop()
    }

    @Test(
        "a next page of another list on the same server (another collection's records, the ids) is refused, nothing applied (found by a black-box probe: another collection's records were stored as the model's)"
    )
    func nextPageOfAnotherList() async throws {
        let stub = try await KintoStub.start()
        let device = try await Self.device(stub)
        let root = await stub.root.absoluteString
        // The first sync pushes the device's update, then pulls.
        await stub.enqueue([
            .init(status: 200, body: #"{"responses":[{"status":200,"body":{"data":{"id":"p1","last_modified":12,"name":"Local"}}}]}"#)
        ])
        for other in [
            "/buckets/b/collections/Other/records?_since=0&_limit=10", "/buckets/b/collections/Product/records/p9", "/buckets/b/collections",
        ] {
            await stub.enqueue([
                .init(status: 200, headers: ["Next-Page": root + other], body: #"{"data":[{"id":"p2","last_modified":13,"name":"Two"}]}"#)
            ])
            let before = try device.objects("Product")
            let error = await #expect(throws: SyncError.self, "\(other)") { try await device.engine.sync(models: ["Product"]) }
            #expect(error?.code == .protocolViolation && error?.message.contains("not a page of") == true, "\(other): \(String(describing: error))")
            #expect(try device.objects("Product") == before, "\(other)")
            #expect(await !stub.requests.contains { $0.contains("Other") || $0.contains("/p9") || $0.hasSuffix("/collections") }, "not followed")
        }
        await stub.stop()
    }

    @Test("a batch answer without one response per change is refused; the change is sent again")
    func malformedBatch() async throws {
        let stub = try await KintoStub.start()
        let device = try await Self.device(stub)
        await stub.enqueue([.init(status: 200, body: #"{"responses":[]}"#)])
        await #expect(throws: SyncError.self) { try await device.engine.sync(models: ["Product"]) }
        #expect(device.log.notifications(.error).last?.errorCode == .protocolViolation)
        await stub.enqueue([
            .init(status: 200, body: #"{"responses":[{"status":200,"body":{"data":{"id":"p1","last_modified":12,"name":"Local"}}}]}"#),
            .init(status: 304, body: ""),
        ])
        try await device.engine.sync(models: ["Product"])
        #expect(try device.store.changeFates(model: "Product") == [:])
        let requests = await stub.requests
        #expect(requests.filter { $0.hasPrefix("POST /v1/batch") }.count == 2, "the update went twice: \(requests)")
        #expect(requests.last?.contains("_since=10") == true, "the delta asks from the cursor")
    }

    @Test("Backoff: the next call waits for the time the server asked, through the engine's retry")
    func backoff() async throws {
        let (stub, device) = try await Self.backedOff(seconds: 30)
        do {
            try await device.engine.sync(models: ["Product"])
            Issue.record("a call went out during the backoff")
        } catch let error as SyncError {
            #expect(error.code == .server && error.isRetryable)
            #expect((error.retryAfter ?? .zero) > .seconds(25), "\(error)")
        }
        #expect(device.delays.all.contains { $0 >= .seconds(25) }, "the engine waited as asked: \(device.delays.all)")
        #expect(await stub.requests.count == 2, "no request during the backoff")
    }

    @Test("a Backoff of a year fails the sync at once, saying so; no request goes out and nothing is waited for")
    func backoffOfAYear() async throws {
        let (stub, device) = try await Self.backedOff(seconds: 31_536_000)
        let error = await #expect(throws: SyncError.self) { try await device.engine.sync(models: ["Product"]) }
        #expect(error?.code == .server && (error?.retryAfter ?? .zero) > .seconds(31_535_000), "\(String(describing: error))")
        #expect(error?.message.contains("longer than the retry policy's") == true, "\(String(describing: error))")
        #expect(device.delays.all.allSatisfy { $0 <= .seconds(30) }, "no wait of a year: \(device.delays.all)")
        #expect(await stub.requests.count == 2, "no request during the backoff")
        #expect(try device.store.changeFates(model: "Product") == [:], "the push before the Backoff landed")
    }

    @Test(
        "an HTML error page (a server that is not Kinto) is one line in the error: its line breaks and indentation become spaces (found by a black-box probe)"
    )
    func htmlErrorPageIsOneLine() async throws {
        let stub = try await KintoStub.start()
        let device = try await Self.device(stub)
        let page =
            "<!DOCTYPE HTML>\n<html>\n  <head>\r\n    <title>Not Found</title>\n  </head>\n  <body>\n\t<h1>Not Found</h1>\n  </body>\n</html>\n"
        await stub.enqueue([.init(status: 404, headers: ["Content-Type": "text/html"], body: page)])
        let error = await #expect(throws: SyncError.self) { try await device.engine.sync(models: ["Product"]) }
        let text = error.map(String.init(describing:)) ?? ""
        #expect(text.contains("HTTP 404: <!DOCTYPE HTML> <html> <head> <title>Not Found</title>"), "\(text)")
        #expect(!text.contains("\n") && !text.contains("\r") && !text.contains("\t"), "\(text)")
        #expect(try device.model("Product").find("p1")?["name"] == "Local", "nothing lost")
    }

    @Test(
        "a server whose root says a lower settings.batch_max_requests gets batches no bigger (found by a black-box probe: every batch of 25 was refused)"
    )
    func batchMaxRequests() async throws {
        let stub = try await KintoStub.start()
        await stub.setRootBody(#"{"user":{"id":"basicauth:stub"},"settings":{"batch_max_requests":2}}"#)
        let backend = KintoBackend(url: await stub.root, bucket: "b")
        let client = try SyncClient(backend: backend, models: [Self.product], pageSize: 10, retry: RetryPolicy(maxAttempts: 1))
        try await client.engine.logIn(Credentials(user: "ann", password: "pw"))
        for id in ["n1", "n2", "n3"] { try client.model("Product").create(["object": .string(id), "name": "New"]) }
        func created(_ ids: [String]) -> KintoStub.Answer {
            let responses = ids.map { #"{"status":201,"body":{"data":{"id":"\#($0)","last_modified":11,"name":"New"}}}"# }
            return .init(status: 200, body: #"{"responses":["# + responses.joined(separator: ",") + "]}")
        }
        await stub.enqueue([created(["n1", "n2"]), created(["n3"]), .init(status: 200, body: #"{"data":[]}"#)])
        let report = try await client.engine.sync(models: ["Product"])
        #expect(report.accepted == 3, "\(report)")
        let requests = await stub.requests
        #expect(requests.filter { $0.hasPrefix("POST /v1/batch") }.count == 2, "\(requests)")
    }

    @Test("Retry-After on a 503 is the engine's wait before it tries again")
    func retryAfter() async throws {
        let stub = try await KintoStub.start()
        let device = try await Self.device(stub, retries: 2)
        await stub.enqueue([
            .init(status: 200, body: #"{"responses":[{"status":200,"body":{"data":{"id":"p1","last_modified":12,"name":"Local"}}}]}"#),
            .init(status: 503, headers: ["Retry-After": "7"], body: #"{"code":503,"errno":201,"error":"Service Unavailable","message":"Flushing"}"#),
            .init(status: 200, body: #"{"data":[{"id":"p1","last_modified":12,"name":"Local"}]}"#),
        ])
        try await device.engine.sync(models: ["Product"])
        #expect(device.delays.all.contains(.seconds(7)), "\(device.delays.all)")
        #expect(try device.objects("Product") == ["p1": ["name": "Local"]])
    }

    @Test("Retry-After as an HTTP date is honoured: the engine waits until then")
    func retryAfterDate() async throws {
        let stub = try await KintoStub.start()
        let device = try await Self.device(stub, retries: 2)
        // Far enough ahead that a loaded machine's delay before the answer leaves a wait well
        // above the policy's own (0.5 s, doubling).
        let date = Date().addingTimeInterval(20)
        let text = Self.imfFixdate(date)
        await stub.enqueue([
            .init(status: 200, body: #"{"responses":[{"status":200,"body":{"data":{"id":"p1","last_modified":12,"name":"Local"}}}]}"#),
            .init(status: 503, headers: ["Retry-After": text], body: #"{"code":503,"errno":201,"error":"Service Unavailable","message":"Flushing"}"#),
            .init(status: 200, body: #"{"data":[{"id":"p1","last_modified":12,"name":"Local"}]}"#),
        ])
        try await device.engine.sync(models: ["Product"])
        #expect(device.delays.all.contains { $0 > .seconds(3) && $0 <= .seconds(21) }, "\(text): \(device.delays.all)")
        #expect(try device.objects("Product") == ["p1": ["name": "Local"]])
    }

    /// `date` as an IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`.
    static func imfFixdate(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "GMT")!
        let c = calendar.dateComponents([.weekday, .day, .month, .year, .hour, .minute, .second], from: date)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ n: Int?) -> String { n.map { $0 < 10 ? "0\($0)" : "\($0)" } ?? "00" }
        return "\(days[c.weekday! - 1]), \(two(c.day)) \(months[c.month! - 1]) \(c.year!) \(two(c.hour)):\(two(c.minute)):\(two(c.second)) GMT"
    }

    @Test("Next-Page links that loop stop the sync with a protocol violation instead of paging forever")
    func loopingNextPage() async throws {
        let stub = try await KintoStub.start()
        let device = try await Self.device(stub)
        let push = KintoStub.Answer(
            status: 200, body: #"{"responses":[{"status":200,"body":{"data":{"id":"p1","last_modified":12,"name":"Local"}}}]}"#)
        let loop = "\(await stub.root)/buckets/b/collections/Product/records?_since=12&_token=same"
        // More pages than the guard lets through; each points back at the same place.
        let pages = (0..<20).map { _ in KintoStub.Answer(status: 200, headers: ["Next-Page": loop], body: #"{"data":[]}"#) }
        await stub.enqueue([push] + pages)
        let before = try device.objects("Product")
        let error = await #expect(throws: SyncError.self) { try await device.engine.sync(models: ["Product"]) }
        #expect(error?.code == .protocolViolation)
        #expect(error?.message.contains("loop") == true, "\(String(describing: error))")
        // After the setup's pull: the first page, then the same link followed three times, and
        // the fourth time it comes back the guard stops.
        let pulls = await stub.requests.filter { $0.hasPrefix("GET ") }.dropFirst()
        #expect(pulls.count == 4, "\(pulls)")
        #expect(pulls.filter { $0.hasSuffix("_token=same") }.count == 3, "\(pulls)")
        #expect(try device.objects("Product") == before)
        #expect(try device.store.verify().problems == [])
        await stub.stop()
    }

    @Test(
        "an answer of ten million values, or of 100,000 levels, is refused within the answer limits; the store is as it was",
        arguments: ["values", "nesting"])
    func hugeTrees(_ kind: String) async throws {
        let stub = try await KintoStub.start()
        let device = try await Self.device(stub)
        let push = KintoStub.Answer(
            status: 200, body: #"{"responses":[{"status":200,"body":{"data":{"id":"p1","last_modified":12,"name":"Local"}}}]}"#)
        let body =
            kind == "values"
            ? #"{"data":["# + String(repeating: "0,", count: 9_999_999) + "0]}"
            : String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        await stub.enqueue([push, .init(status: 200, body: body)])
        let before = try device.objects("Product")
        let error = await #expect(throws: SyncError.self) { try await device.engine.sync(models: ["Product"]) }
        #expect(error?.code == .protocolViolation)
        #expect(error?.message.contains(kind == "values" ? "more than 2000000 values" : "nesting deeper") == true)
        #expect(try device.objects("Product") == before)
        #expect(try device.store.verify().problems == [])
        await stub.stop()
    }

    @Test("a total that is not a count is a protocol violation; a HEAD without one leaves the total unknown; a 304 asks for none")
    func totals() async throws {
        let stub = try await KintoStub.start()
        let client = try SyncClient(backend: KintoBackend(url: await stub.root, bucket: "b"), models: [Self.product], pageSize: 10)
        await client.record()
        try await client.engine.logIn(Credentials(user: "ann", password: "pw"))
        await stub.enqueue([.init(status: 200, body: Self.page)])
        await stub.enqueueHead([.init(status: 200, headers: ["Total-Objects": "lots"], body: "")])
        let error = await #expect(throws: SyncError.self) { try await client.engine.sync(models: ["Product"]) }
        #expect(error?.code == .protocolViolation && error?.message.contains("Total-Objects") == true, "\(String(describing: error))")
        #expect(try client.objects("Product").isEmpty, "nothing of the page was applied")

        await stub.enqueue([.init(status: 200, body: Self.page)])
        await stub.enqueueHead([.init(status: 200, headers: ["Total-Objects": "7"], body: "")])
        try await client.engine.sync(models: ["Product"])
        #expect(client.log.notifications(.inProgress, model: "Product").last?.totalCount == 7)
        #expect(await stub.heads == ["/v1/buckets/b/collections/Product/records", "/v1/buckets/b/collections/Product/records"])

        client.log.clear()
        await stub.enqueue([.init(status: 200, body: #"{"data":[{"id":"p2","last_modified":11,"name":"Two"}]}"#)])
        try await client.engine.sync(models: ["Product"])
        #expect(client.log.notifications(.inProgress, model: "Product").last.map { $0.totalCount == nil } == true, "no total told, none guessed")
        await stub.enqueue([.init(status: 304, body: "")])
        try await client.engine.sync(models: ["Product"])
        #expect(await stub.heads.count == 3, "a 304 ends the pull without asking for a total")
        await stub.stop()
    }

    @Test(
        "an attachment served elsewhere is downloaded without the password, one on the Kinto server with it; a failed download is a one-line error, one that is gone (404) keeps its URL, as does a location no request can fetch (file:)"
    )
    func attachmentDownloads() async throws {
        let kinto = try await KintoStub.start()
        let files = try await KintoStub.start()
        let photo = ModelDefinition(name: "Photo", blobAttributes: ["image"])
        let client = try SyncClient(backend: KintoBackend(url: await kinto.root, bucket: "b"), models: [photo], pageSize: 10)
        await client.record()
        try await client.engine.logIn(Credentials(user: "ann", password: "pw"))
        func page(_ id: String, _ version: Int, _ location: String) -> KintoStub.Answer {
            .init(
                status: 200,
                body: #"{"data":[{"id":"\#(id)","last_modified":\#(version),"title":"T","attachment":{"location":"\#(location)","size":5}}]}"#)
        }
        func image(_ id: String) throws -> Data? {
            try client.model("Photo").find(id)?["image"]?.stringValue.flatMap { try client.store.blobs.data(for: $0) }
        }
        let elsewhere = "\(await files.root)/files/1.bin"
        await kinto.enqueue([page("ph1", 10, elsewhere)])
        await files.enqueue([.init(status: 200, body: "bytes")])
        try await client.engine.sync(models: ["Photo"])
        #expect(try image("ph1") == Data("bytes".utf8))
        #expect(await files.requests == ["GET /v1/files/1.bin"])
        #expect(await files.authorized == [false], "no password for another server")

        await kinto.enqueue([page("ph2", 11, "\(await kinto.root)/files/2.bin"), .init(status: 200, body: "other")])
        try await client.engine.sync(models: ["Photo"])
        #expect(try image("ph2") == Data("other".utf8))
        #expect(await kinto.authorized.last == true, "the Kinto server's own files get the password, as its API does")

        await kinto.enqueue([page("ph3", 12, elsewhere)])
        await files.enqueue([.init(status: 400, body: "bad")])
        let failed = await #expect(throws: SyncError.self) { try await client.engine.sync(models: ["Photo"]) }
        #expect(
            failed?.code == .server && failed?.httpStatus == 400 && failed?.message.contains("attachment download") == true,
            "\(String(describing: failed))")
        #expect(try client.model("Photo").find("ph3") == nil, "the page waits for its files")

        // A file that is gone (404) does not stop the model's pulls: the attribute keeps its URL.
        await kinto.enqueue([page("ph3", 12, elsewhere)])
        await files.enqueue([.init(status: 404, body: "gone")])
        try await client.engine.sync(models: ["Photo"])
        #expect(try client.model("Photo").find("ph3")?["image"] == .string(elsewhere))

        // Nor does a location no request can fetch: nothing is read, the value is kept, and an
        // error line names it (a black-box probe: such a value wedged a RhoConnect model).
        client.log.clear()
        await kinto.enqueue([page("ph4", 13, "file:///etc/passwd")])
        try await client.engine.sync(models: ["Photo"])
        #expect(try client.model("Photo").find("ph4")?["image"] == "file:///etc/passwd")
        #expect(client.log.notifications().contains { $0.status == .error && $0.message?.contains("ph4") == true })
        await kinto.stop()
        await files.stop()
    }

    @Test("no password, nor the Authorization header it travels in, appears in an error, a notification or a log line of syncs that log in and fail")
    func secretsStaySecret() async throws {
        let stub = try await KintoStub.start()
        let password = "pw-Kq93!x"
        let capture = LogCapture()
        let client = try SyncClient(
            backend: KintoBackend(url: await stub.root, bucket: "b"), models: [Self.product], pageSize: 10,
            retry: RetryPolicy(maxAttempts: 2, baseDelay: .milliseconds(1)), logger: capture.logger)
        await client.record()
        var texts: [String] = []
        func attempt(_ body: () async throws -> Void) async {
            do { try await body() } catch { texts.append("\(error)") }
        }
        try await client.engine.logIn(Credentials(user: "ann", password: password))
        // A first page, then a failure mid-pull (the second page, twice: past the retry), then
        // the server refusing the credentials.
        let next = "\(await stub.root)/buckets/b/collections/Product/records?_since=0&_token=2"
        await stub.enqueue([
            .init(status: 200, headers: ["Next-Page": next], body: Self.page),
            .init(status: 500, body: #"{"code":500,"errno":999,"error":"boom"}"#),
            .init(status: 500, body: #"{"code":500,"errno":999,"error":"boom"}"#),
            .init(
                status: 401, body: #"{"code":401,"errno":104,"error":"Unauthorized","message":"Please authenticate yourself to use this endpoint."}"#),
        ])
        await attempt { try await client.engine.sync(models: ["Product"]) }
        await attempt { try await client.engine.sync(models: ["Product"]) }
        #expect(texts.count == 2, "\(texts)")
        #expect(!capture.lines.isEmpty, "the failures were logged")
        let secrets = [
            password, SyncHTTPClient.basicAuthorization(Credentials(user: "ann", password: password)).dropFirst("Basic ".count).description,
        ]
        let everything = texts + capture.lines + client.log.all.map { "\($0)" }
        for secret in secrets {
            #expect(!everything.contains { $0.contains(secret) }, "\(secret) leaked")
        }
        await stub.stop()
    }
}
