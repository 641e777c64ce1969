import Foundation
import Synchronization

/// Work done one step ahead of its caller on a thread of its own: the thread makes the next
/// chunk while the caller uses the last one, so that the two overlap on two cores. At most one
/// made chunk waits for the caller, and at most one handed back waits for the thread
/// (``recycle(_:)``), so memory stays at about four chunks.
///
/// The thread first calls `start` to make its state (which never leaves the thread), then
/// `produce` for each chunk the caller asks for, until `produce` returns nil (the end) or throws.
/// The caller takes chunks with ``next()`` until it returns nil, and calls ``close()`` once,
/// however it stops: the thread is gone when `close` returns.
final class ReadAhead<Chunk: Sendable>: Sendable {
    /// The chunk made (nil: the end), or why making it failed; nil while the thread works.
    private let ready = Locked<Result<Chunk?, SatchelError>?>(nil)
    /// Signalled by the thread when `ready` holds a result.
    private let filled = DispatchSemaphore(value: 0)
    /// Signalled by the caller to have the next chunk made.
    private let wanted = DispatchSemaphore(value: 0)
    /// Signalled by the thread as it ends.
    private let finished = DispatchSemaphore(value: 0)
    private let stopping = Atomic<Bool>(false)
    /// Set by the caller once the thread has handed over its last result.
    private let ended = Atomic<Bool>(false)
    private let closed = Atomic<Bool>(false)
    /// The thread's work, with `start` and `produce`; taken out (and so let go) by the thread.
    private let job = Locked<(@Sendable () -> Void)?>(nil)
    /// Chunks the caller is done with, let go by the thread before it makes the next one
    /// (``recycle(_:)``).
    private let spent = Locked<[Chunk]>([])

    /// Starts the thread and has it make the first chunk. `stackSize`: the thread's stack (a
    /// parser that recurses per nesting level needs more than the default).
    init<State>(
        stackSize: Int = 1 << 20, start: @escaping @Sendable () throws -> State,
        produce: @escaping @Sendable (inout State) throws -> Chunk?
    ) {
        job.withLock { $0 = { self.work(start: start, produce: produce) } }
        let thread = Thread { [self] in
            runJob()
            // After the job returned: its state and everything `start` and `produce` hold (an
            // iterator or a snapshot keeping the database in use, say) are gone before `close`
            // returns.
            finished.signal()
        }
        thread.stackSize = stackSize
        thread.start()
        wanted.signal()
    }

    /// Takes the job out and runs it: once it returns, nothing holds it.
    private func runJob() {
        let taken = job.withLock { job in
            defer { job = nil }
            return job
        }
        taken?()
    }

    private func work<State>(start: () throws -> State, produce: (inout State) throws -> Chunk?) {
        var state: State
        do {
            state = try start()
        } catch {
            ready.withLock { $0 = .failure(Self.satchelError(error)) }
            filled.signal()
            return
        }
        while true {
            wanted.wait()
            if stopping.load(ordering: .acquiring) { return }
            // Freed here, where it was allocated: see `recycle`.
            _ = spent.withLock { spent in
                defer { spent = [] }
                return spent
            }
            let result: Result<Chunk?, SatchelError>
            do {
                result = .success(try produce(&state))
            } catch {
                result = .failure(Self.satchelError(error))
            }
            let more = (try? result.get()) != nil
            // Handed over, not kept: the caller holds the chunk's last reference.
            var handed: Result<Chunk?, SatchelError>? = consume result
            ready.withLock { swap(&$0, &handed) }
            filled.signal()
            if !more { return }
        }
    }

    /// The next chunk (nil after the last one), waiting for it to be made; asks for the one
    /// after it at once.
    func next() throws(SatchelError) -> Chunk? {
        if ended.load(ordering: .relaxed) { return nil }
        filled.wait()
        let result = ready.withLock { ready in
            defer { ready = nil }
            return ready
        }
        switch result {
        case .success(let chunk?):
            wanted.signal()
            return chunk
        case .failure(let error):
            ended.store(true, ordering: .relaxed)
            throw error
        case .success(nil), nil:
            ended.store(true, ordering: .relaxed)
            return nil
        }
    }

    /// Hands back a chunk the caller is done with: the thread frees it before it makes its next
    /// chunk (one handed back after the thread made its last is freed with this reader). A chunk
    /// of many small allocations (parsed objects) is then freed by the thread that allocated
    /// them; freed on the caller's thread instead, each allocation goes back to the reading
    /// thread's malloc arena under the arena's lock, which the reading thread takes as it
    /// allocates the next chunk — on a virtual machine, thousands of futex waits an import
    /// (3,700–7,000 for 100,000 objects).
    func recycle(_ chunk: consuming Chunk) {
        let chunk = chunk
        spent.withLock { $0.append(chunk) }
    }

    /// Stops the thread and waits for it to end. Once; later calls return at once.
    func close() {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        stopping.store(true, ordering: .releasing)
        wanted.signal()
        finished.wait()
    }

    private static func satchelError(_ error: any Error) -> SatchelError {
        error as? SatchelError ?? SatchelError(.io, "reading ahead failed: \(error)")
    }
}
