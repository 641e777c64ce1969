import Foundation
import Satchel
import SatchelSync
import Synchronization

/// The sync engine against the store's own API, interleaved page by page (``Interleaved``):
///
/// - `sync_pull`: a first pull of every object from the in-memory server into an empty store,
///   in pages of 1,000 (each page one batch with its cursor and the objects' versions), against
///   the same objects saved in batches of 1,000 through the public transaction API into a model
///   that records no changes: what the writes cost without the engine.
/// - `sync_push`: the same number of local creates, pushed, then as many updates (a new price
///   each), pushed, in chunks of 1,000, against writing the same creates and updates through
///   the public API into a model that records no changes. The local writes are not timed: the
///   measure is what a push adds to a change already made — the in-memory server's own work
///   included, which alone is about the whole baseline.
/// - `sync_push_client`: what the app pays of that push, per change: the push phase of each
///   sync less the time spent in the server's `push` (putting the changes in flight, durably,
///   before they are sent, and recording the results), against the same bulk save per change.
/// - `sync_push_echo`: the pull after each push, per object it brings back, less the server's
///   `pull`: objects whose version the push already recorded, which must write nothing (the
///   line's log says how many objects it changed).
/// - `write_synced`: single-object creates and updates (each its own transaction) on a model
///   that records changes, against SQLite-JSON inserting or updating the document and writing a
///   change row in one transaction.
enum SyncBench {
    static let pageSize = 1000

    static let measures = ["sync_pull", "sync_push", "write_synced"]

    /// Runs the `wanted` measures (all when nil).
    static func run(count: Int, directory: String?, measures wanted: Set<String>? = nil, encrypted: Bool = false, tamperEvidence: Bool = true)
        async throws
    {
        let base = try Report.scratchDirectory("sync", given: directory)
        defer { Report.removeScratch(base, given: directory) }

        let items = BenchData.make(count: count)
        if encrypted {
            // Only the pull, into an encrypted store against the same pull into a plain one.
            return try await encryptedPullMeasure(items, base: base, tamperEvidence: tamperEvidence)
        }
        if wanted?.contains("sync_pull") ?? true { try await pullMeasure(items, base: base) }
        if wanted?.contains("sync_push") ?? true { try await pushMeasure(items, base: base) }
        if wanted?.contains("write_synced") ?? true {
            let singles = min(count, 20_000)
            log("sync: \(singles) single-object creates and updates on a model that records changes")
            let (synced, sqlite) = try WriteSynced.run(items: Array(items.prefix(singles)), directory: base)
            Report.line("write_synced", n: singles, satchel: 1 / synced, unit: "writes/s", baselines: [("sqlite_json", 1 / sqlite)])
        }
    }

    private static func pullMeasure(_ items: [BenchData.Item], base: String) async throws {
        let count = items.count
        let server = InMemoryBackend()
        for item in items { await server.put("Product", item.attributes, id: item.id) }
        log("sync: \(count) objects on an in-memory server, pages of \(pageSize)")
        var pull: [Double] = [], save: [Double] = []
        for round in 0..<3 {
            let (satchel, baseline) = try await firstSync(
                from: server, credentials: Credentials(user: "bench", password: "bench"), count: count, path: "\(base)/pull-\(round)",
                baseline: BulkSave(items: items, path: "\(base)/save-\(round)"))
            pull.append(satchel)
            save.append(baseline)
        }
        Report.line(
            "sync_pull", n: count, satchel: Double(count) / pull.min()!, unit: "objects/s", baselines: [("bulk_save", Double(count) / save.min()!)])
    }

    /// `sync_pull` into an encrypted store against the same pull into a plain one, rounds
    /// interleaved.
    private static func encryptedPullMeasure(_ items: [BenchData.Item], base: String, tamperEvidence: Bool) async throws {
        let count = items.count
        let server = InMemoryBackend()
        for item in items { await server.put("Product", item.attributes, id: item.id) }
        log("sync: \(count) objects on an in-memory server, pages of \(pageSize), into an encrypted store and a plain one")
        var sealed = Store.Configuration()
        sealed.encryptionKey = try EncryptionKey.random()
        sealed.tamperEvidence = tamperEvidence
        var encrypted: [Double] = [], plain: [Double] = []
        let credentials = Credentials(user: "bench", password: "bench")
        for round in 0..<3 {
            encrypted.append(
                try await firstSync(from: server, credentials: credentials, count: count, path: "\(base)/sealed-\(round)", store: sealed).0)
            plain.append(try await firstSync(from: server, credentials: credentials, count: count, path: "\(base)/plain-\(round)").0)
        }
        Report.line(
            "sync_pull", n: count, satchel: Double(count) / encrypted.min()!, unit: "objects/s",
            baselines: [("satchel_plain", Double(count) / plain.min()!)])
    }

    private static func pushMeasure(_ items: [BenchData.Item], base: String) async throws {
        let count = items.count

        log("sync: \(count) local creates then \(count) updates, pushed in chunks of \(pageSize)")
        var push: [Double] = [], write: [Double] = [], client: [Double] = [], echo: [Double] = []
        var echoed = 0
        for round in 0..<3 {
            let phases = try await pushAll(
                items, path: "\(base)/push-\(round)", baseline: BulkSave(items: items, path: "\(base)/write-\(round)", updates: true))
            push.append(phases.sync)
            write.append(phases.baseline)
            client.append(phases.client)
            echo.append(phases.echo)
            echoed = max(echoed, phases.echoWrites)
        }
        let changes = Double(2 * count)
        Report.line("sync_push", n: count, satchel: changes / push.min()!, unit: "changes/s", baselines: [("bulk_save", changes / write.min()!)])
        Report.line(
            "sync_push_client", n: count, satchel: client.min()! / changes * 1e6, unit: "us", baselines: [("bulk_save", write.min()! / changes * 1e6)]
        )
        log("sync_push_echo: the pulls after the pushes changed \(echoed) objects")
        Report.line(
            "sync_push_echo", n: count, satchel: echo.min()! / changes * 1e6, unit: "us", baselines: [("bulk_save", write.min()! / changes * 1e6)])
    }

    /// Seconds for one first sync of the server's `count` products into a new store, in pages of
    /// ``pageSize`` (the sync and the Kinto measures), and the seconds `baseline` took, run a
    /// slice before each page.
    static func firstSync(
        from server: any SyncBackend, credentials: Credentials, count: Int, path: String, baseline: (any BaselineSlices)? = nil,
        store storeConfiguration: Store.Configuration = Store.Configuration()
    ) async throws -> (Double, Double) {
        let store = try Store(path: path, configuration: storeConfiguration)
        var configuration = SyncEngine.Configuration()
        configuration.pageSize = pageSize
        let interleaved = Interleaved(server, baseline: baseline)
        let engine = SyncEngine(store: store, backend: interleaved, configuration: configuration)
        try await engine.logIn(credentials)
        _ = try store.model("Product")
        let start = ContinuousClock.now
        let report = try await engine.sync()
        let elapsed = Report.seconds(ContinuousClock.now - start) - interleaved.baselineSeconds
        guard report.pulled == count, try store.model("Product").count() == count else {
            throw SatchelError(.unknown, "the sync pulled \(report.pulled) objects, not \(count)")
        }
        try store.close()
        try FileManager.default.removeItem(atPath: path)
        return (elapsed, try interleaved.finishBaseline())
    }

    /// What pushing `items` as local creates, then an update of each, in chunks of ``pageSize``
    /// took, in seconds: the syncs; their push phases less the server's `push` (`client`);
    /// their pulls less the server's `pull` (`echo`), and how many objects those pulls changed;
    /// and `baseline`, a slice before each chunk.
    private static func pushAll(_ items: [BenchData.Item], path: String, baseline: BulkSave) async throws -> (
        sync: Double, client: Double, echo: Double, echoWrites: Int, baseline: Double
    ) {
        let store = try Store(path: path)
        let model = try store.register(ModelDefinition(name: "Product", syncType: .incremental))
        var serverConfiguration = InMemoryBackend.Configuration()
        serverConfiguration.maxPushBatch = pageSize
        serverConfiguration.serverAssignsIDs = false  // the ids stay, so the updates find their objects
        let server = InMemoryBackend(configuration: serverConfiguration)
        var configuration = SyncEngine.Configuration()
        configuration.pageSize = pageSize
        let interleaved = Interleaved(server, baseline: baseline)
        let engine = SyncEngine(store: store, backend: interleaved, configuration: configuration)
        try await engine.logIn(Credentials(user: "bench", password: "bench"))
        _ = try await engine.sync()

        // Objects the pulls after the pushes changed (the echo of what was pushed: none).
        let echoWrites = Mutex(0)
        await engine.setEventHandler { event in
            if case .objects(let set) = event { echoWrites.withLock { $0 += set.created.count + set.updated.count + set.deleted.count } }
        }
        var pushing = 0.0, client = 0.0, echo = 0.0
        for phase in 0..<2 {
            try writeLocally(items, update: phase == 1, in: model, of: store)
            let before = interleaved.baselineSeconds
            let server = interleaved.serverSeconds
            interleaved.startSync()
            let start = ContinuousClock.now
            let report = try await engine.sync()
            let end = ContinuousClock.now
            pushing += Report.seconds(end - start) - (interleaved.baselineSeconds - before)
            guard let (pullStart, baselineAtPull) = interleaved.pullStart else { throw SatchelError(.unknown, "the sync did not pull") }
            let spent = interleaved.serverSeconds
            client += Report.seconds(pullStart - start) - (baselineAtPull - before) - (spent.push - server.push)
            echo += Report.seconds(end - pullStart) - (interleaved.baselineSeconds - baselineAtPull) - (spent.pull - server.pull)
            guard report.accepted == items.count, report.refused == 0 else {
                throw SatchelError(.unknown, "the push was accepted for \(report.accepted) of \(items.count) changes")
            }
        }
        let held = await server.objects("Product")
        guard held.count == items.count, let last = items.last, held[last.id]?["price"] == BulkSave.newPrice(last) else {
            throw SatchelError(.unknown, "the server holds \(held.count) products, not \(items.count) updated ones")
        }
        try store.close()
        try FileManager.default.removeItem(atPath: path)
        return (pushing, client, echo, echoWrites.withLock { $0 }, try interleaved.finishBaseline())
    }

    /// Creates `items` (or sets a new price on each) in batches of ``pageSize``, untimed.
    private static func writeLocally(_ items: [BenchData.Item], update: Bool, in model: Model, of store: Store) throws {
        var index = 0
        while index < items.count {
            let end = min(index + pageSize, items.count)
            try store.bulkUpdate { tx in
                for item in items[index..<end] {
                    if update {
                        _ = try tx.update(item.id, with: ["price": BulkSave.newPrice(item)], in: model)
                    } else {
                        _ = try tx.save(Object(id: item.id, attributes: item.attributes), in: model)
                    }
                }
            }
            index = end
        }
    }

    static func log(_ text: String) { FileHandle.standardError.write(Data("\(text)\n".utf8)) }
}

/// A baseline's work in slices, run between the pages of a sync so that a burst of load on a
/// shared machine lands on both sides alike.
protocol BaselineSlices: Sendable {
    /// Runs the next slice; false when there was none left.
    func runNext() throws -> Bool
    /// Releases what the slices used, after the measures (untimed, outside every measured
    /// window: a store's close empties LevelDB's log into a table, as the measured store's
    /// close, also untimed, does).
    func finish() throws
}

/// Saving the benchmark's objects in batches of ``SyncBench/pageSize`` through the public
/// transaction API into a model that records no changes (then, with `updates`, setting a new
/// price on each, in the same batches): one batch a slice.
final class BulkSave: BaselineSlices {
    private let items: [BenchData.Item]
    private let batches: Int
    /// The store, opened by the first slice, and the next batch.
    private let state: Mutex<(store: Store?, next: Int)> = Mutex((nil, 0))
    private let path: String

    init(items: [BenchData.Item], path: String, updates: Bool = false) {
        self.items = items
        self.path = path
        let perPhase = (items.count + SyncBench.pageSize - 1) / SyncBench.pageSize
        batches = updates ? 2 * perPhase : perPhase
    }

    func finish() throws {
        try state.withLock { state in
            try state.store?.close()
            state.store = nil
        }
        try? FileManager.default.removeItem(atPath: path)
    }

    static func newPrice(_ item: BenchData.Item) -> JSONValue { .int((item.attributes["price"]?.intValue ?? 0) % 1000 + 1) }

    func runNext() throws -> Bool {
        try state.withLock { state in
            guard state.next < batches else { return false }
            let store = try state.store ?? Store(path: path)
            state.store = store
            let model = try store.register(ModelDefinition(name: "Product", syncType: .none))
            let perPhase = (items.count + SyncBench.pageSize - 1) / SyncBench.pageSize
            let batch = state.next % perPhase
            let update = state.next >= perPhase
            let slice = items[(batch * SyncBench.pageSize)..<min((batch + 1) * SyncBench.pageSize, items.count)]
            try store.bulkUpdate { tx in
                for item in slice {
                    if update {
                        _ = try tx.update(item.id, with: ["price": Self.newPrice(item)], in: model)
                    } else {
                        _ = try tx.save(Object(id: item.id, attributes: item.attributes), in: model)
                    }
                }
            }
            state.next += 1
            return true
        }
    }
}

/// A backend that runs a slice of a baseline before each pull and push it forwards, and keeps
/// the seconds those slices took apart from the sync's.
final class Interleaved: SyncBackend {
    let inner: any SyncBackend
    let baseline: (any BaselineSlices)?
    private let spent = Mutex(0.0)

    init(_ inner: any SyncBackend, baseline: (any BaselineSlices)?) {
        self.inner = inner
        self.baseline = baseline
    }

    var name: String { inner.name }
    var capabilities: SyncCapabilities { inner.capabilities }
    /// Seconds the baseline's slices took so far.
    var baselineSeconds: Double { spent.withLock { $0 } }
    /// Seconds spent in the server's `push` and `pull` so far.
    var serverSeconds: (push: Double, pull: Double) { server.withLock { $0 } }
    private let server = Mutex((push: 0.0, pull: 0.0))
    /// When the sync begun by the last ``startSync()`` first pulled, and the baseline's seconds
    /// then (nil: it has not pulled).
    var pullStart: (ContinuousClock.Instant, Double)? { pulling.withLock { $0 } }
    private let pulling = Mutex<(ContinuousClock.Instant, Double)?>(nil)

    /// Marks the start of a sync (for ``pullStart``).
    func startSync() { pulling.withLock { $0 = nil } }

    /// Runs what is left of the baseline; returns its seconds in all.
    func finishBaseline() throws -> Double {
        while try slice() {}
        try baseline?.finish()
        return baselineSeconds
    }

    @discardableResult
    private func slice() throws -> Bool {
        guard let baseline else { return false }
        let start = ContinuousClock.now
        let ran = try baseline.runNext()
        let seconds = Report.seconds(ContinuousClock.now - start)
        spent.withLock { $0 += seconds }
        return ran
    }

    func logIn(_ credentials: Credentials) async throws -> SyncSession { try await inner.logIn(credentials) }
    func logOut(_ session: SyncSession) async throws { try await inner.logOut(session) }
    func prepare(_ session: SyncSession) async throws -> SyncSession { try await inner.prepare(session) }
    func resetClient(_ session: SyncSession) async throws -> SyncSession { try await inner.resetClient(session) }
    func prepareFullPull(_ request: PullRequest) async throws { try await inner.prepareFullPull(request) }
    func pull(_ request: PullRequest) async throws -> PullPage {
        let now = ContinuousClock.now
        let baseline = baselineSeconds
        pulling.withLock { if $0 == nil { $0 = (now, baseline) } }
        try slice()
        let start = ContinuousClock.now
        defer { server.withLock { $0.pull += Report.seconds(ContinuousClock.now - start) } }
        return try await inner.pull(request)
    }
    func push(_ request: PushRequest) async throws -> [PushResult] {
        try slice()
        let start = ContinuousClock.now
        defer { server.withLock { $0.push += Report.seconds(ContinuousClock.now - start) } }
        return try await inner.push(request)
    }
    func bulkSnapshot(_ request: PullRequest) async throws -> PullPage { try await inner.bulkSnapshot(request) }
    func search(_ request: PullRequest, query: JSONObject) async throws -> PullPage { try await inner.search(request, query: query) }
    func search(_ request: PullRequest, matching condition: Condition) async throws -> PullPage {
        try await inner.search(request, matching: condition)
    }
    func remoteIDs(_ request: PullRequest) async throws -> [String] { try await inner.remoteIDs(request) }
    func downloadBlob(_ url: String, session: SyncSession) async throws -> Data { try await inner.downloadBlob(url, session: session) }
    func serverForm(_ value: JSONValue) -> JSONValue { inner.serverForm(value) }
}

/// A store syncing one model through an adapter and the engine, for the push measures
/// (`parse_push`, `salesforce_push`): local creates or updates written untimed, then the sync
/// that pushes them, timed.
final class PushDevice {
    let store: Store
    let model: Model
    let engine: SyncEngine
    let name: String
    let path: String
    /// Local id → the server's id, once the creates are pushed.
    var serverIDs: [String: String] = [:]

    /// Opens a new store at `path` and syncs model `name` once (a describe, an empty pull).
    init(backend: any SyncBackend, model name: String, path: String) async throws {
        store = try Store(path: path)
        model = try store.register(ModelDefinition(name: name, syncType: .incremental))
        var configuration = SyncEngine.Configuration()
        configuration.pageSize = SyncBench.pageSize
        engine = SyncEngine(store: store, backend: backend, configuration: configuration)
        self.name = name
        self.path = path
        try await engine.logIn(Credentials(user: "ann", password: "secret"))
        _ = try await engine.sync(models: [name])
    }

    /// One round of a push measure: the creates, then the updates, pushed by this device and
    /// posted by `post` (the baseline), the two taking turns going first phase by phase (by the
    /// round's parity) so that noise lands on both alike. Returns both sides' seconds; the
    /// device is closed.
    func race(round: Int, _ items: [BenchData.Item], against post: ([BenchData.Item], Bool) async throws -> Double) async throws -> (
        satchel: Double, baseline: Double
    ) {
        var satchel = 0.0, baseline = 0.0
        for phase in 0..<2 {
            let update = phase == 1
            if (round + phase) % 2 == 0 {
                satchel += try await push(items, update: update)
                baseline += try await post(items, update)
            } else {
                baseline += try await post(items, update)
                satchel += try await push(items, update: update)
            }
        }
        try close()
        return (satchel, baseline)
    }

    /// Writes the creates (or a new price for each, `update`) here, untimed, then returns the
    /// seconds of the sync that pushes them.
    func push(_ items: [BenchData.Item], update: Bool) async throws -> Double {
        var index = 0
        while index < items.count {
            let end = min(index + SyncBench.pageSize, items.count)
            let slice = items[index..<end]
            let (model, ids) = (self.model, serverIDs)
            try await store.bulkUpdate { tx in
                for item in slice {
                    if update {
                        _ = try tx.update(ids[item.id] ?? item.id, with: ["price": BulkSave.newPrice(item)], in: model)
                    } else {
                        _ = try tx.save(Object(id: item.id, attributes: item.attributes), in: model)
                    }
                }
            }
            index = end
        }
        let start = ContinuousClock.now
        let report = try await engine.sync(models: [name])
        let seconds = Report.seconds(ContinuousClock.now - start)
        guard report.accepted == items.count, report.refused == 0 else {
            throw SatchelError(.unknown, "the push was accepted for \(report.accepted) of \(items.count) changes")
        }
        if !update { serverIDs = report.serverIDs[name] ?? [:] }
        return seconds
    }

    func close() throws {
        try store.close()
        try FileManager.default.removeItem(atPath: path)
    }
}
