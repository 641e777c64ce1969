import Foundation
public import Logging
public import Satchel
import Synchronization

/// Syncs a store with a server through a ``SyncBackend``.
///
/// ```swift
/// let engine = SyncEngine(store: store, backend: InMemoryBackend())
/// try await engine.logIn(Credentials(user: "ann", password: "secret"))
/// Task { for await event in engine.events { print(event) } }
/// let report = try await engine.sync()
/// ```
///
/// A cycle, per model (parents before the models that refer to them): push the pending local
/// changes, then pull pages until the server says done. Each page is applied in one write batch
/// with its cursor, its index entries and the change-log updates it implies, so a crash or a
/// ``stop()`` between pages resumes exactly where it stopped, and a page is never half applied.
/// Attributes with local changes the server has not acknowledged keep their local values; a
/// server delete of an object with such changes is kept as a refused change, not applied.
///
/// Thread safety: an actor. ``stop()`` may be called from anywhere, at any time.
public actor SyncEngine {
    /// Knobs of the engine.
    public struct Configuration: Sendable {
        /// Objects per page asked of the server.
        public var pageSize = 500
        /// Retries of calls that failed for want of an answer, a 5xx or a 429.
        public var retry = RetryPolicy()
        /// When the server says it does not know this client: reset the client and sync again
        /// (once), instead of failing.
        public var resetOnUnknownClient = true
        /// What becomes of the `user` partition when another user logs in than the one whose
        /// session the store holds (RhoConnect's "sync user changed" hook); called with the
        /// previous user and the new one. By default it is wiped.
        public var onUserChange: @Sendable (_ previousUser: String, _ newUser: String) -> UserChangeAction = { _, _ in .wipeUserData }
        /// How to wait between retries (tests pass one that records the delays).
        public var sleep: @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
        /// Random numbers in 0..<1 for the retry jitter.
        public var random: @Sendable () -> Double = { Double.random(in: 0..<1) }
        /// Where the engine logs (swift-log): retries and their delays, failed calls with their
        /// status and path, refused sessions, resets, user changes. By default nothing is logged
        /// (a no-op handler): a library prints nothing unless asked. Passwords, tokens and
        /// cookies never appear in a log line.
        public var logger = Logger(label: "satchel.sync", factory: { _ in SwiftLogNoOpLogHandler() })

        public init() {}
    }

    /// How much a sync pulls.
    public enum Mode: Sendable, Hashable {
        /// From each model's cursor on (the default).
        case incremental
        /// Everything again, from no cursor; objects the server no longer has are deleted.
        case full
        /// A bulk snapshot of each model that the server can send one of, replacing its data;
        /// pending local changes are re-applied on top.
        case bulk
    }

    public nonisolated let store: Store
    public nonisolated let backend: any SyncBackend
    public let configuration: Configuration
    /// Every notification, object notification and completion since the engine was made, in
    /// order. **One consumer**: two loops iterating it split the events between them; give a
    /// second consumer ``setEventHandler(_:)``, which sees every event too. Events beyond the
    /// newest 10,000 unread are dropped.
    public nonisolated let events: AsyncStream<SyncEvent>
    private let continuation: AsyncStream<SyncEvent>.Continuation
    private var handler: (@Sendable (SyncEvent) -> Void)?
    private var modelConfigurations: [String: ModelSyncConfiguration] = [:]
    /// The app's resolvers of true conflicts, by model.
    private(set) var conflictResolvers: [String: ConflictResolver] = [:]
    private var syncing = false
    private let stopRequested = Atomic<Bool>(false)
    /// Where store work that grows with a model's size runs (a bulk snapshot, a reconcile, the
    /// push's preparation, rewrites, wipes), off the cooperative thread pool: a LevelDB write
    /// blocks its thread, and the pool has one thread per core. Work bounded by a page or a
    /// push chunk runs on the actor, unless it renames objects (see ``onStore(bounded:_:)``).
    private let storageQueue = DispatchQueue(label: "satchel.sync.storage")

    public init(store: Store, backend: any SyncBackend, configuration: Configuration = Configuration()) {
        self.store = store
        self.backend = backend
        self.configuration = configuration
        (events, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(10_000))
    }

    deinit { continuation.finish() }

    /// Also calls `handler` with every event (on the engine's executor; keep it short).
    public func setEventHandler(_ handler: (@Sendable (SyncEvent) -> Void)?) { self.handler = handler }

    /// Sets how true conflicts of `model` are decided (nil: the built-in policy, which keeps
    /// them as refused changes for the app). A true conflict is an update the server refused
    /// because the object changed there, where the server changed an attribute this device
    /// changed too; changes to different attributes are merged whatever the resolver.
    ///
    /// ```swift
    /// await engine.setConflictResolver(for: "Product") { conflict in
    ///     conflict.conflicting == ["price"] ? .keepLocal : .takeServer
    /// }
    /// ```
    public func setConflictResolver(for model: String, _ resolver: ConflictResolver?) { conflictResolvers[model] = resolver }

    /// Sets how `model` syncs, and stores it: later engines on this store sync the model the same
    /// way until it is configured again (a client reset keeps it too). Registers the model when
    /// the store does not have it (a property bag).
    public func configure(_ model: String, _ configuration: ModelSyncConfiguration) throws {
        try storage {
            let handle = try store.model(model)
            try store.bulkUpdate { tx in
                var state = try tx.syncState(handle)
                let new = configuration.syncObject(named: model)
                // What the server sends changed (the filter, the attributes): the cursor knows
                // only what the old configuration pulled, so the next pull is a full one (a
                // black-box probe: objects of a new filter never arrived).
                if state.cursor != nil || state.initialSyncComplete,
                    Self.pulledShape(state.configuration ?? ModelSyncConfiguration().syncObject(named: model)) != Self.pulledShape(new)
                {
                    state.fullPullPending = true
                }
                state.configuration = new
                try tx.setSyncState(handle, state)
            }
        }
        modelConfigurations[model] = configuration
    }

    /// How `model` syncs with this backend: its configuration, refused when its server filter
    /// is a SOQL condition (a string `filter`) and the backend is not Salesforce's (a black-box
    /// probe: Parse read it as a condition on a field `soql`, and the sync deleted every object).
    func configurationForBackend(of model: String) throws -> ModelSyncConfiguration {
        var configuration = try configuration(of: model)
        if let only = configuration.onlyAttributes {
            configuration.onlyAttributes = only + backend.capabilities.serverAttributes.filter { !only.contains($0) }
        }
        if !backend.capabilities.soqlFilters, let filter = configuration.serverFilter, filter.count == 1, let soql = filter["soql"]?.stringValue {
            throw SyncError(
                .notSupported,
                "the filter of model \(model) is a SOQL condition (\(soql)), which only Salesforce takes: give \(backend.name) a filter object in its own form"
            )
        }
        return configuration
    }

    /// What of a model's stored configuration decides which objects and attributes a pull
    /// brings.
    static func pulledShape(_ configuration: JSONObject) -> JSONObject {
        JSONObject(configuration.filter { ["filter", "onlyList", "ignoreList", "extra-query"].contains($0.key) }.map { ($0.key, $0.value) })
    }

    /// How `model` syncs: as configured in this process, or as stored by an earlier one (the
    /// default configuration when neither).
    public func configuration(of model: String) throws -> ModelSyncConfiguration {
        if let configuration = modelConfigurations[model] { return configuration }
        let stored = try storage { () -> JSONObject? in
            guard let handle = store.existingModel(model) else { return nil }
            return try store.read { try $0.syncState(handle).configuration }
        }
        let configuration = try stored.map { entry in try storage { try ModelSyncConfiguration(syncObject: entry) } } ?? ModelSyncConfiguration()
        modelConfigurations[model] = configuration
        return configuration
    }

    func emit(_ event: SyncEvent) {
        continuation.yield(event)
        handler?(event)
    }

    /// From now on, an edit session that saves changes to a synced model
    /// (`EditSession.finishEditing(save: true)`) has the model's pending changes pushed at once
    /// when no sync is running (MM_RSF's "immediately if online"); during a sync they wait for the
    /// next one. A push that fails leaves them pending, and says why in an `error` notification.
    public func pushSavedEdits() {
        store.setEditSavedHandler { [weak self] model, _ in
            guard let self else { return }
            Task { await self.pushNow(model) }
        }
    }

    /// Pushes `model`'s pending changes, unless a sync is running.
    func pushNow(_ model: String) async {
        guard !syncing else { return }
        syncing = true
        defer { syncing = false }
        do {
            let session = try await preparedSession()
            guard let definition = try orderedModels([model]).first(where: { $0.name == model }) else { return }
            let handle = try storage { try store.model(model) }
            var report = SyncReport()
            // A push whose answer was lost waits, in flight, for the next sync's pull.
            if let lost = try await push(
                handle, definition: definition, modelConfiguration: try configurationForBackend(of: model), session: session, report: &report)
            {
                throw lost
            }
        } catch {
            let failure = Self.syncError(error)
            emit(.sync(SyncNotification(status: .error, model: model, errorCode: failure.code, message: "pushing a saved edit: \(failure.message)")))
        }
    }

    /// Whether a sync is running.
    public var isSyncing: Bool { syncing }

    /// Asks a running sync to stop at the next page boundary; it then throws `.cancelled`. What
    /// was applied stays applied; nothing is half applied.
    public nonisolated func stop() { stopRequested.store(true, ordering: .releasing) }

    func checkStopped() throws {
        if isStopping { throw SyncError(.cancelled, "the sync was stopped") }
    }

    /// Whether ``stop()`` was called and the sync under way has yet to end on it.
    var isStopping: Bool { stopRequested.load(ordering: .acquiring) }

    // MARK: - Sync

    /// Runs one sync cycle of `models` (default: every model that syncs, parents first). A
    /// model named brings the store's models its associations point at, synced before it
    /// (RhoConnect's associations: "synchronized along"); a model the store lacks is not made.
    ///
    /// - Returns: what the sync did. `report.refused > 0` means the server refused some records
    ///   (kept as refused changes, see ``Satchel/Store/refusedChanges(model:)``).
    /// - Throws: ``SyncError``; what was applied before the failure stays applied, and no local
    ///   change is lost.
    @discardableResult
    public func sync(models names: [String]? = nil, mode: Mode = .incremental) async throws -> SyncReport {
        guard !syncing else { throw SyncError(.busy, "a sync is already running") }
        syncing = true
        stopRequested.store(false, ordering: .releasing)
        defer { syncing = false }
        var report = SyncReport()
        if mode == .bulk && !backend.capabilities.bulkSnapshot {
            // Said, not done in silence (a black-box probe: --bulk against Parse).
            emit(
                .sync(
                    SyncNotification(
                        status: .inProgress, message: "\(backend.name) has no bulk snapshot: the models sync by incremental pulls")))
        }
        do {
            do {
                try await cycle(names, mode: mode, report: &report)
            } catch let error as SyncError where error.code == .unknownClient && configuration.resetOnUnknownClient {
                emit(
                    .sync(
                        SyncNotification(
                            status: .error, errorCode: .unknownClient,
                            message: "the server does not know this client: resetting the client and syncing everything again")))
                try await recoverUnknownClient()
                report.clientWasReset = true
                try await cycle(names, mode: .full, report: &report)
            }
        } catch {
            let failure = Self.syncError(error)
            emit(.sync(SyncNotification(status: .error, errorCode: failure.code, message: failure.message)))
            keepRenewedSession()
            emit(.completed(report))
            throw failure
        }
        keepRenewedSession()
        // Counted for the whole sync, as each model's `ok` counts its own (a black-box probe: 0).
        emit(.sync(SyncNotification(status: .complete, processedCount: report.pulled)))
        emit(.completed(report))
        return report
    }

    private func cycle(_ names: [String]?, mode: Mode, report: inout SyncReport) async throws {
        // References a rename left for other partitions, should an earlier rewrite have failed.
        try await onStorageQueue { try $0.finishRewrites() }
        let session = try await preparedSession()
        try await declareAssociationsAhead(try orderedModels(names), session: session)
        for definition in try orderedModels(names) {
            try checkStopped()
            report.models.append(definition.name)
            try await syncModel(definition, mode: mode, session: session, report: &report)
            if report.schemaChanged { break }
        }
    }

    /// Asks the server for the associations of models never pulled that have local creates
    /// (Salesforce's describe), before anything is pushed: a parent made here then syncs before
    /// its children, and its server id replaces the local one in them before they go. A model
    /// the server cannot say them for is left to its pull, which says what is wrong.
    private func declareAssociationsAhead(_ definitions: [ModelDefinition], session: SyncSession) async throws {
        for definition in definitions {
            let model = try storage { try store.model(definition.name) }
            let (state, creates) = try storage { (try store.read { try $0.syncState(model) }, try model.statistics().pendingCreates) }
            guard !state.initialSyncComplete, state.cursor == nil, creates > 0 else { continue }
            let request = pullRequest(
                definition, cursor: nil, session: session, modelConfiguration: try configurationForBackend(of: definition.name),
                metadata: state.metadata)
            let associations: [String: String]
            do {
                associations = try await withRetry { try await self.backend.associations(request) }
            } catch let error as SyncError where error.code != .unauthorized && error.code != .cancelled {
                configuration.logger.notice("associations not known ahead", metadata: ["model": "\(definition.name)", "reason": "\(error.message)"])
                continue
            }
            guard !associations.isEmpty else { continue }
            var page = PullPage()
            page.schema.associations = associations
            _ = try declare(page, in: definition)
        }
    }

    /// The models to sync: those of the user and app partitions that sync, parents before the
    /// models whose associations refer to them, then by name. Named models bring the models
    /// their associations point at, as RhoConnect's associations force them "synchronized
    /// along": a change pointing at an object made here goes once that object is on the server
    /// (a black-box probe: `sync --model Order` never sent its new Customer, and its orders
    /// waited for ever).
    func orderedModels(_ names: [String]?) throws -> [ModelDefinition] {
        // A model named "" stays local: no server names a collection, class or source so.
        var candidates = store.models.filter { $0.syncType != .none && $0.partition != .local && !$0.name.isEmpty }
        if let names {
            for name in names where !candidates.contains(where: { $0.name == name }) {
                throw SyncError(.notSupported, "model '\(name)' does not sync (unknown, local or sync type none)")
            }
            var wanted = Set(names)
            var next = names
            while let name = next.popLast() {
                for parent in candidates.first(where: { $0.name == name }).map({ Array($0.associations.values) }) ?? []
                where !wanted.contains(parent) && candidates.contains(where: { $0.name == parent }) {
                    wanted.insert(parent)
                    next.append(parent)
                }
            }
            candidates = candidates.filter { wanted.contains($0.name) }
        }
        var ordered: [ModelDefinition] = []
        var visiting = Set<String>()
        func visit(_ definition: ModelDefinition) {
            if ordered.contains(where: { $0.name == definition.name }) || visiting.contains(definition.name) { return }
            visiting.insert(definition.name)
            for parent in definition.associations.values.sorted() {
                if let p = candidates.first(where: { $0.name == parent }) { visit(p) }
            }
            ordered.append(definition)
        }
        for definition in candidates { visit(definition) }
        return ordered
    }

    private func syncModel(_ definition: ModelDefinition, mode: Mode, session: SyncSession, report: inout SyncReport) async throws {
        let model = try storage { try store.model(definition.name) }
        let modelConfiguration = try configurationForBackend(of: definition.name)
        let pulledBefore = report.pulled
        let usesBulk = definition.syncType == .bulkOnly || (mode == .bulk && backend.capabilities.bulkSnapshot)
        // A full pull asked for, or one owed since the server's record of this client was lost.
        let full = try mode == .full || storage { try store.read { try $0.syncState(model).fullPullPending } }
        if full && !usesBulk {
            // A server whose push results come in pull pages forgets those it holds when it is
            // told to send everything again (RhoConnect's reset): changes in flight that wait for
            // them (a create's link, after a pull whose answer was lost) get them first.
            if backend.capabilities.pushResultsViaPull, try storage({ try model.statistics().inFlight }) > 0 {
                try await pull(model, definition: definition, modelConfiguration: modelConfiguration, session: session, full: false, report: &report)
            }
            // Owed until the full pull completes: once the server was told to send everything
            // again, a pull that fails after it must not be followed by an incremental one
            // (RhoConnect's reset forgets what this client had, deletes included).
            if mode == .full { try owesFullPull(model, true) }
            let request = pullRequest(definition, cursor: nil, session: session, modelConfiguration: modelConfiguration)
            try await withRetry { try await self.backend.prepareFullPull(request) }
        }
        // A push whose answer was lost, to a server whose results come in pull pages, waits for
        // the pull to say what was carried out; what it does not confirm goes again after it.
        // A server whose push results come in pull pages says there that it refused an update,
        // never in a bulk snapshot, whose copy of the object would then replace the value written
        // here as if the update had been taken (a black-box probe: RhoConnect's update-error
        // came only at a later sync, the edit gone from the store meanwhile). So an update
        // pushed before a snapshot has its result asked for by one incremental pull first.
        let updatesBeforeSnapshot =
            try usesBulk && backend.capabilities.pushResultsViaPull && storage { try model.statistics().pendingUpdates } > 0
        var lost = try await push(model, definition: definition, modelConfiguration: modelConfiguration, session: session, report: &report)
        if updatesBeforeSnapshot && lost == nil && !report.schemaChanged {
            try await pull(model, definition: definition, modelConfiguration: modelConfiguration, session: session, full: false, report: &report)
        }
        var pulls = !usesBulk
        // A snapshot that fails once begun is owed as a full pull: the server may count it as
        // handed out (RhoConnect copies its data into the client's when it gives the file's
        // URL), and an incremental pull would then miss what it held. The bulk clears it.
        if usesBulk { try owesFullPull(model, true) }
        if usesBulk, try await bulk(model, definition: definition, modelConfiguration: modelConfiguration, session: session, report: &report) {
            // A bulk snapshot carries no push results (a create's link): while some changes wait
            // in flight for them, one incremental pull follows, as after any push, so that a
            // create is not left beside the snapshot's copy of it under its server id.
            let inFlight = try storage { try model.statistics().inFlight }
            pulls = backend.capabilities.pushResultsViaPull && !report.schemaChanged && (lost != nil || inFlight > 0)
        } else if usesBulk {
            // The server has no snapshot of this model (RhoConnect's `nop`): an incremental pull,
            // nothing owed but what was.
            try owesFullPull(model, full)
            pulls = true
        }
        if pulls {
            let linkedBefore = report.serverIDs[definition.name]?.count ?? 0
            try await pull(
                model, definition: definition, modelConfiguration: modelConfiguration, session: session, full: full && !usesBulk, report: &report)
            let settled = report.schemaChanged ? (requeued: 0, unlinked: []) : try await settleAfterPull(model)
            if !settled.unlinked.isEmpty {
                report.refused += settled.unlinked.count
                emit(
                    .sync(
                        SyncNotification(
                            status: .error, model: definition.name, errorCode: .refusedChanges,
                            message: settled.unlinked.map { "create \($0): neither linked nor refused by the server" }.joined(separator: "; "))))
            }
            // Links the pull brought free what waited for them (an edit made while a create
            // awaited its link, a child of a new parent): they go in this sync too.
            let linked = backend.capabilities.pushResultsViaPull && (report.serverIDs[definition.name]?.count ?? 0) > linkedBefore
            let freed =
                try linked
                && storage {
                    let statistics = try model.statistics()
                    return statistics.pendingCreates + statistics.pendingUpdates + statistics.pendingDeletes > 0
                }
            if !report.schemaChanged, settled.requeued > 0 || lost != nil || freed {
                lost = try await push(model, definition: definition, modelConfiguration: modelConfiguration, session: session, report: &report)
                if lost == nil && backend.capabilities.pushResultsViaPull {
                    // What became of the changes just sent (the creates' links), in one more pull;
                    // the deletes it sent are done once it is complete.
                    try await pull(
                        model, definition: definition, modelConfiguration: modelConfiguration, session: session, full: false, report: &report)
                    if !report.schemaChanged { _ = try await settleAfterPull(model, deletesOnly: true) }
                }
            }
        }
        if let lost { throw lost }
        if !report.schemaChanged { emit(.sync(SyncNotification(status: .ok, model: definition.name, processedCount: report.pulled - pulledBefore))) }
    }

    /// Records durably whether `model`'s next pull must be a full one (the transaction's
    /// `owesFullPull(_:_:)`, in a batch of its own).
    func owesFullPull(_ model: Model, _ owed: Bool) throws {
        try storage {
            try store.bulkUpdate { tx in try tx.owesFullPull(model, owed) }
        }
    }

    // MARK: - Calls

    /// Runs a backend call, retrying what may succeed later with backoff; a 401 drops the stored
    /// proof of login (unless `keepingSessionOn401`: a login that failed leaves the session it
    /// would have replaced). `firstAttempt`: the call already under way (a page asked ahead),
    /// whose answer or failure counts as the first attempt.
    func withRetry<T: Sendable>(
        keepingSessionOn401: Bool = false, firstAttempt: Task<T, any Error>? = nil, retrying: (SyncError) -> Bool = { _ in true },
        _ body: @Sendable () async throws -> T
    ) async throws -> T {
        var attempt = 1
        var underWay = firstAttempt
        while true {
            do {
                if let call = underWay {
                    underWay = nil
                    return try await call.value
                }
                return try await body()
            } catch {
                var failure = Self.syncError(error)
                if failure.code == .unauthorized && !keepingSessionOn401 {
                    configuration.logger.notice(
                        "the server refused the session; its proof of login is dropped", metadata: ["error": "\(failure.code)"])
                    try? expireSession()
                }
                // A wait longer than the policy's longest would look like a hang inside a sync (a
                // hostile server can ask for years): the sync fails now, its error saying when
                // the server wants to hear from the device again.
                let waitsTooLong = failure.isRetryable && failure.retryAfter.map { $0 > configuration.retry.maxDelay } == true
                if waitsTooLong, let asked = failure.retryAfter {
                    failure.message +=
                        "; the server asked to wait \(Self.rounded(asked)), longer than the retry policy's \(Self.rounded(configuration.retry.maxDelay))"
                }
                guard failure.isRetryable, retrying(failure), !waitsTooLong, attempt < configuration.retry.maxAttempts else {
                    configuration.logger.error("sync call failed", metadata: Self.metadata(failure))
                    throw failure
                }
                try checkStopped()
                let delay = configuration.retry.delay(after: attempt, serverAsked: failure.retryAfter, random: configuration.random())
                var metadata = Self.metadata(failure)
                metadata["attempt"] = "\(attempt)"
                metadata["delay"] = "\(Self.rounded(delay))"
                configuration.logger.warning("sync call failed; retrying", metadata: metadata)
                emit(
                    .sync(
                        SyncNotification(status: .error, errorCode: failure.code, message: "\(failure.message); retrying in \(Self.rounded(delay))")))
                try await configuration.sleep(delay)
                attempt += 1
            }
        }
    }

    /// A failure's log metadata: its code, HTTP status and message (which never hold a secret:
    /// adapters' messages name calls and paths, not credentials).
    static func metadata(_ failure: SyncError) -> Logger.Metadata {
        var metadata: Logger.Metadata = ["code": "\(failure.code)", "message": "\(failure.message)"]
        if let status = failure.httpStatus { metadata["status"] = "\(status)" }
        if let path = failure.path { metadata["path"] = "\(path)" }
        return metadata
    }

    /// A wait as people read it: `0.6 s`, `2 s`, `31 s` (tenths below 10 seconds).
    static func rounded(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        if seconds >= 10 {
            // Whole seconds, in integers: a server may ask for Int64.max of them.
            return "\(attoseconds >= 500_000_000_000_000_000 && seconds < .max ? seconds + 1 : seconds) s"
        }
        let tenths = ((Double(seconds) + Double(attoseconds) / 1e18) * 10).rounded() / 10
        return tenths == tenths.rounded() ? "\(Int(tenths)) s" : "\(tenths) s"
    }

    /// Any error as a SyncError: the store's as `.storage`, an unknown one as `.network`.
    static func syncError(_ error: any Error) -> SyncError {
        switch error {
        case let error as SyncError: error
        case let error as SatchelError: SyncError(.storage, error.description)
        case is CancellationError: SyncError(.cancelled, "the sync task was cancelled")
        default: SyncError(.network, "\(error)")
        }
    }

    /// Runs store work, reporting its errors as `.storage`.
    func storage<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch { throw Self.syncError(error) }
    }

    /// Runs store work on the engine's storage queue, reporting its errors as `.storage`.
    func onStorageQueue<T: Sendable>(_ body: @escaping @Sendable (Store) throws -> T) async throws -> T {
        let store = self.store
        return try await withCheckedThrowingContinuation { continuation in
            storageQueue.async {
                continuation.resume(with: Result { try body(store) }.mapError(Self.syncError))
            }
        }
    }

    /// Runs store work on the actor when it is bounded by a page or a push chunk, else (it
    /// renames objects, whose references are rewritten in models of any size) on the storage
    /// queue.
    func onStore<T: Sendable>(bounded: Bool, _ body: @escaping @Sendable (Store) throws -> T) async throws -> T {
        if bounded { return try storage { try body(store) } }
        return try await onStorageQueue(body)
    }

    func pullRequest(
        _ definition: ModelDefinition, cursor: JSONValue?, session: SyncSession, modelConfiguration: ModelSyncConfiguration,
        metadata: JSONValue? = nil
    ) -> PullRequest {
        PullRequest(
            model: definition, cursor: cursor, pageSize: configuration.pageSize, session: session, configuration: modelConfiguration,
            metadata: metadata)
    }
}

extension Transaction {
    /// Records in this batch whether `model`'s next pull must be a full one (nothing is written
    /// when it already says so).
    func owesFullPull(_ model: Model, _ owed: Bool) throws {
        var state = try syncState(model)
        guard state.fullPullPending != owed else { return }
        state.fullPullPending = owed
        try setSyncState(model, state)
    }
}
