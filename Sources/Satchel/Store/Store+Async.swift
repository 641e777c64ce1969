import Dispatch

extension Store {
    /// ``read(_:)`` for async callers: the LevelDB work runs on the store's I/O queue, off the
    /// Swift concurrency pool, so a `@MainActor` caller never blocks on disk (the pool has one
    /// thread per core and must not wait on I/O).
    ///
    /// ```swift
    /// let (open, total) = try await store.read { snapshot in
    ///     (try snapshot.count(where: "status" == "open", in: orders), try snapshot.findAll(in: orders).count)
    /// }
    /// ```
    public func read<T: Sendable>(_ body: @escaping @Sendable (Snapshot) throws -> T) async throws -> T {
        try await onIOQueue { store in try store.read(body) }
    }

    /// ``bulkUpdate(durable:_:)`` for async callers: the transaction runs on the store's I/O
    /// queue (one writer at a time, as always), so an async caller never blocks on disk or on
    /// another writer.
    @discardableResult
    public func bulkUpdate<T: Sendable>(durable: Bool? = nil, _ body: @escaping @Sendable (Transaction) throws -> T) async throws -> T {
        try await onIOQueue { store in try store.bulkUpdate(durable: durable, body) }
    }

    /// Runs `body` on the I/O queue and resumes with its result.
    private func onIOQueue<T: Sendable>(_ body: @escaping @Sendable (Store) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Store.ioQueue.async { [self] in continuation.resume(with: Result { try body(self) }) }
        }
    }

    /// Where async reads and writes do their work: a concurrent queue of the stores' own.
    static let ioQueue: DispatchQueue = {
        let queue = DispatchQueue(label: "satchel.store.io", attributes: .concurrent)
        queue.setSpecific(key: ioQueueKey, value: true)
        return queue
    }()

    static let ioQueueKey = DispatchSpecificKey<Bool>()

    /// Whether the caller runs on the stores' I/O queue (for tests of where work runs).
    static var isOnIOQueue: Bool { DispatchQueue.getSpecific(key: ioQueueKey) == true }
}
