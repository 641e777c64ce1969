/// The results of a query, read lazily from one consistent snapshot of the store.
///
/// ```swift
/// let cursor = try products.cursor(Query(where: "brand" == "Acme").order(by: "price"))
/// while let product = try cursor.next() { print(product) }
/// ```
///
/// A cursor holds a LevelDB snapshot and iterator: the store cannot close while one is alive.
/// It is not `Sendable`; read it on one thread.
public final class DocumentCursor {
    private let model: Model
    private let query: Query
    private let plan: Plan
    private let db: LevelDB
    /// Pinned only when the plan reads objects by id (id lookups, keys-only indexes), so those
    /// reads see the state the iterator does; an iterator alone reads an implicit snapshot.
    private let snapshot: LevelDBSnapshot?
    private var state: SourceState
    private var remainingOffset: Int
    private var remainingLimit: Int?
    private var sorted: [Document]?
    private var sortedPosition = 0
    /// Length of `(idx, model, indexId)`, where an index entry's values start.
    private var entryPrefixLength = 0
    /// Whether the index's entries hold their documents (no read of the object needed).
    private var entriesHoldDocuments = false
    /// Candidates read from the source (documents fetched or decoded), for tests and tuning.
    private(set) var candidatesRead = 0
    /// The most documents an in-memory sort held at once.
    private(set) var peakBuffered = 0

    private enum SourceState {
        case ids([String], position: Int)
        case documents(LevelDBIterator, KeyRange, reverse: Bool, started: Bool)
        case index(LevelDBIterator, ranges: [KeyRange], rangeIndex: Int, started: Bool, valueCount: Int, reverse: Bool)
        case done
    }

    init(model: Model, query: Query, plan: Plan) throws {
        try query.validate()
        self.model = model
        self.query = query
        self.plan = plan
        let partition = try model.definition.partition
        db = model.store.database(partition)
        remainingOffset = query.offset
        remainingLimit = query.limit
        switch plan.source {
        case .ids(let ids):
            snapshot = try db.makeSnapshot()
            state = .ids(ids, position: 0)
        case .documents(let range, let reverse):
            snapshot = nil
            // A scan of the whole model does not fill the block cache (data read once).
            let whole = query.limit == nil && UTF8Order.compareBytes(range.start, model.documentPrefix) == 0
            state = .documents(try db.makeIterator(fillCache: !whole), range, reverse: reverse, started: false)
        case .index(let index, let ranges, let valueCount, let reverse):
            snapshot = index.storesDocuments ? nil : try db.makeSnapshot()
            entryPrefixLength = index.prefix.count
            entriesHoldDocuments = index.storesDocuments
            let ranges = reverse ? ranges.reversed() : ranges
            state = .index(try db.makeIterator(snapshot: snapshot), ranges: ranges, rangeIndex: 0, started: false, valueCount: valueCount, reverse: reverse)
        }
    }

    /// How the query runs.
    public var queryPlan: QueryPlan { plan.explain() }

    /// The next document, or nil after the last.
    public func next() throws -> Document? {
        if plan.sortInMemory {
            if sorted == nil { sorted = try sortAll() }
            guard let sorted, sortedPosition < sorted.count else { return nil }
            defer { sortedPosition += 1 }
            return query.project(sorted[sortedPosition])
        }
        while remainingLimit != 0 {
            guard let document = try nextMatch() else { return nil }
            if remainingOffset > 0 {
                remainingOffset -= 1
                continue
            }
            if let limit = remainingLimit { remainingLimit = limit - 1 }
            return query.project(document)
        }
        return nil
    }

    /// Every remaining document.
    public func all() throws -> [Document] {
        var result: [Document] = []
        while let document = try next() { result.append(document) }
        return result
    }

    /// The number of matches, ignoring limit and offset, without decoding documents when the
    /// plan's ranges answer the condition exactly.
    func countMatches() throws -> Int {
        var n = 0
        if case .always = plan.residual {
            switch state {
            case .documents, .index:
                while try advance() { n += 1 }
                return n
            default: break
            }
        }
        while try nextMatch() != nil { n += 1 }
        return n
    }

    // MARK: - Sources

    /// The next candidate that satisfies the residual condition.
    private func nextMatch() throws -> Document? {
        while let document = try nextCandidate() {
            candidatesRead += 1
            if Condition.evaluate(plan.residual, document) { return document }
        }
        return nil
    }

    private func fetch(_ id: String) throws -> Document? {
        let key = Keys.document(prefix: model.documentPrefix, id)
        let name = model.name
        return try db.withValue(forKey: key, snapshot: snapshot) { bytes in
            try bytes.map { Document(id: id, storedAttributes: try StoredDocument.decode($0, model: name, id: id)) }
        }
    }

    private func nextCandidate() throws -> Document? {
        switch state {
        case .done: return nil
        case .ids(let ids, let position):
            var position = position
            while position < ids.count {
                let id = ids[position]
                position += 1
                state = .ids(ids, position: position)
                if let document = try fetch(id) { return document }
            }
            state = .done
            return nil
        case .documents(let iterator, _, _, _):
            guard try advance() else { return nil }
            let prefixLength = model.documentPrefix.count
            let name = model.name
            return try iterator.withKey { key in
                let id = try Keys.objectID(fromKey: key, prefixLength: prefixLength)
                return Document(id: id, storedAttributes: try iterator.withValue { try StoredDocument.decode($0, model: name, id: id) })
            }
        case .index(let iterator, _, _, _, let valueCount, _):
            while try advance() {
                let prefixLength = entryPrefixLength
                let id = try iterator.withKey { key in
                    try Keys.objectID(fromIndexEntry: key, prefixLength: prefixLength, valueCount: valueCount)
                }
                if entriesHoldDocuments {
                    let name = model.name
                    return Document(id: id, storedAttributes: try iterator.withValue { try StoredDocument.decode($0, model: name, id: id) })
                }
                guard let document = try fetch(id) else {
                    throw SatchelError(.corruption, "index entry for '\(id)' of model '\(model.name)' has no object", model: model.name, objectID: id)
                }
                return document
            }
            return nil
        }
    }

    /// Positions the range iterator on the next key inside the current range; false when done.
    private func advance() throws -> Bool {
        switch state {
        case .documents(let iterator, let range, let reverse, let started):
            if !started {
                position(iterator, in: range, reverse: reverse)
                state = .documents(iterator, range, reverse: reverse, started: true)
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
    private func sortAll() throws -> [Document] {
        let keep = query.limit.map { $0 + query.offset }
        var buffer: [(keys: [[UInt8]], document: Document)] = []
        let sorter = Sorter(order: query.order)
        while let document = try nextMatch() {
            buffer.append((sorter.keys(document), document))
            peakBuffered = max(peakBuffered, buffer.count)
            if let keep, buffer.count >= max(2 * keep, 1024) {
                buffer.sort { sorter.less($0.keys, $0.document.id, $1.keys, $1.document.id) }
                buffer.removeLast(buffer.count - keep)
            }
        }
        buffer.sort { sorter.less($0.keys, $0.document.id, $1.keys, $1.document.id) }
        var result = buffer.dropFirst(query.offset).map(\.document)
        if let limit = query.limit, result.count > limit { result.removeLast(result.count - limit) }
        return result
    }
}

@available(*, unavailable)
extension DocumentCursor: Sendable {}

/// Orders documents by a query's sort keys, ties by id.
struct Sorter {
    let order: [SortKey]
    let tieDescending: Bool

    init(order: [SortKey]) {
        self.order = order
        self.tieDescending = order.last?.descending ?? false
    }

    func keys(_ document: Document) -> [[UInt8]] {
        order.map { ValueOrder.sortKey($0.field.value(in: document)) }
    }

    func less(_ a: [[UInt8]], _ aID: String, _ b: [[UInt8]], _ bID: String) -> Bool {
        for (i, key) in order.enumerated() {
            let c = UTF8Order.compareBytes(a[i], b[i])
            if c != 0 { return key.descending ? c > 0 : c < 0 }
        }
        let c = UTF8Order.compare(aID, bID)
        return tieDescending ? c > 0 : c < 0
    }

    func sort(_ documents: [Document]) -> [Document] {
        documents.map { (keys($0), $0) }.sorted { less($0.0, $0.1.id, $1.0, $1.1.id) }.map(\.1)
    }
}
