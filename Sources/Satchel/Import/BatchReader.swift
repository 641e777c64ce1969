import Foundation
import Synchronization

/// The write pass of an import reads ahead: a thread of its own reads and parses the next batch
/// of items while the caller writes the last one, so that parsing and writing overlap. One
/// batch at most is read ahead, so memory stays at about three batches.
///
/// The caller takes batches with ``next()`` until one comes back empty, and calls ``close()``
/// once, however it stops: the thread is gone when `close` returns.
final class BatchReader: Sendable {
    /// Items read: each object with its stored JSON when the item's text already is that
    /// (``JSONItemReader/Item/storedJSON``), and the file's bytes read so far.
    struct Batch: Sendable {
        var objects: [(JSONObject, [UInt8]?)]
        var bytesRead: Int
    }

    /// The batch read, or why reading failed; nil while the thread reads.
    private let ready = Locked<Result<Batch, SatchelError>?>(nil)
    /// Signalled by the thread when `ready` holds a batch or a failure.
    private let filled = DispatchSemaphore(value: 0)
    /// Signalled by the caller to have the next batch read.
    private let wanted = DispatchSemaphore(value: 0)
    /// Signalled by the thread as it ends.
    private let finished = DispatchSemaphore(value: 0)
    private let stopping = Atomic<Bool>(false)

    /// Opens the file at `url` and starts reading its first batch of `batchSize` items.
    init(url: URL, batchSize: Int) throws {
        let opened = try JSONItemReader(url: url)
        let thread = Thread { [self] in
            defer { finished.signal() }
            var reader = opened
            while true {
                wanted.wait()
                if stopping.load(ordering: .acquiring) { return }
                let result: Result<Batch, SatchelError>
                do {
                    result = .success(try Self.read(&reader, batchSize))
                } catch {
                    result = .failure(error as? SatchelError ?? SatchelError(.io, "reading the import file failed: \(error)"))
                }
                let more = (try? result.get())?.objects.isEmpty == false
                ready.withLock { $0 = result }
                filled.signal()
                if !more { return }
            }
        }
        // The parser recurses once per nesting level (at most 256).
        thread.stackSize = 4 << 20
        thread.start()
        wanted.signal()
    }

    /// The next batch (empty after the last item), waiting for it to be read; asks for the one
    /// after it at once.
    func next() throws(SatchelError) -> Batch {
        filled.wait()
        let result = ready.withLock { ready in
            defer { ready = nil }
            return ready
        }
        guard let result else { return Batch(objects: [], bytesRead: 0) }
        let batch = try result.get()
        if !batch.objects.isEmpty { wanted.signal() }
        return batch
    }

    /// Stops the thread and waits for it to end.
    func close() {
        stopping.store(true, ordering: .releasing)
        wanted.signal()
        finished.wait()
    }

    private static func read(_ reader: inout JSONItemReader, _ batchSize: Int) throws -> Batch {
        var objects: [(JSONObject, [UInt8]?)] = []
        objects.reserveCapacity(batchSize)
        while objects.count < batchSize, let item = try reader.next() {
            objects.append((try Store.object(from: item), item.storedJSON))
        }
        return Batch(objects: objects, bytesRead: reader.bytesRead)
    }
}
