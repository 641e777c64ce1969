public import Foundation
import Synchronization

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
    /// The file is read twice, and must not change in between: one that does (its size, its
    /// modification time) is refused, with nothing written when it changed during the check,
    /// and with the number of items written when it changed during the writing.
    /// The first pass checks every item (well-formed JSON, an object,
    /// a string `object` id when given, the model's fixed schema) and writes nothing, so a
    /// malformed file leaves the store unchanged. The second pass writes the items in batches of
    /// `batchSize`, each batch one transaction: an interrupted import leaves only whole batches.
    /// While a batch is written, a thread of the import's own reads and parses the next one.
    /// The model's statistics are written at the two ends of the writing pass, not with every
    /// batch (its counts in memory follow every batch): a process that dies during an import
    /// leaves its stored statistics marked, and the next open counts the model again.
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

        // Pass 1: check everything; write nothing. The file must then stay as it was: one that
        // changes between the passes would write what was not checked (a black-box probe: an
        // import wrote most of a file another process changed, then failed as if refused).
        let checkedVersion = FileSystem.version(of: url.path)
        let total = try Self.checkImportItems(of: url, definition: definition) { items, bytesRead in
            state.items = items
            state.bytesRead = bytesRead
            progress?(state)
        }
        func changed(_ written: Int) -> Bool { FileSystem.version(of: url.path) != checkedVersion || written > total }
        if changed(0) {
            throw SatchelError(.io, "\(url.path) changed while it was checked: nothing was written; import it once it stops changing")
        }

        // Pass 2: write whole batches, each item through `put` (which checks it as every write
        // is checked: the file may have changed since).
        state = ImportProgress(phase: .writing, items: 0, totalItems: total, bytesRead: 0, totalBytes: totalBytes, batches: 0)
        progress?(state)
        // The next batch is read and parsed on a second thread while this one writes.
        let reader = try BatchReader(url: url, batchSize: batchSize)
        defer { reader.close() }
        // The batches do not write the model's statistics (its record says so until the end):
        // with them, every table LevelDB wrote from the batches held that one key too, so all
        // the tables overlapped and every compaction read and rewrote them all. The counts in
        // memory stay exact, and are written when the import ends, or fails; a process that dies
        // before leaves the mark, and the next open counts the model.
        try markRecount(model.name, due: true)
        // After a failure; after the end, a no-op (the record is unmarked already).
        defer { try? markRecount(model.name, due: false) }
        do {
            try writeBatches(reader, total: total, into: model, state: &state, progress: progress)
        } catch {
            guard changed(state.items) else { throw error }
            throw SatchelError(
                .io,
                "\(url.path) changed while it was imported: its first \(state.items) items were written, and the rest not; import it again once it stops changing"
            )
        }
        if changed(state.items) {
            throw SatchelError(
                .io, "\(url.path) changed while it was imported: its \(state.items) items were written; import it again once it stops changing")
        }
        try markRecount(model.name, due: false)
        return state.items
    }

    /// The writing pass of an import: `reader`'s batches into `model`, stopping at the `total`
    /// items checked (more is a file that grew since).
    private func writeBatches(
        _ reader: BatchReader, total: Int, into model: Model, state: inout ImportProgress, progress: ((ImportProgress) -> Void)?
    ) throws {
        while var batch = try reader.next() {
            guard state.items + batch.objects.count <= total else {
                throw SatchelError(.io, "the file holds more items than were checked")
            }
            // A batch whose ids come in order (an export's do) looks for its objects in key
            // order, through an iterator: most are new, and past the last key each costs a
            // comparison instead of a lookup.
            let ids = batch.objects.count >= Transaction.orderedReadsFrom ? batch.objects.map { $0.0[Object.idAttribute]?.stringValue } : []
            let inOrder =
                ids.count > 1
                && zip(ids, ids.dropFirst()).allSatisfy { a, b in
                    guard let a, let b else { return false }
                    return UTF8Order.compare(a, b) < 0
                }
            try bulkUpdate { tx in
                func putAll() throws {
                    for i in batch.objects.indices {
                        // Moved out of the batch, so that the put owns it and splits its id off in
                        // place; then back, so that the batch holds it to the end (below).
                        var object = JSONObject()
                        swap(&object, &batch.objects[i].0)
                        try tx.put(taking: &object, in: model, storedJSON: batch.objects[i].1)
                        swap(&object, &batch.objects[i].0)
                    }
                }
                try tx.readingInOrder(reads: batch.objects.count, when: inOrder, putAll)
            }
            state.items += batch.objects.count
            state.batches += 1
            state.bytesRead = batch.bytesRead
            // Freed by the reading thread, which allocated it.
            reader.recycle(batch)
            progress?(state)
        }
    }

    /// The first pass of an import: reads every item of the file at `url` and checks it against
    /// `definition`, writing nothing; `progress` hears every 10,000 items how many were checked
    /// and how many bytes read. Package-visible so that the fuzz targets read files through the
    /// code imports run; `chunkSize` lets them move where the reader's chunks end, and
    /// `splitFrom` the size from which a second thread checks the file's second half.
    ///
    /// A file of `splitFrom` bytes or more is checked by two threads: a second one from an
    /// item that seems to start halfway (an object at the start of a line), while this one
    /// reads from the beginning. When this one reaches that very offset as an item's start, the
    /// second's answer stands for the rest of the file — if it found nothing wrong. Any other
    /// way (the offset fell inside an item, the second thread met a problem) this one reads on
    /// alone, so what an import accepts, and the first problem it names, is what one reader
    /// would find.
    ///
    /// - Returns: the number of items in the file.
    /// - Throws: ``SatchelError`` `.malformedJSON` or `.invalidObject` naming the line and item,
    ///   `.schemaViolation`, `.io`.
    package static func checkImportItems(
        of url: URL, definition: ModelDefinition, chunkSize: Int = JSONItemReader.defaultChunkSize, splitFrom: Int = 4 << 20,
        progress: (_ items: Int, _ bytesRead: Int) -> Void = { _, _ in }
    ) throws -> Int {
        // A model with no fixed schema and no picklists asks only for an object, a string id or
        // some attribute: the items are checked in place, building nothing.
        let building = !(definition.kind == .propertyBag && definition.choices.isEmpty)
        var reader = try JSONItemReader(url: url, chunkSize: chunkSize, building: building)
        var second = SecondHalfCheck(of: url, definition: definition, chunkSize: chunkSize, building: building, splitFrom: splitFrom)
        defer { second?.stop() }
        var items = 0
        while let item = try reader.next() {
            if let split = second, item.offset >= split.offset {
                if item.offset == split.offset, let rest = split.wait() { return items + rest }
                split.stop()
                second = nil
            }
            try check(item, definition: definition)
            items += 1
            if items % 10_000 == 0 { progress(items, reader.bytesRead) }
        }
        return items
    }

    /// Checks one item of an import file as ``Transaction/put(_:in:)`` will.
    private static func check(_ item: JSONItemReader.Item, definition: ModelDefinition) throws {
        if let shape = item.shape, shape.exact {
            guard case .object = shape.kind else { throw notAnObject(shape.kind, item) }
            try check(id: shape.id, hasAttributes: shape.hasAttribute, of: item)
        } else {
            try check(try object(from: item), of: item, definition: definition)
        }
    }

    /// The check of a file's second half on a thread of its own, from an item that seems to
    /// start halfway (``checkImportItems(of:definition:chunkSize:splitFrom:progress:)``).
    private final class SecondHalfCheck: Sendable {
        /// Where the second half starts.
        let offset: Int
        /// How many items it holds, once checked (nil: it failed, or was stopped).
        private let items = Mutex<Int?>(nil)
        private let stopped = Atomic(false)
        private let finished = DispatchSemaphore(value: 0)

        /// Nil when the file is smaller than `splitFrom`, or no item seems to start in a window
        /// halfway.
        init?(of url: URL, definition: ModelDefinition, chunkSize: Int, building: Bool, splitFrom: Int) {
            guard let size = FileSystem.size(of: url.path), size >= splitFrom, let (offset, layout) = Self.itemStart(in: url, near: size / 2)
            else { return nil }
            self.offset = offset
            let thread = Thread { [self] in
                var items: Int? = nil
                do {
                    var reader = try JSONItemReader(url: url, resumingAt: offset, layout: layout, chunkSize: chunkSize, building: building)
                    var count = 0
                    while !stopped.load(ordering: .relaxed), let item = try reader.next() {
                        try Store.check(item, definition: definition)
                        count += 1
                    }
                    if !stopped.load(ordering: .relaxed) { items = count }
                } catch {
                    items = nil  // the reader from the start will meet it and name it
                }
                self.items.withLock { $0 = items }
                finished.signal()
            }
            thread.start()
        }

        /// The items of the second half once its check is done (nil: it failed).
        func wait() -> Int? {
            finished.wait()
            finished.signal()  // for `stop`'s wait
            return items.withLock { $0 }
        }

        /// Stops the check and waits for its thread (idempotent).
        func stop() {
            stopped.store(true, ordering: .relaxed)
            finished.wait()
            finished.signal()
        }

        /// An offset near `middle` where an item seems to start, and the file's layout: an object
        /// at the start of a line (a raw newline lies only between tokens), after a `,` in an
        /// array; nil when a window of the file there has none.
        private static func itemStart(in url: URL, near middle: Int) -> (Int, JSONItemReader.Layout)? {
            guard let handle = FileHandle(forReadingAtPath: url.path) else { return nil }
            defer { try? handle.close() }
            guard let head = try? handle.read(upToCount: 64), var first = head.firstIndex(where: { !Self.isSpace($0) }) else { return nil }
            if head.count >= first + 3 && head[first] == 0xEF && head[first + 1] == 0xBB && head[first + 2] == 0xBF {
                guard let next = head[(first + 3)...].firstIndex(where: { !Self.isSpace($0) }) else { return nil }
                first = next
            }
            let layout: JSONItemReader.Layout = head[first] == UInt8(ascii: "[") ? .array : .sequence
            guard (try? handle.seek(toOffset: UInt64(middle))) != nil, let data = try? handle.read(upToCount: 256 << 10) else { return nil }
            let window = [UInt8](data)
            var i = 0
            while let newline = window[i...].firstIndex(of: 0x0A) {
                var start = newline + 1
                while start < window.count && (window[start] == 0x20 || window[start] == 0x09 || window[start] == 0x0D) { start += 1 }
                i = start
                guard start < window.count else { return nil }
                guard window[start] == UInt8(ascii: "{") else { continue }
                var before = newline - 1
                while before >= 0 && Self.isSpace(window[before]) { before -= 1 }
                guard before >= 0 else { continue }
                let separated = layout == .array ? window[before] == UInt8(ascii: ",") : window[before] == UInt8(ascii: "}")
                if separated { return (middle + start, layout) }
            }
            return nil
        }

        private static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 }
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
        var line = item.line, column = item.column
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
