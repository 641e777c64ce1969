import Foundation
public import Satchel
public import SatchelSync
public import Logging
import Synchronization
public import Testing

/// Everything an engine reported, in order.
public final class EventLog: Sendable {
    private let events = Locked<[SyncEvent]>([])

    public init() {}

    func append(_ event: SyncEvent) { events.withLock { $0.append(event) } }

    public var all: [SyncEvent] { events.withLock { $0 } }

    /// Forgets what was recorded.
    public func clear() { events.withLock { $0.removeAll() } }

    /// The sync notifications, optionally of one status and model.
    public func notifications(_ status: SyncNotification.Status? = nil, model: String? = nil) -> [SyncNotification] {
        all.compactMap { event in
            guard case .sync(let n) = event, status == nil || n.status == status, model == nil || n.model == model else { return nil }
            return n
        }
    }

    /// The object notifications of `model`, merged.
    public func objects(_ model: String) -> ChangeSet {
        var merged = ChangeSet(model: model, origin: .server)
        for case .objects(let n) in all where n.model == model {
            merged.created += n.created
            merged.updated += n.updated
            merged.deleted += n.deleted
            merged.renamed.merge(n.renamed) { _, last in last }
        }
        return merged
    }

    /// The completion events.
    public var completions: [SyncReport] { all.compactMap { if case .completed(let r) = $0 { r } else { nil } } }
}

/// The waits an engine asked for between retries (recorded, not slept).
public final class DelayLog: Sendable {
    private let delays = Locked<[Duration]>([])

    public init() {}

    func append(_ delay: Duration) { delays.withLock { $0.append(delay) } }

    public var all: [Duration] { delays.withLock { $0 } }
}

/// A directory under the system's temporary directory, removed when the last client using it
/// goes.
final class ScratchDirectory: Sendable {
    let path: String

    init() throws {
        let name = "satchel-sync-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString)"
        path = FileManager.default.temporaryDirectory.appendingPathComponent(name).path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// A device: a store, and an engine syncing it through a backend.
public struct SyncClient: Sendable {
    /// The store's directory.
    public let storePath: String
    /// Keeps a temporary store directory alive while a client uses it.
    private let scratch: ScratchDirectory?
    public let store: Store
    public let engine: SyncEngine
    public let log: EventLog
    public let delays: DelayLog

    /// Opens (or reopens) the store at `storePath` (by default a new one in a temporary
    /// directory, removed when the client goes), registers `models`, and makes an engine whose
    /// retries record their delays instead of sleeping.
    public init(
        backend: any SyncBackend, models: [ModelDefinition], pageSize: Int = 5, retry: RetryPolicy = RetryPolicy(maxAttempts: 1),
        storePath: String? = nil, logger: Logger? = nil
    ) throws {
        let scratch = storePath == nil ? try ScratchDirectory() : nil
        try self.init(
            backend: backend, models: models, pageSize: pageSize, retry: retry, storePath: storePath ?? scratch!.path + "/store", scratch: scratch,
            logger: logger)
    }

    private init(
        backend: any SyncBackend, models: [ModelDefinition], pageSize: Int, retry: RetryPolicy, storePath: String, scratch: ScratchDirectory?,
        logger: Logger? = nil
    ) throws {
        self.storePath = storePath
        self.scratch = scratch
        store = try Store(path: storePath)
        for model in models { _ = try store.register(model) }
        let log = EventLog()
        let delays = DelayLog()
        var configuration = SyncEngine.Configuration()
        configuration.pageSize = pageSize
        configuration.retry = retry
        configuration.sleep = { delays.append($0) }
        configuration.random = { 0.5 }
        if let logger { configuration.logger = logger }
        engine = SyncEngine(store: store, backend: backend, configuration: configuration)
        self.log = log
        self.delays = delays
    }

    /// Starts recording events (call once before syncing).
    public func record() async {
        let log = self.log
        await engine.setEventHandler { log.append($0) }
    }

    /// Closes the store, as a killed app would leave it, and opens it again with a new engine.
    public func reopened(backend: any SyncBackend, models: [ModelDefinition], pageSize: Int = 5) async throws -> SyncClient {
        try store.close()
        let client = try SyncClient(
            backend: backend, models: models, pageSize: pageSize, retry: RetryPolicy(maxAttempts: 1), storePath: storePath, scratch: scratch)
        await client.record()
        return client
    }

    public func model(_ name: String) throws -> Model { try store.model(name) }

    /// The objects of `model`, by id.
    public func objects(_ name: String) throws -> [String: JSONObject] {
        Dictionary(uniqueKeysWithValues: try model(name).findAll().map { ($0.id, $0.attributes) })
    }

    /// Asserts the store is healthy, has no pending or in-flight change nor refused change, and
    /// holds exactly the server's objects of `models` (those `user` syncs, when given).
    public func expectConverged(
        with server: any ConformanceServer, models: [String], user: Credentials? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let report = try store.verify()
        #expect(report.problems == [], "store check", sourceLocation: sourceLocation)
        for name in models {
            #expect(try model(name).pendingChanges() == [], "pending changes of \(name)", sourceLocation: sourceLocation)
            #expect(try store.changeFates(model: name) == [:], "unsettled changes of \(name)", sourceLocation: sourceLocation)
            // Attributes the server sets on every object are compared by the adapter's own tests.
            let plain = { (objects: [String: JSONObject]) in objects.mapValues { $0.filter { name, _ in !server.serverAttributes.contains(name) } } }
            let local = plain(try objects(name))
            let served = if let user { try await server.objects(name, of: user) } else { try await server.objects(name) }
            let remote = plain(served)
            #expect(local == remote, "\(name): the store and the server differ", sourceLocation: sourceLocation)
            // The drift check, through the adapter, says the same.
            if user == nil {
                let drift = try await engine.verify(name)
                #expect(drift.agrees, "\(name): the drift check found \(drift.drifts.map(\.json))", sourceLocation: sourceLocation)
            }
        }
    }
}
