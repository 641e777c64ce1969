/// The results of a query, read lazily from one consistent snapshot of the store.
///
/// ```swift
/// let cursor = try products.cursor(Query(where: "brand" == "Acme").order(by: "price"))
/// while let product = try cursor.next() { print(product) }
/// ```
///
/// A cursor holds a LevelDB snapshot and iterator: the store cannot close while one is alive.
/// It is not `Sendable`; read it on one thread.
public final class ObjectCursor {
    private let model: Model
    private let query: Query
    /// The query's projection, built once.
    private let projection: ProjectionTree?
    private let plan: Plan
    private let db: LevelDB
    /// Pinned only when the plan reads objects by id (id lookups, keys-only indexes), so those
    /// reads see the state the iterator does; an iterator alone reads an implicit snapshot.
    private let snapshot: LevelDBSnapshot?
    private var state: SourceState
    private var remainingOffset: Int
    private var remainingLimit: Int?
    private var sorted: [Object]?
    private var sortedPosition = 0
    /// Length of `(idx, model, indexId)`, where an index entry's values start.
    private var entryPrefixLength = 0
    /// Whether the index's entries hold their objects (no read of the object needed).
    private var entriesHoldObjects = false
    /// The ids an index read for several values has delivered (nil when each object has one
    /// entry in the ranges read).
    private var delivered: Set<NameKey>?
    /// Candidates read from the source (objects fetched or decoded), for tests and tuning.
    private(set) var candidatesRead = 0
    /// The most objects an in-memory sort held at once.
    private(set) var peakBuffered = 0
    /// The condition's deep paths, checked on each object read for arrays on the way (see
    /// ``Condition/deepDottedFields(_:)``).
    private let dottedFields: [Field]

    private enum SourceState {
        case ids([String], position: Int)
        case objects(LevelDBIterator, KeyRange, reverse: Bool, started: Bool)
        /// A whole large model in id order, read ahead on a second thread (``Model/forEach(_:)``
        /// reads so): the chunk at hand and the next entry in it.
        case objectsAhead(ReadAhead<LevelDBEntries>, LevelDBEntries, position: Int)
        case index(LevelDBIterator, ranges: [KeyRange], rangeIndex: Int, started: Bool, valueCount: Int, reverse: Bool)
        case done
    }

    /// A cursor reading `plan` in `partition`; on `snapshot` when given (a ``Snapshot``'s), else
    /// on a view of its own.
    init(model: Model, query: Query, plan: Plan, partition: Partition, snapshot given: LevelDBSnapshot? = nil) throws {
        try query.validate()
        self.model = model
        self.query = query
        projection = query.projection.map(ProjectionTree.init)
        self.plan = plan
        dottedFields = Condition.deepDottedFields(query.condition.node)
        db = try model.store.database(partition)
        remainingOffset = query.offset
        remainingLimit = query.limit
        switch plan.source {
        case .ids(let ids):
            snapshot = try given ?? db.makeSnapshot()
            state = .ids(ids, position: 0)
        case .objects(let range, let reverse):
            snapshot = given
            // A scan of the whole model does not fill the block cache (data read once); a large
            // one, read forward, is read ahead on a second thread.
            let whole = query.limit == nil && UTF8Order.compareBytes(range.start, model.objectPrefix) == 0
            let large = whole && !reverse ? try model.store.entry(model.name).statistics.objects >= Model.readAheadObjects : false
            if large {
                let reader = db.readAhead(from: range.start, before: range.end, snapshot: try given ?? db.makeSnapshot())
                state = .objectsAhead(reader, LevelDBEntries(capacity: 0), position: 0)
            } else {
                state = .objects(try db.makeIterator(snapshot: given, fillCache: !whole), range, reverse: reverse, started: false)
            }
        case .index(let index, let ranges, let valueCount, let reverse, let distinct):
            if distinct { delivered = [] }
            snapshot = try given ?? (index.storesObjects ? nil : db.makeSnapshot())
            entryPrefixLength = index.prefix.count
            entriesHoldObjects = index.storesObjects
            let ranges = reverse ? ranges.reversed() : ranges
            state = .index(
                try db.makeIterator(snapshot: snapshot), ranges: ranges, rangeIndex: 0, started: false, valueCount: valueCount, reverse: reverse)
        }
    }

    deinit {
        // The read-ahead thread stops with the cursor, however far it was read.
        if case .objectsAhead(let reader, _, _) = state { reader.close() }
    }

    /// How the query runs.
    public var queryPlan: QueryPlan { plan.explain() }

    /// `object` reduced to the query's projection.
    private func project(_ object: Object) -> Object { projection?.project(object) ?? object }

    /// The next object, or nil after the last.
    public func next() throws -> Object? {
        if plan.sortInMemory {
            if sorted == nil { sorted = try sortAll() }
            guard let sorted, sortedPosition < sorted.count else { return nil }
            defer { sortedPosition += 1 }
            return project(sorted[sortedPosition])
        }
        while remainingLimit != 0 {
            guard let object = try nextMatch() else { return nil }
            if remainingOffset > 0 {
                remainingOffset -= 1
                continue
            }
            if let limit = remainingLimit { remainingLimit = limit - 1 }
            return project(object)
        }
        return nil
    }

    /// Every remaining object.
    public func all() throws -> [Object] {
        var result: [Object] = []
        while let object = try next() { result.append(object) }
        return result
    }

    /// The number of matches, ignoring limit and offset, without decoding objects when the
    /// plan's ranges answer the condition exactly.
    func countMatches() throws -> Int {
        var n = 0
        // Counted without reading the objects, unless a deep dotted path must be checked on them.
        if case .always = plan.residual, dottedFields.isEmpty {
            switch state {
            case .objects, .index:
                while try advance() { n += 1 }
                return n
            case .objectsAhead(let reader, let entries, let position):
                n = entries.count - position
                while let chunk = try reader.next() { n += chunk.count }
                state = .done
                reader.close()
                return n
            default: break
            }
        }
        while try nextMatch() != nil { n += 1 }
        return n
    }

    // MARK: - Sources

    /// The next candidate that satisfies the residual condition.
    private func nextMatch() throws -> Object? {
        while let object = try nextCandidate() {
            candidatesRead += 1
            if !dottedFields.isEmpty { try Condition.refuseArrays(on: dottedFields, in: object, model: model.name) }
            if Condition.evaluate(plan.residual, object) { return object }
        }
        return nil
    }

    private func fetch(_ id: String) throws -> Object? {
        let key = Keys.object(prefix: model.objectPrefix, id)
        let name = model.name
        return try db.withValue(forKey: key, snapshot: snapshot) { bytes in
            try bytes.map { Object(id: id, storedAttributes: try StoredObject.decode($0, model: name, id: id)) }
        }
    }

    private func nextCandidate() throws -> Object? {
        switch state {
        case .done: return nil
        case .ids(let ids, let position):
            var position = position
            while position < ids.count {
                let id = ids[position]
                position += 1
                state = .ids(ids, position: position)
                if let object = try fetch(id) { return object }
            }
            state = .done
            return nil
        case .objectsAhead(let reader, var entries, var position):
            while position == entries.count {
                guard let chunk = try reader.next() else {
                    state = .done
                    reader.close()
                    return nil
                }
                entries = chunk
                position = 0
            }
            let prefixLength = model.objectPrefix.count
            let name = model.name
            let object = try entries.withEntry(at: position) { key, value in
                let id = try Keys.objectID(fromKey: key, prefixLength: prefixLength)
                return Object(id: id, storedAttributes: try StoredObject.decode(value, model: name, id: id))
            }
            state = .objectsAhead(reader, entries, position: position + 1)
            return object
        case .objects(let iterator, _, _, _):
            guard try advance() else { return nil }
            let prefixLength = model.objectPrefix.count
            let name = model.name
            return try iterator.withKey { key in
                let id = try Keys.objectID(fromKey: key, prefixLength: prefixLength)
                return Object(id: id, storedAttributes: try iterator.withValue { try StoredObject.decode($0, model: name, id: id) })
            }
        case .index(let iterator, _, _, _, let valueCount, _):
            while try advance() {
                let prefixLength = entryPrefixLength
                let id = try iterator.withKey { key in
                    try Keys.objectID(fromIndexEntry: key, prefixLength: prefixLength, valueCount: valueCount)
                }
                if entriesHoldObjects {
                    let name = model.name
                    return Object(id: id, storedAttributes: try iterator.withValue { try StoredObject.decode($0, model: name, id: id) })
                }
                guard let object = try fetch(id) else {
                    throw SatchelError(.corruption, "index entry for '\(id)' of model '\(model.name)' has no object", model: model.name, objectID: id)
                }
                return object
            }
            return nil
        }
    }

    /// Positions the range iterator on the next key inside the current range; false when done.
    private func advance() throws -> Bool {
        switch state {
        case .objects(let iterator, let range, let reverse, let started):
            if !started {
                position(iterator, in: range, reverse: reverse)
                state = .objects(iterator, range, reverse: reverse, started: true)
            } else if iterator.isValid {
                reverse ? iterator.previous() : iterator.next()
            }
            if inside(iterator, range) { return true }
            try iterator.checkError()
            state = .done
            return false
        case .index(let iterator, let ranges, var rangeIndex, var started, let valueCount, let reverse):
            while rangeIndex < ranges.count {
                let range = ranges[rangeIndex]
                if !started {
                    position(iterator, in: range, reverse: reverse)
                    started = true
                } else if iterator.isValid {
                    reverse ? iterator.previous() : iterator.next()
                }
                while inside(iterator, range) {
                    if let needle = range.substring {
                        // String values of an array-element index: check the substring on the key.
                        let holds = try iterator.withKey { key -> Bool in
                            var decoder = KeyDecoder(key, from: range.start.count)
                            guard case .string(let s) = try decoder.readValue() else { return false }
                            return ValueOrder.utf8Contains(s, needle)
                        }
                        if !holds {
                            reverse ? iterator.previous() : iterator.next()
                            continue
                        }
                    }
                    state = .index(iterator, ranges: ranges, rangeIndex: rangeIndex, started: true, valueCount: valueCount, reverse: reverse)
                    if delivered != nil {
                        let prefixLength = entryPrefixLength
                        let id = try iterator.withKey { key in
                            try Keys.objectID(fromIndexEntry: key, prefixLength: prefixLength, valueCount: valueCount)
                        }
                        if delivered?.insert(NameKey(id)).inserted == false {
                            reverse ? iterator.previous() : iterator.next()
                            continue
                        }
                    }
                    return true
                }
                try iterator.checkError()
                rangeIndex += 1
                started = false
            }
            state = .done
            return false
        default:
            return false
        }
    }

    private func position(_ iterator: LevelDBIterator, in range: KeyRange, reverse: Bool) {
        if reverse {
            iterator.seek(range.end)
            if iterator.isValid { iterator.previous() } else { iterator.seekToLast() }
        } else {
            iterator.seek(range.start)
        }
    }

    private func inside(_ iterator: LevelDBIterator, _ range: KeyRange) -> Bool {
        guard iterator.isValid else { return false }
        return iterator.withKey { key in
            UTF8Order.compareBytes(key, range.start) >= 0 && UTF8Order.compareBytes(key, range.end) < 0
        }
    }

    // MARK: - Sorting

    /// All matches in the query's order, keeping only the top `offset + limit` as it goes.
    private func sortAll() throws -> [Object] {
        let keep = query.window
        var buffer: [(keys: [[UInt8]], object: Object)] = []
        let sorter = Sorter(order: query.order)
        while let object = try nextMatch() {
            buffer.append((sorter.keys(object), object))
            peakBuffered = max(peakBuffered, buffer.count)
            if let keep, buffer.count >= max(keep > .max / 2 ? .max : 2 * keep, 1024) {
                buffer.sort { sorter.less($0.keys, $0.object.id, $1.keys, $1.object.id) }
                buffer.removeLast(buffer.count - keep)
            }
        }
        buffer.sort { sorter.less($0.keys, $0.object.id, $1.keys, $1.object.id) }
        var result = buffer.dropFirst(query.offset).map(\.object)
        if let limit = query.limit, result.count > limit { result.removeLast(result.count - limit) }
        return result
    }
}

@available(*, unavailable)
extension ObjectCursor: Sendable {}

extension Array where Element == SortKey {
    /// `objects` in this order — the query semantics' total order of values (null and missing
    /// first, then booleans, numbers, strings, arrays, objects), ties by object id, descending
    /// when the last key is — as `find` returns them.
    public func sorted(_ objects: [Object]) -> [Object] { Sorter(order: self).sort(objects) }
}

/// Orders objects by a query's sort keys, ties by id.
struct Sorter {
    let order: [SortKey]
    let tieDescending: Bool

    init(order: [SortKey]) {
        self.order = order
        self.tieDescending = order.last?.descending ?? false
    }

    func keys(_ object: Object) -> [[UInt8]] {
        order.map { ValueOrder.sortKey($0.field.value(in: object)) }
    }

    func less(_ a: [[UInt8]], _ aID: String, _ b: [[UInt8]], _ bID: String) -> Bool {
        for (i, key) in order.enumerated() {
            let c = UTF8Order.compareBytes(a[i], b[i])
            if c != 0 { return key.descending ? c > 0 : c < 0 }
        }
        let c = UTF8Order.compare(aID, bID)
        return tieDescending ? c > 0 : c < 0
    }

    func sort(_ objects: [Object]) -> [Object] {
        objects.map { (keys($0), $0) }.sorted { less($0.0, $0.1.id, $1.0, $1.1.id) }.map(\.1)
    }
}
