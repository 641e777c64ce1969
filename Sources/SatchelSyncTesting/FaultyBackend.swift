public import Foundation
public import Satchel
public import SatchelSync
import Synchronization

/// The calls of ``SatchelSync/SyncBackend``, by name.
public enum BackendCall: String, Sendable, Hashable, CaseIterable {
    case logIn, logOut, prepare, resetClient, prepareFullPull, associations, pull, push, bulkSnapshot, search, serverObjects, remoteIDs, downloadBlob
}

/// Wraps any adapter and injects faults at its boundary, so that tests can put every adapter
/// through lost answers, failed calls and repeated pages, whatever its server, and count its
/// calls. The one fault injector of Satchel's tests.
///
/// ```swift
/// let faults = FaultyBackend(InMemoryBackend())
/// faults.inject(.dropAnswer, on: .push)           // the push lands, its answer is lost
/// faults.inject(.fail(SyncError(.server, "busy", httpStatus: 503)), on: .pull, after: 2)
/// ```
public final class FaultyBackend: SyncBackend {
    public enum Fault: Sendable {
        /// The call fails with this error; nothing reaches the server.
        case fail(SyncError)
        /// The server does the work, then the answer is lost (a `.network` error).
        case dropAnswer
        /// A pull answers with the previous pull's page again.
        case repeatPreviousPage
        /// Runs this before the call goes through: stop the engine, change the server (expire
        /// its sessions, make it forget this client)…
        case before(@Sendable () async -> Void)
    }

    private struct State {
        var pending: [(call: BackendCall, skip: Int, fault: Fault)] = []
        var counts: [BackendCall: Int] = [:]
        var calls: [BackendCall] = []
        var previousPage: PullPage?
    }

    public let wrapped: any SyncBackend
    private let state = Locked(State())

    public init(_ wrapped: any SyncBackend) { self.wrapped = wrapped }

    public var name: String { wrapped.name }
    public var capabilities: SyncCapabilities { wrapped.capabilities }

    /// Injects `fault` into the call of `call` that comes after `skip` more of them.
    public func inject(_ fault: Fault, on call: BackendCall, after skip: Int = 0) {
        state.withLock { $0.pending.append((call, skip, fault)) }
    }

    /// The next `count` calls of `call` fail with `error` (by default a 503).
    public func failNext(_ count: Int, with error: SyncError = SyncError(.server, "service unavailable", httpStatus: 503), on call: BackendCall) {
        for _ in 0..<max(0, count) { inject(.fail(error), on: call) }
    }

    /// How many times `call` was made (faulty ones included).
    public func count(_ call: BackendCall) -> Int { state.withLock { $0.counts[call] ?? 0 } }

    /// Every call made, in order.
    public var calls: [BackendCall] { state.withLock { $0.calls } }

    /// Faults injected that no call has met yet.
    public var unusedFaults: Int { state.withLock { $0.pending.count } }

    private func fault(for call: BackendCall) -> Fault? {
        state.withLock { state in
            state.counts[call, default: 0] += 1
            state.calls.append(call)
            guard let index = state.pending.firstIndex(where: { $0.call == call }) else { return nil }
            if state.pending[index].skip > 0 {
                state.pending[index].skip -= 1
                return nil
            }
            return state.pending.remove(at: index).fault
        }
    }

    private func perform<T: Sendable>(_ call: BackendCall, _ body: () async throws -> T) async throws -> T {
        try await run(fault(for: call), call, body)
    }

    private func run<T: Sendable>(_ fault: Fault?, _ call: BackendCall, _ body: () async throws -> T) async throws -> T {
        switch fault {
        case .fail(let error)?: throw error
        case .before(let hook)?: await hook()
        default: break
        }
        let answer = try await body()
        if case .dropAnswer? = fault { throw SyncError(.network, "the connection dropped before the answer (\(call.rawValue))") }
        return answer
    }

    public func logIn(_ credentials: Credentials) async throws -> SyncSession {
        try await perform(.logIn) { try await wrapped.logIn(credentials) }
    }

    public func logOut(_ session: SyncSession) async throws {
        try await perform(.logOut) { try await wrapped.logOut(session) }
    }

    public func prepare(_ session: SyncSession) async throws -> SyncSession {
        try await perform(.prepare) { try await wrapped.prepare(session) }
    }

    public func renewedSession(_ session: SyncSession) -> SyncSession { wrapped.renewedSession(session) }

    public func resetClient(_ session: SyncSession) async throws -> SyncSession {
        try await perform(.resetClient) { try await wrapped.resetClient(session) }
    }

    public func prepareFullPull(_ request: PullRequest) async throws {
        try await perform(.prepareFullPull) { try await wrapped.prepareFullPull(request) }
    }

    public func associations(_ request: PullRequest) async throws -> [String: String] {
        try await perform(.associations) { try await wrapped.associations(request) }
    }

    public func pull(_ request: PullRequest) async throws -> PullPage {
        let fault = fault(for: .pull)
        if case .repeatPreviousPage? = fault, let previous = state.withLock({ $0.previousPage }) { return previous }
        let page = try await run(fault, .pull) { try await wrapped.pull(request) }
        state.withLock { $0.previousPage = page }
        return page
    }

    public func push(_ request: PushRequest) async throws -> [PushResult] {
        try await perform(.push) { try await wrapped.push(request) }
    }

    public func bulkSnapshot(_ request: PullRequest) async throws -> PullPage {
        try await perform(.bulkSnapshot) { try await wrapped.bulkSnapshot(request) }
    }

    public func search(_ request: PullRequest, query: JSONObject) async throws -> PullPage {
        try await perform(.search) { try await wrapped.search(request, query: query) }
    }

    public func search(_ request: PullRequest, matching condition: Condition) async throws -> PullPage {
        try await perform(.search) { try await wrapped.search(request, matching: condition) }
    }

    public func serverObjects(_ request: PullRequest) async throws -> PullPage {
        try await perform(.serverObjects) { try await wrapped.serverObjects(request) }
    }

    public func remoteIDs(_ request: PullRequest) async throws -> [String] {
        try await perform(.remoteIDs) { try await wrapped.remoteIDs(request) }
    }

    public func downloadBlob(_ url: String, session: SyncSession) async throws -> Data {
        try await perform(.downloadBlob) { try await wrapped.downloadBlob(url, session: session) }
    }

    public func serverForm(_ value: JSONValue) -> JSONValue { wrapped.serverForm(value) }
}
