import Foundation
import Synchronization

/// What one committed batch did to one model: the ids it created, updated and deleted, and where
/// the writes came from. ``Store/changes`` delivers them.
public struct ChangeSet: Sendable, Hashable {
    /// Where the writes of a change set came from.
    public enum Origin: Sendable, Hashable {
        /// This device: the app's writes (logged for sync when the model syncs).
        case local
        /// The server: writes of the sync engine (pulled pages, push results, rollbacks).
        case server
    }

    public var model: String
    public var created: [String] = []
    public var updated: [String] = []
    public var deleted: [String] = []
    public var origin: Origin
    /// The model's synced data was wiped whole (a reset, another user's login): no id lists.
    public var wiped = false

    /// Whether it lists no id and wipes nothing.
    public var isEmpty: Bool { created.isEmpty && updated.isEmpty && deleted.isEmpty && !wiped }

    public init(model: String, created: [String] = [], updated: [String] = [], deleted: [String] = [], origin: Origin, wiped: Bool = false) {
        self.model = model
        self.created = created
        self.updated = updated
        self.deleted = deleted
        self.origin = origin
        self.wiped = wiped
    }
}

/// The store's subscribers to committed change sets. A commit with no subscriber costs a lock
/// and an empty check; one that touches no observed model wakes no model observer.
final class ChangeObservers: Sendable {
    private struct Subscriber {
        /// Only these models' change sets (nil: all).
        var model: String?
        var deliver: @Sendable ([ChangeSet]) -> Void
        /// The objects the commit changed in `model`, before and after (a live query's).
        var deliverObjects: (@Sendable ([ObjectChange]) -> Void)?
        var finish: @Sendable () -> Void
    }

    private let subscribers = Locked<[UUID: Subscriber]>([:])
    private let closed = Atomic<Bool>(false)
    /// Held by an observer while it reads, and by ``finishAll()``: the store never closes under
    /// an observer's read (LevelDB refuses to close while an iterator lives), and no observer
    /// reads once it is closing. The Bool says whether reads may still start.
    private let reads = Locked<Bool>(true)

    /// Runs an observer's read unless the store is closing (nil then).
    func whileOpen<T>(_ read: () throws -> T) rethrows -> T? {
        try reads.withLock { open in open ? try read() : nil }
    }

    var isEmpty: Bool { subscribers.withLock { $0.isEmpty } }

    /// Registers a subscriber; nil when the store is closed.
    func add(
        model: String?, deliver: @escaping @Sendable ([ChangeSet]) -> Void, objects: (@Sendable ([ObjectChange]) -> Void)? = nil,
        finish: @escaping @Sendable () -> Void
    ) -> UUID? {
        let id = UUID()
        let added = subscribers.withLock { subscribers -> Bool in
            if closed.load(ordering: .acquiring) { return false }
            subscribers[id] = Subscriber(model: model, deliver: deliver, deliverObjects: objects, finish: finish)
            return true
        }
        return added ? id : nil
    }

    func remove(_ id: UUID) { _ = subscribers.withLock { $0.removeValue(forKey: id) } }

    /// Hands the change sets of a commit to the subscribers they concern.
    func publish(_ sets: [ChangeSet], objects: [String: [ObjectChange]] = [:]) {
        guard !sets.isEmpty else { return }
        let targets = subscribers.withLock { Array($0.values) }
        for subscriber in targets {
            if let model = subscriber.model {
                if let deliverObjects = subscriber.deliverObjects {
                    if let changes = objects[model] { deliverObjects(changes) }
                    continue
                }
                let mine = sets.filter { $0.model == model }
                if !mine.isEmpty { subscriber.deliver(mine) }
            } else {
                subscriber.deliver(sets)
            }
        }
    }

    /// Ends every subscription (the store closed).
    func finishAll() {
        reads.withLock { $0 = false }  // waits for a read under way
        closed.store(true, ordering: .releasing)
        let all = subscribers.withLock { subscribers in
            defer { subscribers.removeAll() }
            return Array(subscribers.values)
        }
        for subscriber in all { subscriber.finish() }
    }
}

extension Store {
    /// Every committed change set, as it lands: local writes, transactions, applied sync pages,
    /// push results, rollbacks and wipes — what a UI list diff or a search index needs. Each
    /// access is a new subscription; it ends when its task is cancelled or the store closes.
    /// Change sets arrive in commit order; a slow consumer buffers them.
    public var changes: AsyncStream<ChangeSet> {
        let (stream, continuation) = AsyncStream<ChangeSet>.makeStream()
        let id = changeObservers.add(
            model: nil, deliver: { for set in $0 { continuation.yield(set) } }, finish: { continuation.finish() })
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [observers = changeObservers] _ in observers.remove(id) }
        return stream
    }

    /// A tick after each commit that touches `model`, coalesced: a consumer that falls behind
    /// sees one tick, not a backlog.
    func changeTicks(of model: String) -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = changeObservers.add(model: model, deliver: { _ in continuation.yield() }, finish: { continuation.finish() })
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [observers = changeObservers] _ in observers.remove(id) }
        return stream
    }
}

extension Model {
    /// The results of `query` now, and again after every commit that changes them (local
    /// writes, transactions, applied sync pages, rollbacks, wipes): a live query. Commits that
    /// cannot change the results — to other models, or writing objects the query matches neither
    /// before nor after — wake it not at all, and results equal to the last ones are not yielded
    /// again (``observeChanges(_:)`` says how they changed). Emissions are coalesced: a consumer
    /// that is slow sees the latest results, not a backlog. Unordered queries are observed in id
    /// order. The stream ends when its task is cancelled or the store closes; it fails with the
    /// error of a query that cannot run, and with `.closed` when the store was closed before it
    /// started.
    ///
    /// ```swift
    /// for try await cheap in products.observe(Query(where: "price" < 10).order(by: "price")) {
    ///     show(cheap)
    /// }
    /// ```
    public func observe(_ query: Query = Query()) -> AsyncThrowingStream<[Object], any Error> {
        relaying(observeChanges(query)) { $0.objects }
    }

    /// Object `id` now (nil when missing), and again after every commit that changes it,
    /// coalesced as ``observe(_:)`` is.
    public func observe(_ id: String) -> AsyncThrowingStream<Object?, any Error> {
        relaying(observeChanges(Query(where: Field.id == .string(id)))) { $0.objects.first }
    }

    /// A stream of what `transform` makes of each of `live`'s emissions, coalesced (the newest
    /// kept).
    func relaying<T: Sendable>(_ live: LiveQuerySequence, _ transform: @escaping @Sendable (LiveResults) throws -> T)
        -> AsyncThrowingStream<T, any Error>
    {
        let (stream, continuation) = AsyncThrowingStream<T, any Error>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let task = Task {
            do {
                for try await results in live { continuation.yield(try transform(results)) }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
