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
    /// Objects given a new id (old id → new id): a create acknowledged under the server's id.
    /// A rename is neither a create nor a delete: the object is the same, and neither id is
    /// listed in ``created`` or ``deleted`` for it.
    public var renamed: [String: String] = [:]
    public var origin: Origin
    /// The model's synced data was wiped whole (a reset, another user's login): no id lists.
    public var wiped = false

    /// Whether it lists no id and wipes nothing.
    public var isEmpty: Bool { created.isEmpty && updated.isEmpty && deleted.isEmpty && renamed.isEmpty && !wiped }

    public init(
        model: String, created: [String] = [], updated: [String] = [], deleted: [String] = [], renamed: [String: String] = [:], origin: Origin,
        wiped: Bool = false
    ) {
        self.model = model
        self.created = created
        self.updated = updated
        self.deleted = deleted
        self.renamed = renamed
        self.origin = origin
        self.wiped = wiped
    }
}

/// The store's subscribers to committed change sets. A commit with no subscriber costs a lock
/// and an empty check; one that touches no observed model wakes no model observer; a live query
/// whose condition requires `field == value` is handed only the commits that write an object
/// holding that value before or after (looked up, not asked one by one).
final class ChangeObservers: Sendable {
    private struct Subscriber {
        var id: UUID
        /// Only these models' change sets (nil: all).
        var model: String?
        var deliver: @Sendable ([ChangeSet]) -> Void
        /// The objects the commit changed in `model`, before and after (a live query's).
        var deliverObjects: (@Sendable ([ObjectChange]) -> Void)?
        /// For a live query: an equality its condition requires.
        var equality: (field: Field, value: JSONValue)?
        var finish: @Sendable () -> Void
    }

    /// The live queries of one model: those with an equality, by its field and value, and the
    /// others.
    private struct LiveIndex {
        var keyed: [Field: [JSONValue: [Subscriber]]] = [:]
        var unkeyed: [Subscriber] = []
    }

    /// What each commit reads, rebuilt when a subscriber comes or goes: the change-set
    /// subscribers, and the live queries by model.
    private struct Current {
        var sets: [Subscriber] = []
        var live: [String: LiveIndex] = [:]

        init(_ subscribers: some Collection<Subscriber>) {
            for subscriber in subscribers {
                guard let model = subscriber.model, subscriber.deliverObjects != nil else {
                    sets.append(subscriber)
                    continue
                }
                if let (field, value) = subscriber.equality {
                    live[model, default: LiveIndex()].keyed[field, default: [:]][value, default: []].append(subscriber)
                } else {
                    live[model, default: LiveIndex()].unkeyed.append(subscriber)
                }
            }
        }
    }

    private let subscribers = Locked<[UUID: Subscriber]>([:])
    private let current = Locked<Current>(Current([]))
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

    /// Registers a subscriber; nil when the store is closed. A live query gives `objects` (and
    /// the equality its condition requires, if any).
    func add(
        model: String?, deliver: @escaping @Sendable ([ChangeSet]) -> Void, objects: (@Sendable ([ObjectChange]) -> Void)? = nil,
        equality: (field: Field, value: JSONValue)? = nil, finish: @escaping @Sendable () -> Void
    ) -> UUID? {
        let id = UUID()
        let added = subscribers.withLock { subscribers -> Bool in
            if closed.load(ordering: .acquiring) { return false }
            subscribers[id] = Subscriber(id: id, model: model, deliver: deliver, deliverObjects: objects, equality: equality, finish: finish)
            current.withLock { $0 = Current(subscribers.values) }
            return true
        }
        return added ? id : nil
    }

    /// Changes the equality a live query is found by (an observed object renamed).
    func rekey(_ id: UUID, equality: (field: Field, value: JSONValue)) {
        subscribers.withLock { subscribers in
            guard subscribers[id] != nil else { return }
            subscribers[id]?.equality = equality
            current.withLock { $0 = Current(subscribers.values) }
        }
    }

    func remove(_ id: UUID) {
        subscribers.withLock { subscribers in
            subscribers.removeValue(forKey: id)
            current.withLock { $0 = Current(subscribers.values) }
        }
    }

    /// Hands the change sets of a commit to the subscribers they concern, and each model's
    /// written objects to its live queries.
    func publish(_ sets: [ChangeSet], objects: [String: [ObjectChange]] = [:]) {
        guard !sets.isEmpty else { return }
        let targets = current.withLock { $0 }
        for subscriber in targets.sets {
            if let model = subscriber.model {
                let mine = sets.filter { $0.model == model }
                if !mine.isEmpty { subscriber.deliver(mine) }
            } else {
                subscriber.deliver(sets)
            }
        }
        for (model, changes) in objects {
            guard let index = targets.live[model] else { continue }
            for subscriber in index.unkeyed { subscriber.deliverObjects?(changes) }
            guard !index.keyed.isEmpty else { continue }
            if changes.contains(where: \.wiped) {
                for subscriber in index.keyed.values.flatMap({ $0.values.joined() }) { subscriber.deliverObjects?(changes) }
                continue
            }
            var chosen: [UUID: Subscriber] = [:]
            for change in changes {
                for (field, byValue) in index.keyed {
                    for (id, attributes) in [(change.oldID, change.old), (change.id, change.new)] {
                        let value = field.isID ? (attributes == nil ? nil : .string(id)) : attributes.flatMap(field.value(in:))
                        guard let value, let concerned = byValue[value] else { continue }
                        for subscriber in concerned { chosen[subscriber.id] = subscriber }
                    }
                }
            }
            for subscriber in chosen.values { subscriber.deliverObjects?(changes) }
        }
    }

    /// Ends every subscription (the store closed).
    func finishAll() {
        reads.withLock { $0 = false }  // waits for a read under way
        closed.store(true, ordering: .releasing)
        let all = subscribers.withLock { subscribers in
            defer {
                subscribers.removeAll()
                current.withLock { $0 = Current([]) }
            }
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
    /// coalesced as ``observe(_:)`` is. When the object is renamed (a create the server
    /// acknowledged under its own id), the observation follows it: the next value is the object
    /// under its new id, never a nil.
    public func observe(_ id: String) -> AsyncThrowingStream<Object?, any Error> {
        relaying(observingID(id)) { $0.objects.first }
    }

    /// The live query of object `id`, following its renames.
    func observingID(_ id: String) -> LiveQuerySequence {
        LiveQuerySequence(model: self, query: Query(where: Field.id == .string(id)), followsRenames: true)
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
