public import Foundation

extension Model {
    /// Writes every object of the model to `url` as JSON lines — one object per line, its id
    /// under `object`, keys sorted — reading one snapshot with a cursor, so memory stays flat
    /// whatever the model's size. ``Store/importObjects(from:into:batchSize:progress:)`` of the file into an empty
    /// store gives the same objects, ids included. Returns how many were written.
    ///
    /// - Throws: ``SatchelError`` `.io` when the file cannot be written, `.invalidArgument` for
    ///   a file inside the store's directory.
    @discardableResult
    public func export(to url: URL) throws -> Int {
        // Never over the store's own files (a black-box probe: CURRENT was overwritten).
        guard !store.holds(url.path) else {
            throw SatchelError(.invalidArgument, "the export of \(name) cannot go inside the store (\(url.path))", model: name)
        }
        // Whole or not at all: a failure (a full disk) leaves an earlier file at `url` as it was.
        let file = try ReplacingFile(path: url.path)
        let count = try export { chunk in try file.write(chunk) }
        try file.commit()
        return count
    }

    /// Every object of the model as JSON lines, handed to `write` in chunks of about a
    /// megabyte; returns how many objects there were.
    @discardableResult
    public func export(_ write: (Data) throws -> Void) throws -> Int {
        let cursor = try cursor(Query())
        var chunk = Data()
        var count = 0
        while let object = try cursor.next() {
            chunk.append(contentsOf: object.description.utf8)
            chunk.append(UInt8(ascii: "\n"))
            count += 1
            if chunk.count >= 1 << 20 {
                try write(chunk)
                chunk.removeAll(keepingCapacity: true)
            }
        }
        if !chunk.isEmpty { try write(chunk) }
        return count
    }
}
