/// A `String` compared and hashed by its UTF-8 bytes, for dictionaries keyed by names.
///
/// `[String: T]` would merge two model names that are canonically equivalent but spelled with
/// different scalars; Satchel treats them as two names everywhere.
struct NameKey: Hashable, Sendable {
    let name: String
    init(_ name: String) { self.name = name }
    static func == (a: NameKey, b: NameKey) -> Bool { UTF8Order.equal(a.name, b.name) }
    func hash(into hasher: inout Hasher) { UTF8Order.hash(name, into: &hasher) }
}

/// Per-model statistics, kept in memory and persisted in the batch of every write that changes
/// them, so `count()` and `isChanged` answer without scanning.
struct StoredStatistics: Equatable, Sendable {
    var objects = 0
    var pendingCreates = 0
    var pendingUpdates = 0
    var pendingDeletes = 0
    /// Changes pushed whose outcome is not known yet (`out` records).
    var inFlight = 0
    /// Changes the server refused, kept until resolved (`err` records).
    var errors = 0
    /// Entries per index id.
    var indexEntries: [Int: Int] = [:]
    /// Per text index id: the objects it holds text of, and their words in all (for ranking).
    var textTotals: [Int: TextTotals] = [:]
    /// Per top-level attribute: the objects holding an array there (a query whose dotted path
    /// crosses one is refused, ``Condition/refuseArrayCrossings(_:model:)``).
    var arrays: [NameKey: Int] = [:]
    /// Per path below a first name, through nested objects and into the elements of arrays
    /// (`a.b`, `items[].parts`, written as a ``Field``'s names): the objects holding an array
    /// there, for the same refusal of deeper paths (`a.b.c`, `items[].parts.sku`).
    var nestedArrays: [[NameKey]: Int] = [:]
    /// Whether `arrays` or `nestedArrays` was read from a record that lacked it (an earlier
    /// version's): counted when the store opens.
    var arraysUncounted = false
    /// Whether the stored record may be behind the data: an import under way writes its
    /// batches without the statistics (each batch writing them made every table LevelDB wrote
    /// overlap all the others, and its compactions read them all), and marks the record so
    /// first. The counts in memory stay exact; a commit does not write marked statistics; the
    /// import writes them unmarked when it ends, and an open that finds the mark (the process
    /// died during an import) counts the model again.
    var recountDue = false

    /// Counts `old`'s arrays out and `new`'s in (an object written).
    mutating func adjustArrays(old: JSONObject?, new: JSONObject?) {
        var nested = false
        for (name, value) in old ?? JSONObject() {
            guard case .array = value else {
                if case .object = value { nested = true }
                continue
            }
            nested = true
            let count = (arrays[NameKey(name)] ?? 0) - 1
            arrays[NameKey(name)] = count == 0 ? nil : count
        }
        for (name, value) in new ?? JSONObject() {
            switch value {
            case .array:
                arrays[NameKey(name), default: 0] += 1
                nested = true
            case .object: nested = true
            default: break
            }
        }
        // Only objects with nested values can hold arrays deeper down.
        guard nested else { return }
        for path in Self.nestedArrayPaths(old) {
            let count = (nestedArrays[path] ?? 0) - 1
            nestedArrays[path] = count == 0 ? nil : count
        }
        for path in Self.nestedArrayPaths(new) { nestedArrays[path, default: 0] += 1 }
    }

    /// The paths below a first name where `attributes` holds an array, each once.
    static func nestedArrayPaths(_ attributes: JSONObject?) -> Set<[NameKey]> {
        var paths: Set<[NameKey]> = []
        func walk(_ value: JSONValue, at path: [NameKey]) {
            switch value {
            case .object(let object):
                for (name, member) in object {
                    let inner = path + [NameKey(name)]
                    if case .array = member { paths.insert(inner) }
                    walk(member, at: inner)
                }
            case .array(let elements):
                // The elements' members are reached by the array's name with `[]`.
                var stepped = path
                stepped[stepped.count - 1] = NameKey(path[path.count - 1].name + "[]")
                for case .object(let element) in elements { walk(.object(element), at: stepped) }
            default: break
            }
        }
        for (name, value) in attributes ?? JSONObject() {
            switch value {
            case .object, .array: walk(value, at: [NameKey(name)])
            default: break
            }
        }
        return paths
    }

    struct TextTotals: Equatable, Sendable {
        var objects = 0
        var words = 0
    }

    /// Adds an object's text (or, with negative counts, removes it) to text index `id`'s totals.
    mutating func adjustText(_ id: Int, objects: Int, words: Int) {
        var totals = textTotals[id] ?? TextTotals()
        totals.objects += objects
        totals.words += words
        textTotals[id] = totals == TextTotals() ? nil : totals
    }

    var pendingTotal: Int { pendingCreates + pendingUpdates + pendingDeletes }

    /// Adds `delta` entries to index `id` (no entry is kept for zero).
    mutating func adjustIndex(_ id: Int, by delta: Int) {
        let count = (indexEntries[id] ?? 0) + delta
        indexEntries[id] = count == 0 ? nil : count
    }

    mutating func adjustPending(_ kind: PendingChange.Kind?, by delta: Int) {
        switch kind {
        case .create?: pendingCreates += delta
        case .update?: pendingUpdates += delta
        case .delete?: pendingDeletes += delta
        case nil: break
        }
    }

    /// Stored under `(meta, "stats", model)`:
    /// `{"arrays":{"items":k,…},"nestedArrays":[[["a","b"],k],…],"create":a,"delete":c,"errors":e,"inFlight":f,"indexes":{"1":n,…},"objects":N,"recount":true?,"text":{"4":[objects,words]}?,"update":b}`.
    var encoded: [UInt8] {
        var object: JSONObject = [
            "objects": .int(Int64(objects)), "create": .int(Int64(pendingCreates)),
            "update": .int(Int64(pendingUpdates)), "delete": .int(Int64(pendingDeletes)),
            "inFlight": .int(Int64(inFlight)), "errors": .int(Int64(errors)),
            "indexes": .object(JSONObject(indexEntries.map { (String($0.key), JSONValue.int(Int64($0.value))) })),
        ]
        object["arrays"] = .object(JSONObject(arrays.map { ($0.key.name, JSONValue.int(Int64($0.value))) }))
        object["nestedArrays"] = .array(
            nestedArrays.map { .array([.array($0.key.map { .string($0.name) }), .int(Int64($0.value))]) }.sorted { $0.description < $1.description })
        if recountDue { object["recount"] = .bool(true) }
        if !textTotals.isEmpty {
            object["text"] = .object(
                JSONObject(textTotals.map { (String($0.key), JSONValue.array([.int(Int64($0.value.objects)), .int(Int64($0.value.words))])) }))
        }
        return object.jsonBytes
    }

    init() {}

    init(decoding bytes: UnsafeRawBufferPointer) throws(SatchelError) {
        guard let object = try? JSONObject(parsing: bytes),
            let objects = object["objects"]?.intValue, let c = object["create"]?.intValue,
            let u = object["update"]?.intValue, let d = object["delete"]?.intValue
        else { throw SatchelError(.corruption, "undecodable model statistics") }
        self.objects = Int(objects)
        self.pendingCreates = Int(c)
        self.pendingUpdates = Int(u)
        self.pendingDeletes = Int(d)
        self.recountDue = object["recount"] == .bool(true)
        self.inFlight = Int(object["inFlight"]?.intValue ?? 0)
        self.errors = Int(object["errors"]?.intValue ?? 0)
        for (id, count) in object["indexes"]?.objectValue ?? JSONObject() {
            guard let id = Int(id), let count = count.intValue else { throw SatchelError(.corruption, "undecodable index statistics") }
            indexEntries[id] = Int(count)
        }
        if let arrays = object["arrays"] {
            guard case .object(let counts) = arrays else { throw SatchelError(.corruption, "undecodable array statistics") }
            for (name, count) in counts {
                guard let count = count.intValue else { throw SatchelError(.corruption, "undecodable array statistics") }
                self.arrays[NameKey(name)] = Int(count)
            }
        } else {
            arraysUncounted = objects > 0
        }
        if case .array(let pairs)? = object["nestedArrays"] {
            for pair in pairs {
                guard case .array(let parts) = pair, parts.count == 2, case .array(let names) = parts[0], names.count > 1,
                    let count = parts[1].intValue
                else { throw SatchelError(.corruption, "undecodable array statistics") }
                var path: [NameKey] = []
                for name in names {
                    guard case .string(let name) = name else { throw SatchelError(.corruption, "undecodable array statistics") }
                    path.append(NameKey(name))
                }
                nestedArrays[path] = Int(count)
            }
        } else if object["nestedArrays"] != nil {
            throw SatchelError(.corruption, "undecodable array statistics")
        } else {
            arraysUncounted = arraysUncounted || objects > 0
        }
        for (id, totals) in object["text"]?.objectValue ?? JSONObject() {
            guard let id = Int(id), case .array(let pair) = totals, pair.count == 2, let objects = pair[0].intValue, let words = pair[1].intValue
            else {
                throw SatchelError(.corruption, "undecodable text index statistics")
            }
            textTotals[id] = TextTotals(objects: Int(objects), words: Int(words))
        }
    }
}

/// What the store knows about one model.
struct ModelEntry: Sendable {
    var definition: ModelDefinition
    var statistics: StoredStatistics
    /// The model's indexes, by id.
    var indexes: [StoredIndex] = []
}

/// The registry of models, guarded by the store's mutex.
struct Catalog: Sendable {
    var models: [NameKey: ModelEntry] = [:]
}
