import CSpawn
public import Foundation

/// Runs a program to its end and collects what it wrote, through `posix_spawn`.
///
/// Not Foundation's `Process`: on Linux (Swift 6.3), `Process.run()` reads `/proc/self/fd` with
/// a 256-byte over-read of each directory entry, which crashes the caller now and then when it
/// has many descriptors open (swift-corelibs-foundation pull request 5472) — and a test run has
/// over a thousand (stores, servers, HTTP sessions running in parallel).
///
/// The child gets `/dev/null` (or the `input` given) as standard input, pipes for its output, none of the caller's
/// other descriptors, an empty signal mask and default signal handlers.
public enum ChildProcess {
    public struct Result: Sendable {
        /// The exit status; for a child killed by a signal, the signal's number.
        public var status: Int32
        /// Whether a signal ended the child.
        public var signaled: Bool
        public var stdout: Data
        public var stderr: Data
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Runs `executable` with `arguments` (without the program name) and `environment` (the
    /// caller's when nil) and waits for it. When `killWhen` holds for what the child has written
    /// on stderr so far, or once `killAfter` has passed, the child is killed with SIGKILL, as a
    /// crash would stop it.
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, input: Data? = nil,
        killWhen: ((String) -> Bool)? = nil, killAfter: Duration? = nil
    ) throws -> Result {
        // Standard input: `input` from a file of its own (removed once the child has it open), or /dev/null.
        var inputPath = "/dev/null"
        if let input {
            inputPath = FileManager.default.temporaryDirectory.appendingPathComponent("satchel-stdin-\(UUID().uuidString)").path
            guard FileManager.default.createFile(atPath: inputPath, contents: input, attributes: [.posixPermissions: 0o600]) else {
                throw Failure(description: "cannot write \(inputPath)")
            }
        }
        defer { if input != nil { try? FileManager.default.removeItem(atPath: inputPath) } }
        var output: [Int32] = [-1, -1]
        var errors: [Int32] = [-1, -1]
        guard satchel_pipe_cloexec(&output) == 0 else { throw Failure(description: "pipe: \(String(cString: strerror(errno)))") }
        guard satchel_pipe_cloexec(&errors) == 0 else {
            close(output[0])
            close(output[1])
            throw Failure(description: "pipe: \(String(cString: strerror(errno)))")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, inputPath, O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errors[1], 2)
        satchel_spawn_addclosefrom(&actions, 3)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigfillset(&defaults)
        sigdelset(&defaults, SIGKILL)
        sigdelset(&defaults, SIGSTOP)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let env = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in env { free(pointer) }
        }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, env)
        close(output[1])
        close(errors[1])
        guard spawned == 0 else {
            close(output[0])
            close(errors[0])
            throw Failure(description: "cannot run \(executable): \(String(cString: strerror(spawned)))")
        }
        let deadline = killAfter.map { ContinuousClock.now + $0 }
        let (stdout, stderr) = drain(output[0], errors[0], deadline: deadline, atDeadline: { kill(pid, SIGKILL) }) { stderr in
            guard let killWhen, killWhen(String(decoding: stderr, as: UTF8.self)) else { return false }
            kill(pid, SIGKILL)
            return true
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // WIFSIGNALED / WTERMSIG / WEXITSTATUS, which Swift does not import (macros).
        let signal = status & 0x7f
        if signal != 0 && signal != 0x7f { return Result(status: signal, signaled: true, stdout: stdout, stderr: stderr) }
        return Result(status: (status >> 8) & 0xff, signaled: false, stdout: stdout, stderr: stderr)
    }

    /// ``run(_:_:environment:killWhen:)`` waiting on a thread of its own, not one of the
    /// concurrency pool's (two, on two cores): a test waiting for a child must not starve the
    /// in-process servers other tests run meanwhile.
    public static func detached(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, input: Data? = nil,
        killWhen: (@Sendable (String) -> Bool)? = nil, killAfter: Duration? = nil
    ) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(
                    with: Swift.Result {
                        try run(executable, arguments, environment: environment, input: input, killWhen: killWhen, killAfter: killAfter)
                    })
            }
        }
    }

    /// Reads both pipes to their ends (together, so that a child filling one cannot block),
    /// then closes them. `stop` sees the second pipe's data after each read, until it returns
    /// true; `atDeadline` runs once when `deadline` passes first.
    private static func drain(
        _ first: Int32, _ second: Int32, deadline: ContinuousClock.Instant? = nil, atDeadline: () -> Void = {}, stop: (Data) -> Bool
    ) -> (Data, Data) {
        var deadline = deadline
        var data = [Data(), Data()]
        var stopped = false
        var fds = [pollfd(fd: first, events: Int16(POLLIN), revents: 0), pollfd(fd: second, events: Int16(POLLIN), revents: 0)]
        var buffer = [UInt8](repeating: 0, count: 65536)
        while fds.contains(where: { $0.fd >= 0 }) {
            var timeout: Int32 = -1
            if let due = deadline {
                let left = ContinuousClock.now.duration(to: due)
                if left <= .zero {
                    atDeadline()
                    deadline = nil
                    continue
                }
                let (seconds, attoseconds) = left.components
                timeout = Int32(min(Int64(Int32.max), seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1))
            }
            let ready = poll(&fds, nfds_t(fds.count), timeout)
            if ready < 0 {
                if errno == EINTR { continue }
                break
            }
            if ready == 0 { continue }
            for index in fds.indices where fds[index].fd >= 0 && fds[index].revents != 0 {
                let n = read(fds[index].fd, &buffer, buffer.count)
                if n > 0 {
                    data[index].append(contentsOf: buffer[0..<n])
                    if index == 1 && !stopped { stopped = stop(data[1]) }
                } else if n == 0 || errno != EINTR {
                    close(fds[index].fd)
                    fds[index].fd = -1  // poll skips negative descriptors
                }
            }
        }
        return (data[0], data[1])
    }
}
