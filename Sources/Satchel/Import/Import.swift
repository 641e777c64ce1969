public import Foundation

/// Progress of ``Store/importObjects(from:into:batchSize:progress:)``.
public struct ImportProgress: Sendable {
    /// What the import is doing.
    public enum Phase: Sendable {
        /// Reading the whole file once to check every item; nothing is written yet.
        case validating
        /// Writing the items in batches.
        case writing
    }

    public var phase: Phase
    /// Items validated or written so far.
    public var items: Int
    /// The number of items in the file, known once validation is done.
    public var totalItems: Int?
    /// Bytes of the file read so far, and the file's size.
    public var bytesRead: Int
    public var totalBytes: Int
    /// Batches committed so far.
    public var batches: Int
}

extension Store {
    /// Imports a JSON array, or JSON lines, of objects into `model`, streaming the file.
    ///
    /// The file is read twice. The first pass checks every item (well-formed JSON, an object,
    /// a string `object` id when given, the model's fixed schema) and writes nothing, so a
    /// malformed file leaves the store unchanged. The second pass writes the items in batches of
    /// `batchSize`, each batch one transaction: an interrupted import leaves only whole batches.
    /// While a batch is written, a thread of the import's own reads and parses the next one.
    ///
    /// An item that carries an `object` id replaces that object whole (creating it when missing,
    /// deleting it when all its attributes are null); an item without one creates an object
    /// with a new id.
    ///
    /// - Returns: the number of items imported.
    /// - Throws: ``SatchelError`` `.malformedJSON` or `.invalidObject` naming the line and
    ///   item, `.schemaViolation`, `.io`.
    @discardableResult
    public func importObjects(
        from url: URL, into model: Model, batchSize: Int = 1000,
        progress: ((ImportProgress) -> Void)? = nil
    ) throws -> Int {
        guard batchSize > 0 else { throw SatchelError(.invalidArgument, "the batch size must be positive") }
        let definition = try model.definition
        let totalBytes = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0
        var state = ImportProgress(phase: .validating, items: 0, totalItems: nil, bytesRead: 0, totalBytes: totalBytes, batches: 0)

        // Pass 1: check everything; write nothing.
        let total = try Self.checkImportItems(of: url, definition: definition) { items, bytesRead in
            state.items = items
            state.bytesRead = bytesRead
            progress?(state)
        }

        // Pass 2: write whole batches, each item through `put` (which checks it as every write
        // is checked: the file may have changed since).
        state = ImportProgress(phase: .writing, items: 0, totalItems: total, bytesRead: 0, totalBytes: totalBytes, batches: 0)
        progress?(state)
        // The next batch is read and parsed on a second thread while this one writes.
        let reader = try BatchReader(url: url, batchSize: batchSize)
        defer { reader.close() }
        while var batch = try reader.next() {
            // A batch whose ids come in order (an export's do) looks for its objects in key
            // order, through an iterator: most are new, and past the last key each costs a
            // comparison instead of a lookup.
            let ids = batch.objects.map { $0.0[Object.idAttribute]?.stringValue }
            let inOrder =
                ids.count > 1
                && zip(ids, ids.dropFirst()).allSatisfy { a, b in
                    guard let a, let b else { return false }
                    return UTF8Order.compare(a, b) < 0
                }
            try bulkUpdate { tx in
                func putAll() throws {
                    for i in batch.objects.indices {
                        // Moved out of the batch, so that the put owns it and splits its id off in place.
                        var object = JSONObject()
                        swap(&object, &batch.objects[i].0)
                        try tx.put(taking: &object, in: model, storedJSON: batch.objects[i].1)
                    }
                }
                if inOrder { try tx.readingInOrder(putAll) } else { try putAll() }
            }
            state.items += batch.objects.count
            state.batches += 1
            state.bytesRead = batch.bytesRead
            progress?(state)
        }
        return state.items
    }

    /// The first pass of an import: reads every item of the file at `url` and checks it against
    /// `definition`, writing nothing; `progress` hears every 10,000 items how many were checked
    /// and how many bytes read. Package-visible so that the fuzz targets read files through the
    /// code imports run; `chunkSize` lets them move where the reader's chunks end.
    ///
    /// - Returns: the number of items in the file.
    /// - Throws: ``SatchelError`` `.malformedJSON` or `.invalidObject` naming the line and item,
    ///   `.schemaViolation`, `.io`.
    package static func checkImportItems(
        of url: URL, definition: ModelDefinition, chunkSize: Int = JSONItemReader.defaultChunkSize,
        progress: (_ items: Int, _ bytesRead: Int) -> Void = { _, _ in }
    ) throws -> Int {
        // A model with no fixed schema and no picklists asks only for an object, a string id or
        // some attribute: the items are checked in place, building nothing.
        let shapesSuffice = definition.kind == .propertyBag && definition.choices.isEmpty
        var reader = try JSONItemReader(url: url, chunkSize: chunkSize, building: !shapesSuffice)
        var items = 0
        while let item = try reader.next() {
            if let shape = item.shape, shape.exact {
                guard case .object = shape.kind else { throw notAnObject(shape.kind, item) }
                try check(id: shape.id, hasAttributes: shape.hasAttribute, of: item)
            } else {
                try check(try object(from: item), of: item, definition: definition)
            }
            items += 1
            if items % 10_000 == 0 { progress(items, reader.bytesRead) }
        }
        return items
    }

    /// Parses one item of an import file as a JSON object (graph imports too).
    static func object(from item: JSONItemReader.Item) throws -> JSONObject {
        let value: JSONValue
        do {
            value = try item.value ?? item.bytes.withUnsafeBufferPointer { try JSONParser.parse($0, maxValues: JSONItemReader.maximumItemValues) }
        } catch let failure as JSONParser.Failure {
            let (line, column) = Self.position(of: failure.offset, in: item)
            throw SatchelError(.malformedJSON, "line \(line), column \(column) (item \(item.index + 1)): \(failure.reason)")
        }
        guard case .object(let object) = value else { throw notAnObject(value, item) }
        return object
    }

    private static func notAnObject(_ value: JSONValue, _ item: JSONItemReader.Item) -> SatchelError {
        SatchelError(.invalidObject, "line \(item.line) (item \(item.index + 1)): expected a JSON object, got \(value.kindName)")
    }

    /// Checks an item as ``Transaction/put(_:in:)`` will, naming its line: a string id or none,
    /// some attribute when there is no id, the model's fixed schema.
    private static func check(_ object: JSONObject, of item: JSONItemReader.Item, definition: ModelDefinition) throws {
        let (id, attributes) = object.splitting(Object.idAttribute)
        try check(id: id, hasAttributes: !attributes.isEmpty, of: item)
        do {
            try definition.validate(attributes, objectID: "")
        } catch {
            throw SatchelError(error.code, "line \(item.line) (item \(item.index + 1)): \(error.message)", model: definition.name)
        }
    }

    /// Checks an item's id (its `object` member, nil when none) as ``Transaction/put(_:in:)``
    /// will: a string, or none and some attribute that is not null.
    private static func check(id: JSONValue?, hasAttributes: Bool, of item: JSONItemReader.Item) throws {
        switch id {
        case nil, .null?:
            if !hasAttributes {
                throw SatchelError(
                    .invalidObject, "line \(item.line) (item \(item.index + 1)): an object without an id needs at least one non-null attribute")
            }
        case .string?: break
        case let other?:
            throw SatchelError(
                .invalidObject, "line \(item.line) (item \(item.index + 1)): the object id ('object') must be a string, got \(other.kindName)")
        }
    }

    /// 1-based line and column of byte `offset` of `item`.
    private static func position(of offset: Int, in item: JSONItemReader.Item) -> (Int, Int) {
        var line = item.line, column = 1
        for byte in item.bytes.prefix(offset) {
            if byte == 0x0A {
                line += 1
                column = 1
            } else {
                column += 1
            }
        }
        return (line, column)
    }
}
