import Foundation
import Satchel
import SatchelSync
import Synchronization

/// The server of `satchel sync --backend memory`: an ``InMemoryBackend`` whose state lives in a
/// file.
///
/// A server that answers before what it answers for is kept is a toy: every call that changed
/// the server's state (a login, a new client, a push) writes the whole state to the file before
/// its answer goes back, through a temporary file, `fsync` and a rename. So a push the store
/// records as accepted is on disk, whenever the process dies.
///
/// One process serves the file at a time: each holds `FILE.lock` (`flock`) from reading the
/// state until it exits, and another waits for it. Without it, two syncs of two stores at once
/// would each write back the state they read, and the later would erase what the earlier kept.
final class MemoryServer: SyncBackend {
    let server: InMemoryBackend
    let file: URL
    /// The server's revision the file holds.
    private let kept: Locked<Int>
    /// The descriptor holding `FILE.lock`, released by `deinit` (or the process's end).
    private let lock: Int32

    /// The server kept in `file` (a new, empty one when the file does not exist).
    ///
    /// - Throws: ``SyncError`` `.protocolViolation` when the file holds no server state.
    init(file: URL) throws {
        self.file = file
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: file.path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw SyncError(.storage, "--url for memory is the file holding the server's state, and \(file.path) is a directory")
        }
        let lockPath = file.path + ".lock"
        let descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw SyncError(.storage, "cannot lock the in-memory server's state: creating \(lockPath) failed (\(String(cString: strerror(errno))))")
        }
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else {
                close(descriptor)
                throw SyncError(.storage, "cannot lock the in-memory server's state \(lockPath) (\(String(cString: strerror(errno))))")
            }
        }
        lock = descriptor
        // Objects keep the ids clients give them, as on Kinto.
        var configuration = InMemoryBackend.Configuration()
        configuration.serverAssignsIDs = false
        if FileManager.default.fileExists(atPath: file.path) {
            let data = try Data(contentsOf: file)
            do {
                server = try InMemoryBackend(configuration: configuration, savedState: try InMemoryBackend.savedState(parsing: Array(data)))
            } catch let error as SatchelError {
                throw SyncError(.protocolViolation, "\(file.path) does not hold an in-memory server's state: \(error.message)")
            } catch let error as SyncError {
                throw SyncError(.protocolViolation, "\(file.path) does not hold an in-memory server's state: \(error.message)")
            }
        } else {
            server = InMemoryBackend(configuration: configuration)
        }
        kept = Locked(0)
    }

    deinit { close(lock) }

    var name: String { server.name }
    var capabilities: SyncCapabilities { server.capabilities }

    /// Writes the state when it changed since it was last kept: to a temporary file beside the
    /// state file, flushed to disk, then renamed over it (and the directory flushed), so the
    /// file holds either the old state or the new one, whole.
    func keep() async throws {
        let revision = await server.revision
        guard kept.withLock({ $0 }) != revision else { return }
        try Self.writeDurably(await server.savedState().jsonBytes, to: file)
        kept.withLock { $0 = revision }
    }

    /// Runs a call of the server, and keeps what it changed before answering (whether it
    /// succeeded or not).
    private func perform<T: Sendable>(_ call: String, _ body: () async throws -> T) async throws -> T {
        TestHooks.arrive(before: call)
        let answer: T
        do {
            answer = try await body()
        } catch {
            try await keep()
            throw error
        }
        try await keep()
        TestHooks.arrive(after: call)
        return answer
    }

    static func writeDurably(_ bytes: [UInt8], to file: URL) throws {
        let path = file.path
        let directory = file.deletingLastPathComponent().path
        let temporary = path + ".tmp-\(getpid())"
        func failure(_ what: String) -> SyncError {
            SyncError(.storage, "cannot keep the in-memory server's state in \(path): \(what) failed (\(String(cString: strerror(errno))))")
        }
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw failure("creating \(temporary)") }
        var written = 0
        let ok = bytes.withUnsafeBytes { buffer -> Bool in
            while written < buffer.count {
                let n = write(fd, buffer.baseAddress! + written, buffer.count - written)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return false }
                written += n
            }
            return fsync(fd) == 0
        }
        close(fd)
        guard ok else {
            unlink(temporary)
            throw failure("writing")
        }
        guard rename(temporary, path) == 0 else {
            unlink(temporary)
            throw failure("renaming")
        }
        let directoryFD = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            fsync(directoryFD)
            close(directoryFD)
        }
    }

    func logIn(_ credentials: Credentials) async throws -> SyncSession { try await perform("logIn") { try await server.logIn(credentials) } }
    func logOut(_ session: SyncSession) async throws { try await perform("logOut") { try await server.logOut(session) } }
    func prepare(_ session: SyncSession) async throws -> SyncSession { try await perform("prepare") { try await server.prepare(session) } }
    func resetClient(_ session: SyncSession) async throws -> SyncSession {
        try await perform("resetClient") { try await server.resetClient(session) }
    }
    func pull(_ request: PullRequest) async throws -> PullPage { try await perform("pull") { try await server.pull(request) } }
    func push(_ request: PushRequest) async throws -> [PushResult] { try await perform("push") { try await server.push(request) } }
    func bulkSnapshot(_ request: PullRequest) async throws -> PullPage {
        try await perform("bulkSnapshot") { try await server.bulkSnapshot(request) }
    }
    func search(_ request: PullRequest, query: JSONObject) async throws -> PullPage {
        try await perform("search") { try await server.search(request, query: query) }
    }
    func search(_ request: PullRequest, matching condition: Condition) async throws -> PullPage {
        try await perform("search") { try await server.search(request, matching: condition) }
    }
    func remoteIDs(_ request: PullRequest) async throws -> [String] { try await perform("remoteIDs") { try await server.remoteIDs(request) } }
    func downloadBlob(_ url: String, session: SyncSession) async throws -> Data {
        try await perform("downloadBlob") { try await server.downloadBlob(url, session: session) }
    }
}

/// Crash points for the tests, in debug builds only: `SATCHEL_KILL_AT=after-push:2` kills the
/// process with SIGKILL right after the server kept its second push, before the answer reaches
/// the store; `before-pull:1` right before the first pull, once the store has recorded what came
/// before.
enum TestHooks {
    #if DEBUG
    private static let point: (before: Bool, call: String, count: Int)? = {
        guard let text = ProcessInfo.processInfo.environment["SATCHEL_KILL_AT"] else { return nil }
        let parts = text.split(separator: ":")
        let where_ = parts.first?.split(separator: "-", maxSplits: 1) ?? []
        guard parts.count == 2, where_.count == 2, ["before", "after"].contains(where_[0]), let count = Int(parts[1]) else { return nil }
        return (where_[0] == "before", String(where_[1]), count)
    }()
    private static let seen = Locked<[String: Int]>([:])
    #endif

    static func arrive(before call: String) { arrive(call, before: true) }
    static func arrive(after call: String) { arrive(call, before: false) }

    private static func arrive(_ call: String, before: Bool) {
        #if DEBUG
        guard let point, point.call == call, point.before == before else { return }
        let count = seen.withLock { seen in
            seen[call, default: 0] += 1
            return seen[call]!
        }
        if count == point.count { kill(getpid(), SIGKILL) }
        #endif
    }
}
