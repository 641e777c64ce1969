import Foundation
import Satchel
import SatchelSync
import SatchelSyncTesting
import SatchelTestSupport
import Synchronization
import Testing

/// Pages asked ahead (``SyncCapabilities/pullsAhead``): the next page asked for while the last
/// is applied, each page still stored in order with its cursor; never ahead for a server whose
/// next request acknowledges the last page.
@Suite("Pull ahead")
struct PullAheadTests {
    /// A server of `pages` pages of two objects each, the cursor a page's number. Each object's
    /// `photo` is a blob URL. When the server pulls ahead, a page's blob download waits until the
    /// next page is asked for: the engine applies a page only after its blobs, so the next page
    /// is asked for before this one is stored, whatever the threads do.
    final class PagedServer: SyncBackend {
        let pullsAhead: Bool
        let pages: Int
        /// The client's store, to see whether the page before is stored when a page is asked for.
        let store = Locked<Store?>(nil)
        /// Pages asked for, in order: each number with whether the page before was stored then.
        let asked = Locked<[(page: Int, beforeStored: Bool)]>([])
        /// Pages whose first request fails (a network error).
        let failingOnce = Locked<Set<Int>>([])
        private let waiting = Locked<[Int: CheckedContinuation<Void, Never>]>([:])

        init(pages: Int, pullsAhead: Bool) {
            self.pages = pages
            self.pullsAhead = pullsAhead
        }

        var name: String { "paged" }
        var capabilities: SyncCapabilities { SyncCapabilities(pullsAhead: pullsAhead) }
        func logIn(_ credentials: Credentials) async throws -> SyncSession { SyncSession(user: credentials.user) }
        func logOut(_ session: SyncSession) async throws {}
        func push(_ request: PushRequest) async throws -> [PushResult] { [] }

        func pull(_ request: PullRequest) async throws -> PullPage {
            let number = Int(request.cursor?.intValue ?? 0)
            let beforeStored = try number == 0 || store.withLock { $0 }?.model("Item").find("i\(number - 1)b") != nil
            // Noted and the waiting download taken under one lock, so that a download looking
            // for this request either sees it or leaves its continuation here first.
            waiting.withLock { waiting in
                asked.withLock { $0.append((number, beforeStored)) }
                return waiting.removeValue(forKey: number)
            }?.resume()
            if failingOnce.withLock({ $0.remove(number) }) != nil { throw SyncError(.network, "page \(number) lost") }
            let objects = ["a", "b"].map { letter in
                ServerObject(id: "i\(number)\(letter)", attributes: ["page": .int(Int64(number))], blobURLs: ["photo": "blob:\(number)\(letter)"])
            }
            return PullPage(
                upserts: objects, nextCursor: .int(Int64(number + 1)), done: number == pages - 1,
                schema: PullPage.Schema(blobAttributes: ["photo"]))
        }

        func downloadBlob(_ url: String, session: SyncSession) async throws -> Data {
            let number = Int(url.dropFirst("blob:".count).dropLast()) ?? -1
            if pullsAhead && number < pages - 1 {
                await withCheckedContinuation { continuation in
                    let askedAlready = waiting.withLock { waiting in
                        if asked.withLock({ $0.contains { $0.page == number + 1 } }) { return true }
                        waiting[number + 1] = continuation
                        return false
                    }
                    if askedAlready { continuation.resume() }
                }
            }
            return Data(url.utf8)
        }
    }

    /// A test that hangs has lost a page's request (a download waits for it for ever), so the
    /// tests that wait so have a time limit. Under ThreadSanitizer (`SATCHEL_TSAN`) the process
    /// runs many times slower on a concurrency pool shared with the other tests: these three once
    /// took three minutes there, and then finished.
    #if SATCHEL_TSAN
    static let timeLimit = TimeLimitTrait.Duration.minutes(5)
    #else
    static let timeLimit = TimeLimitTrait.Duration.minutes(1)
    #endif

    static func sync(_ server: PagedServer, retry: RetryPolicy = RetryPolicy(maxAttempts: 1)) async throws -> SyncClient {
        let client = try SyncClient(backend: server, models: [ModelDefinition(name: "Item")], pageSize: 2, retry: retry)
        server.store.withLock { $0 = client.store }
        try await client.engine.logIn(Credentials(user: "ann", password: "secret"))
        try await client.engine.sync()
        return client
    }

    @Test(
        "a server that pulls ahead is asked for each page before the one before it is stored; every page lands, with its blobs",
        .timeLimit(PullAheadTests.timeLimit))
    func asksAhead() async throws {
        let server = PagedServer(pages: 5, pullsAhead: true)
        let client = try await Self.sync(server)
        let asked = server.asked.withLock { $0 }
        #expect(asked.map(\.page) == [0, 1, 2, 3, 4])
        #expect(asked.dropFirst().allSatisfy { !$0.beforeStored }, "asked ahead: \(asked)")
        #expect(try client.model("Item").count() == 10)
        for page in 0..<5 {
            let object = try #require(try client.model("Item").find("i\(page)b"))
            #expect(object["page"] == .int(Int64(page)))
            let photo = try #require(object["photo"]?.stringValue)
            #expect(try client.store.blobs.data(for: photo) == Data("blob:\(page)b".utf8))
        }
        #expect(try client.store.verify().problems == [])
    }

    @Test(
        "a server that does not pull ahead (RhoConnect's next query acknowledges the last page) is asked for a page only once the one before is stored"
    )
    func neverAheadOtherwise() async throws {
        let server = PagedServer(pages: 5, pullsAhead: false)
        let client = try await Self.sync(server)
        let asked = server.asked.withLock { $0 }
        #expect(asked.map(\.page) == [0, 1, 2, 3, 4])
        #expect(asked.allSatisfy { $0.beforeStored }, "\(asked)")
        #expect(try client.model("Item").count() == 10)
    }

    @Test(
        "a page asked ahead that fails is a first attempt: retried in turn, after a backoff, and the pull completes",
        .timeLimit(PullAheadTests.timeLimit))
    func failedAheadAskedAgain() async throws {
        let server = PagedServer(pages: 4, pullsAhead: true)
        server.failingOnce.withLock { $0 = [2] }
        let client = try await Self.sync(server, retry: RetryPolicy(maxAttempts: 2))
        let asked = server.asked.withLock { $0 }
        #expect(asked.map(\.page) == [0, 1, 2, 2, 3])
        #expect(asked[3].beforeStored, "asked again after page 1 was stored")
        #expect(client.delays.all.count == 1, "one backoff, as for a page asked in turn")
        #expect(try client.model("Item").count() == 8)
        #expect(try client.store.verify().problems == [])
    }

    @Test(
        "a page asked ahead that fails, with no retries left, ends the sync with its error; the pages before it stay stored",
        .timeLimit(PullAheadTests.timeLimit))
    func failedAheadEndsSync() async throws {
        let server = PagedServer(pages: 4, pullsAhead: true)
        server.failingOnce.withLock { $0 = [2] }
        let client = try SyncClient(backend: server, models: [ModelDefinition(name: "Item")], pageSize: 2)
        server.store.withLock { $0 = client.store }
        try await client.engine.logIn(Credentials(user: "ann", password: "secret"))
        let error = await #expect(throws: SyncError.self) { try await client.engine.sync() }
        #expect(error?.code == .network)
        #expect(try client.model("Item").count() == 4, "pages 0 and 1")
        #expect(try client.store.verify().problems == [])
        try await client.engine.sync()
        #expect(try client.model("Item").count() == 8)
    }
}
