import Foundation

/// The write pass of an import reads ahead: a thread of its own (``ReadAhead``) reads and
/// parses the next batch of items while the caller writes the last one, so that parsing and
/// writing overlap. One batch at most is read ahead, so memory stays at about three batches.
///
/// The caller takes batches with ``next()`` until it returns nil, and calls ``close()`` once,
/// however it stops: the thread is gone when `close` returns.
struct BatchReader: Sendable {
    /// Items read: each object with its stored JSON when the item's text already is that
    /// (``JSONItemReader/Item/storedJSON``), and the file's bytes read so far.
    struct Batch: Sendable {
        var objects: [(JSONObject, [UInt8]?)]
        var bytesRead: Int
    }

    private let readAhead: ReadAhead<Batch>

    /// Opens the file at `url` and starts reading its first batch of `batchSize` items.
    init(url: URL, batchSize: Int) throws {
        let opened = try JSONItemReader(url: url)
        // The parser recurses once per nesting level (at most 256).
        readAhead = ReadAhead(stackSize: 4 << 20, start: { opened }) { reader in
            var objects: [(JSONObject, [UInt8]?)] = []
            objects.reserveCapacity(batchSize)
            while objects.count < batchSize, let item = try reader.next() {
                objects.append((try Store.object(from: item), item.storedJSON))
            }
            return objects.isEmpty ? nil : Batch(objects: objects, bytesRead: reader.bytesRead)
        }
    }

    /// The next batch (nil after the last item), waiting for it to be read; asks for the one
    /// after it at once.
    func next() throws(SatchelError) -> Batch? { try readAhead.next() }

    /// Hands back a batch written, for the reading thread to free (``ReadAhead/recycle(_:)``):
    /// its objects were allocated there.
    func recycle(_ batch: consuming Batch) { readAhead.recycle(batch) }

    /// Stops the thread and waits for it to end.
    func close() { readAhead.close() }
}
