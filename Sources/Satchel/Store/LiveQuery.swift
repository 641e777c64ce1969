import Foundation
import Synchronization

/// One write of a commit as live queries see it: the object before and after (nil: none), or a
/// wipe of the model's data.
struct ObjectChange: Sendable {
    var id: String
    var old: JSONObject?
    var new: JSONObject?
    var wiped = false
    /// The id the object had before: a rename (`old` is the object under that id).
    var renamedFrom: String?

    /// The object's id before the write.
    var oldID: String { renamedFrom ?? id }
}

/// How an observed query's results changed from one emission to the next, in the shape list
/// views take (Realm's `RealmCollectionChange`, a diffable data source's snapshot steps):
/// remove `deletions` (positions in the previous results), insert `insertions` (positions in
/// the new ones), apply `moves`, and reload `modifications` (positions in the new results of
/// objects that stayed, changed).
public struct ResultsChange: Sendable, Hashable {
    /// An object that stayed and changed place: from its position in the previous results to
    /// its position in the new ones.
    public struct Move: Sendable, Hashable {
        public var from: Int
        public var to: Int

        public init(from: Int, to: Int) {
            self.from = from
            self.to = to
        }
    }

    /// An object that stayed under a new id (a create the server acknowledged under its own
    /// id): its position in the new results, the id it had and the id it has. Its row stays
    /// (it is also among ``modifications``, to be reloaded), unless its new id moved it.
    public struct Rename: Sendable, Hashable {
        public var position: Int
        public var from: String
        public var to: String

        public init(position: Int, from: String, to: String) {
            self.position = position
            self.from = from
            self.to = to
        }
    }

    public var deletions: [Int]
    public var insertions: [Int]
    public var moves: [Move]
    public var modifications: [Int]
    public var renames: [Rename]

    public init(deletions: [Int] = [], insertions: [Int] = [], moves: [Move] = [], modifications: [Int] = [], renames: [Rename] = []) {
        self.deletions = deletions
        self.insertions = insertions
        self.moves = moves
        self.modifications = modifications
        self.renames = renames
    }

    /// The change from `old` to `new` (objects by id), where objects of `old` may have been
    /// renamed (`renames`, in the order they happened).
    init(from old: [Object], to new: [Object], renames: [(from: String, to: String)] = []) {
        // Ids by their bytes, as the store tells objects apart (not by canonical equivalence).
        var renamedTo: [NameKey: String] = [:]
        for (from, to) in renames {
            for (origin, current) in renamedTo where NameKey(current) == NameKey(from) { renamedTo[origin] = to }
            if renamedTo[NameKey(from)] == nil { renamedTo[NameKey(from)] = to }
        }
        let oldIDs = old.map { renamedTo[NameKey($0.id)].map(NameKey.init) ?? NameKey($0.id) }
        let difference = new.map { NameKey($0.id) }.difference(from: oldIDs).inferringMoves()
        var deletions: [Int] = []
        var insertions: [Int] = []
        var moves: [Move] = []
        for change in difference {
            switch change {
            case .remove(let offset, _, let associated): if associated == nil { deletions.append(offset) }
            case .insert(let offset, _, let associated):
                if let from = associated { moves.append(Move(from: from, to: offset)) } else { insertions.append(offset) }
            }
        }
        let before = Dictionary(zip(oldIDs, old.map { ($0.id, $0.attributes) }), uniquingKeysWith: { a, _ in a })
        var modifications: [Int] = []
        var renamed: [Rename] = []
        for (i, object) in new.enumerated() {
            guard let (id, attributes) = before[NameKey(object.id)] else { continue }
            let isRenamed = NameKey(id) != NameKey(object.id)
            if isRenamed { renamed.append(Rename(position: i, from: id, to: object.id)) }
            if isRenamed || attributes != object.attributes { modifications.append(i) }
        }
        self.init(
            deletions: deletions.sorted(), insertions: insertions.sorted(), moves: moves.sorted { $0.to < $1.to }, modifications: modifications,
            renames: renamed)
    }
}

/// An observed query's results, and how they changed since the previous emission (nil for the
/// first).
public struct LiveResults: Sendable {
    public var objects: [Object]
    public var change: ResultsChange?
}

/// The results of a query, live: ``Model/observeChanges(_:)`` and ``Model/observe(_:)``.
///
/// Each iterator subscribes to the model's commits. A commit's writes are checked against the
/// query's condition as they are published (a write whose object matches neither before nor
/// after wakes nothing); the iterator then updates its results from the writes — an object
/// entering, leaving or moving inside the ordered (and limited) window — and runs the query again
/// only where that is not exact (a full window losing a member it cannot refill, a projection,
/// an offset, a wipe). It yields only when the results differ, with the change.
public struct LiveQuerySequence: AsyncSequence, Sendable {
    public typealias Element = LiveResults
    let model: Model
    let query: Query
    /// Observing one object by its id (``Model/observe(_:)-(String)``): the query follows the
    /// object when it is renamed.
    var followsRenames = false

    public func makeAsyncIterator() -> Iterator { Iterator(LiveQueryState(model: model, query: query, followsRenames: followsRenames)) }

    public struct Iterator: AsyncIteratorProtocol, Sendable {
        let state: LiveQueryState
        init(_ state: LiveQueryState) { self.state = state }

        public mutating func next() async throws -> LiveResults? { try await state.next() }
    }
}

/// The state of one live query iterator: its subscription, the writes published to it since it
/// last ran, and the results it last yielded.
final class LiveQueryState: Sendable {
    private let model: Model
    /// The query; for an observed id, its condition follows the object's renames (`followed`).
    private let query: Query
    /// The object observed by id (nil: a query): its id, changed by a rename, and the
    /// subscription, found by that id.
    private final class Followed: Sendable {
        let id: Locked<String>
        let subscription = Locked<UUID?>(nil)
        init(_ id: String) { self.id = Locked(id) }
    }
    private let followed: Followed?
    private let sorter: Sorter
    private let incremental: Bool
    private struct Pending {
        var changes: [ObjectChange] = []
        var rerun = false
        /// Renames of matching objects (kept on a rerun too: the change reports them).
        var renames: [(from: String, to: String)] = []
    }
    /// The writes published since the iterator last ran, filled on the committing threads.
    private final class Inbox: Sendable {
        let pending = Locked(Pending())
    }
    private let inbox = Inbox()
    private let ticks: AsyncStream<Void>
    private let tick: AsyncStream<Void>.Continuation
    private let subscription: UUID?
    /// The results last yielded, their sort keys, each member's keys by id, and whether they
    /// hold every match (no limit cut them); touched only by the iterator's `next()`.
    private struct Window {
        var started = false
        var objects: [Object] = []
        var keys: [[[UInt8]]] = []
        var members: [NameKey: [[UInt8]]] = [:]
        var complete = true
    }
    private let window = Locked(Window())

    init(model: Model, query given: Query, followsRenames: Bool = false) {
        self.model = model
        // Unordered results are observed in id order: a window that the writes keep up.
        var query = given
        if query.order.isEmpty { query.order = [SortKey(.id)] }
        self.query = query
        sorter = Sorter(order: query.order)
        incremental = query.offset == 0 && query.projection == nil
        (ticks, tick) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let equality = Self.equality(in: query.condition)
        let followed: Followed? =
            if followsRenames, let (field, value) = equality, field.isID, let id = value.stringValue { Followed(id) } else { nil }
        self.followed = followed
        let condition = query.condition
        let name = model.name
        let observers = model.store.changeObservers
        subscription = observers.add(
            model: name, deliver: { _ in },
            objects: { [inbox, tick] changes in
                // The object observed by id: a rename from its id moves the observation along.
                let condition =
                    followed.map { followed in
                        followed.id.withLock { id -> Condition in
                            for change in changes where change.renamedFrom.map({ NameKey($0) == NameKey(id) }) == true {
                                id = change.id
                                if let subscription = followed.subscription.withLock({ $0 }) {
                                    observers.rekey(subscription, equality: (Field.id, .string(id)))
                                }
                            }
                            return Field.id == .string(id)
                        }
                    } ?? condition
                // Only writes whose object matches before or after can change the results.
                func relevant(_ change: ObjectChange) -> Bool {
                    if change.wiped { return true }
                    if let new = change.new, condition.matches(Object(id: change.id, attributes: new)) { return true }
                    if let old = change.old, condition.matches(Object(id: change.oldID, attributes: old)) { return true }
                    return false
                }
                guard changes.contains(where: relevant) else { return }
                let relevant = changes.count == 1 ? changes : changes.filter(relevant)
                inbox.pending.withLock { pending in
                    for change in relevant { if let from = change.renamedFrom { pending.renames.append((from, change.id)) } }
                    if relevant.contains(where: \.wiped) || pending.changes.count + relevant.count > 10_000 {
                        pending.rerun = true
                        pending.changes = []
                    } else if !pending.rerun {
                        pending.changes += relevant
                    }
                }
                tick.yield()
            },
            equality: equality, finish: { [tick] in tick.finish() })
        followed?.subscription.withLock { $0 = subscription }
    }

    /// The query now: for an observed id, on the id the object has now.
    private var current: Query {
        guard let followed else { return query }
        var current = query
        current.condition = Field.id == .string(followed.id.withLock { $0 })
        return current
    }

    /// An equality `condition` requires (itself, or one of the conditions it ands) on a path
    /// without `[]`: only objects with that value can match.
    static func equality(in condition: Condition) -> (field: Field, value: JSONValue)? {
        func equality(_ node: Condition.Node) -> (Field, JSONValue)? {
            if case .compare(let field, .equal, let value) = node, !field.reachesIntoArrays { return (field, value) }
            return nil
        }
        if let found = equality(condition.node) { return found }
        if case .and(let nodes) = condition.node { return nodes.lazy.compactMap(equality).first }
        return nil
    }

    deinit {
        if let subscription { model.store.changeObservers.remove(subscription) }
        tick.finish()
    }

    func next() async throws -> LiveResults? {
        guard subscription != nil else { throw SatchelError(.closed, "the store is closed", model: model.name) }
        if !window.withLock({ $0.started }) {
            // The first results: read after subscribing, so no commit in between is missed.
            let objects = try read()
            return window.withLock { window in
                window.started = true
                set(&window, objects)
                return LiveResults(objects: objects, change: nil)
            }
        }
        for await _ in ticks {
            if Task.isCancelled { return nil }
            let (changes, rerun, renames) = inbox.pending.withLock { pending in
                defer { pending = Pending() }
                return (pending.changes, pending.rerun, pending.renames)
            }
            let previous = window.withLock { $0.objects }
            let updated: [Object]
            if !rerun && incremental, let objects = window.withLock({ window in apply(changes, to: &window) ? window.objects : nil }) {
                updated = objects
            } else {
                updated = try read()
                window.withLock { set(&$0, updated) }
            }
            if updated == previous { continue }  // Object's equality: ids by their bytes, and attributes
            return LiveResults(objects: updated, change: ResultsChange(from: previous, to: updated, renames: renames))
        }
        return nil
    }

    /// The query's results now (nil: the store is closing).
    private func read() throws -> [Object] {
        let query = current
        guard let objects = try model.store.changeObservers.whileOpen({ try model.findAll(query) }) else {
            throw SatchelError(.closed, "the store is closed", model: model.name)
        }
        return objects
    }

    private func set(_ window: inout Window, _ objects: [Object]) {
        window.objects = objects
        window.keys = objects.map(sorter.keys)
        window.members = Dictionary(zip(objects.map { NameKey($0.id) }, window.keys), uniquingKeysWith: { a, _ in a })
        window.complete = query.limit.map { objects.count < $0 } ?? true
    }

    /// Applies `changes` (in commit order) to the window; false where that is not exact and the
    /// query must run again.
    private func apply(_ changes: [ObjectChange], to window: inout Window) -> Bool {
        let condition = current.condition
        for change in changes {
            let now = change.new.map { Object(id: change.id, attributes: $0) }
            let matches = now.map { condition.matches($0) } ?? false
            if let keys = window.members[NameKey(change.oldID)] {
                let at = position(of: keys, change.oldID, in: window)
                window.objects.remove(at: at)
                window.keys.remove(at: at)
                window.members[NameKey(change.oldID)] = nil
                guard let now, matches else {
                    if !window.complete { return false }  // a full window lost a member it cannot refill
                    continue
                }
                let newKeys = sorter.keys(now)
                let to = position(of: newKeys, change.id, in: window)
                // Past the last member of a cut window: an object outside may come before it.
                if !window.complete && to == window.objects.count { return false }
                insert(now, newKeys, at: to, into: &window)
            } else if let now, matches {
                let newKeys = sorter.keys(now)
                let to = position(of: newKeys, change.id, in: window)
                if let limit = query.limit, window.objects.count >= limit {
                    if to >= window.objects.count { continue }  // after the window: no effect
                    insert(now, newKeys, at: to, into: &window)
                    let last = window.objects.removeLast()
                    window.keys.removeLast()
                    window.members[NameKey(last.id)] = nil
                    window.complete = false
                } else {
                    insert(now, newKeys, at: to, into: &window)
                }
            }
        }
        return true
    }

    private func insert(_ object: Object, _ keys: [[UInt8]], at index: Int, into window: inout Window) {
        window.objects.insert(object, at: index)
        window.keys.insert(keys, at: index)
        window.members[NameKey(object.id)] = keys
    }

    /// Where an object with sort keys `keys` and id `id` is, or goes, in the window's order.
    private func position(of keys: [[UInt8]], _ id: String, in window: Window) -> Int {
        var (low, high) = (0, window.objects.count)
        while low < high {
            let middle = (low + high) / 2
            if sorter.less(window.keys[middle], window.objects[middle].id, keys, id) { low = middle + 1 } else { high = middle }
        }
        return low
    }
}

extension Model {
    /// The results of `query` now, and again, with how they changed, after each commit that
    /// changes them — a live query whose changes a list view applies as they are
    /// (``ResultsChange``). Commits whose writes cannot change the results run nothing; the
    /// results follow from the previous ones and the writes where that is exact; a slow consumer
    /// gets one change covering every commit it missed. Unordered queries are observed in id
    /// order. The sequence ends when its task is cancelled or the store closes; it throws
    /// `.closed` when the store was closed before it started, and the error of a query that
    /// cannot run.
    ///
    /// ```swift
    /// for try await update in products.observeChanges(Query(where: "price" < 10).order(by: "price").limit(50)) {
    ///     if let change = update.change { table.apply(change) } else { table.reload(update.objects) }
    /// }
    /// ```
    public func observeChanges(_ query: Query = Query()) -> LiveQuerySequence { LiveQuerySequence(model: self, query: query) }
}
