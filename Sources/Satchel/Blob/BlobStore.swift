public import Foundation

/// Files kept under the store directory (`blobs/`), addressed by their content.
///
/// A blob attribute (``ModelDefinition/blobAttributes``) holds a reference string,
/// `"blob:<hash>"`, that names one file here. Storing the same bytes twice gives the same
/// reference and one file. The sync engine uploads the files of blob attributes and stores the
/// files it downloads; ``removeOrphans(olderThan:)`` deletes files no object refers to.
///
/// ```swift
/// let photo = try store.blobs.put(jpegData)
/// try products.update(id, with: ["photo": .string(photo)])
/// let bytes = try store.blobs.data(for: photo)
/// ```
///
/// In an encrypted store (``Store/Configuration/encryptionKey``) each file is sealed with
/// AES-256-GCM under the store's data key and named by a keyed hash of its bytes.
///
/// `BlobStore` is `Sendable`; its methods may be called from any thread.
public struct BlobStore: Sendable {
    /// The prefix of every blob reference.
    public static let referencePrefix = "blob:"

    /// The folder holding the files.
    public let directory: URL
    let store: Store

    init(store: Store) {
        self.store = store
        self.directory = URL(fileURLWithPath: store.path).appendingPathComponent("blobs")
    }

    /// Stores `data` and returns its reference.
    ///
    /// - Throws: ``SatchelError`` `.io` when the file cannot be written.
    public func put(_ data: Data) throws -> String {
        try ensureDirectory()
        let key = store.encryption?.dataKey
        let base = try key.map { try SealedBlob.name(of: Array(data), key: $0) } ?? Self.contentHash(data)
        // The hash names the file; equal bytes share it. A different file under the same name (a
        // hash collision) gets a numbered name.
        for attempt in 0..<1000 {
            let name = attempt == 0 ? base : "\(base)-\(attempt)"
            let url = directory.appendingPathComponent(name)
            if let existing = FileManager.default.contents(atPath: url.path) {
                let bytes = try key.map { try Data(SealedBlob.open(Array(existing), name: name, key: $0)) } ?? existing
                if bytes == data { return Self.referencePrefix + name }
                continue
            }
            do {
                let file = try key.map { try Data(SealedBlob.seal(Array(data), name: name, key: $0)) } ?? data
                try file.write(to: url, options: .atomic)
                // In a directory only the owner can enter; the file's own mode says the same.
                try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
            } catch let error as SatchelError {
                throw error
            } catch {
                throw SatchelError(.io, "cannot write blob \(name): \(error.localizedDescription)")
            }
            return Self.referencePrefix + name
        }
        throw SatchelError(.io, "too many blobs share the hash \(base)")
    }

    /// The bytes of `reference`, or nil when there is no such file.
    ///
    /// - Throws: ``SatchelError`` `.corruption` when the file of an encrypted store does not
    ///   open with its key (damaged, or another store's).
    public func data(for reference: String) throws -> Data? {
        guard let url = url(for: reference), let file = FileManager.default.contents(atPath: url.path) else { return nil }
        guard let key = store.encryption?.dataKey else { return file }
        return Data(try SealedBlob.open(Array(file), name: url.lastPathComponent, key: key))
    }

    /// Writes the bytes of `reference` to the file at `url`, whole or not at all (a failure
    /// leaves an earlier file there as it was; a pipe or a device is written to in place).
    /// Returns false when the store holds no such blob, writing nothing.
    ///
    /// - Throws: ``SatchelError`` `.io` when the file cannot be written, `.corruption` as
    ///   ``data(for:)``.
    public func write(_ reference: String, to url: URL) throws -> Bool {
        guard let data = try data(for: reference) else { return false }
        let file = try ReplacingFile(path: url.path)
        try file.write(data)
        try file.commit()
        return true
    }

    /// The file of `reference` (whether or not it exists), or nil for a string that is not a
    /// blob reference. In an encrypted store the file holds the bytes sealed: read them with
    /// ``data(for:)``.
    public func url(for reference: String) -> URL? {
        guard reference.hasPrefix(Self.referencePrefix) else { return nil }
        let name = String(reference.dropFirst(Self.referencePrefix.count))
        guard !name.isEmpty, !name.contains("/"), !name.hasPrefix(".") else { return nil }
        return directory.appendingPathComponent(name)
    }

    /// Whether `value` is a blob reference.
    public static func isReference(_ value: JSONValue?) -> Bool {
        value?.stringValue?.hasPrefix(referencePrefix) ?? false
    }

    /// Deletes the files that no object, pending change, in-flight change or stored error refers
    /// to, among those last modified more than `age` ago (so a file just stored for an object
    /// about to be written is spared). Returns how many were deleted.
    @discardableResult
    public func removeOrphans(olderThan age: Duration = .seconds(60)) throws -> Int {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return 0 }
        let referenced = try store.referencedBlobs()
        let cutoff = Date().addingTimeInterval(-Double(age.components.seconds) - Double(age.components.attoseconds) / 1e18)
        var removed = 0
        for name in names where !referenced.contains(Self.referencePrefix + name) {
            let path = directory.appendingPathComponent(name).path
            let modified = (try? FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date) ?? .distantPast
            guard modified <= cutoff else { continue }
            if (try? FileManager.default.removeItem(atPath: path)) != nil { removed += 1 }
        }
        return removed
    }

    private func ensureDirectory() throws {
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw SatchelError(.io, "cannot create \(directory.path): \(error.localizedDescription)")
        }
    }

    /// 128 bits of FNV-1a (two 64-bit passes with different bases) and the length, in hex: a
    /// name, not a security property; equal bytes are always compared before sharing a file.
    static func contentHash(_ data: Data) -> String {
        let a = Hex.fnv1a(data)
        let b = Hex.fnv1a(data.lazy.map { $0 ^ 0x5A }, basis: 0x8422_2325_cbf2_9ce4)
        return Hex.lowercase(a) + Hex.lowercase(b) + "-" + String(data.count, radix: 16)
    }
}

extension Store {
    /// The store's blob files.
    public var blobs: BlobStore { BlobStore(store: self) }

    /// Every blob reference held by an object, a pending or in-flight change, or a stored error,
    /// in any blob attribute of any model.
    func referencedBlobs() throws -> Set<String> {
        var references = Set<String>()
        func collect(_ attributes: JSONObject, _ names: [String]) {
            for name in names { if let s = attributes[name]?.stringValue, s.hasPrefix(BlobStore.referencePrefix) { references.insert(s) } }
        }
        for definition in models where !definition.blobAttributes.isEmpty {
            let model = Model(store: self, name: definition.name)
            try model.forEach { collect($0.attributes, definition.blobAttributes) }
            for change in try model.pendingChanges() { collect(change.attributes, definition.blobAttributes) }
            let db = try database(definition.partition)
            for family in [KeyFamily.inFlight, .error] {
                let prefix = Keys.objectRecordPrefix(family, definition.name)
                let iterator = try db.makeIterator(fillCache: false)
                iterator.seek(prefix)
                while iterator.isValid && iterator.keyHasPrefix(prefix) {
                    if let object = try? iterator.withValue({ try JSONObject(parsing: $0) }) {
                        collect(object["attrs"]?.objectValue ?? JSONObject(), definition.blobAttributes)
                        collect(object["server"]?.objectValue ?? JSONObject(), definition.blobAttributes)
                    }
                    iterator.next()
                }
                try iterator.checkError()
            }
        }
        return references
    }
}
