import Foundation
import SatchelTestSupport
import Testing

@testable import Satchel

@Suite("Encryption at rest")
struct EncryptionTests {
    static let marker = "ZEBRA-MARKER-7391"

    static func configuration(_ key: EncryptionKey?) -> Store.Configuration {
        var configuration = Store.Configuration()
        configuration.encryptionKey = key
        configuration.writeBufferSize = 64 << 10  // small: tables are written, and compacted
        return configuration
    }

    /// Writes the marker into objects, index values, a pending change, the sync state and the
    /// session, then compacts and closes.
    static func fill(_ path: String, key: EncryptionKey?) throws {
        let store = try Store(path: path, configuration: configuration(key))
        let items = try store.model("Item")
        try items.createIndex(IndexDefinition(["label"]))
        for i in 0..<2000 {
            _ = try items.put(["object": .string("item-\(i)"), "label": .string("\(marker)-\(i)"), "n": .int(Int64(i))])
        }
        let settings = try store.register(ModelDefinition(name: "Setting", partition: .local))
        _ = try settings.put(["object": "theme", "value": .string(marker)])
        var state = ModelSyncState()
        state.cursor = .string(marker)
        try store.bulkUpdate { tx in try tx.setSyncState(items, state) }
        try store.setStoredSession(["token": .string(marker), "user": "ann"])
        let photo = try store.blobs.put(Data((marker + " in a blob").utf8))
        _ = try items.put(["object": "with-photo", "photo": .string(photo), "label": "photo"])
        try store.compact()
        try store.close()
    }

    /// Every byte of every file under `directory`.
    static func allBytes(under directory: String) throws -> [(String, Data)] {
        let walker = try #require(FileManager.default.enumerator(atPath: directory))
        var files: [(String, Data)] = []
        while let name = walker.nextObject() as? String {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: directory + "/" + name, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            files.append((name, try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))))
        }
        return files
    }

    /// Writes `items` objects into a new store at `path` encrypted with `key`, closes it, and
    /// returns its largest log in the user partition: its name under the store and its bytes.
    static func largestLog(ofStoreAt path: String, key: EncryptionKey, items: Int) throws -> (name: String, bytes: Data) {
        let store = try Store(path: path, configuration: configuration(key))
        for i in 0..<items { _ = try store.model("Item").put(["object": .string("item-\(i)"), "n": .int(Int64(i))]) }
        try store.close()
        let logs = try allBytes(under: path).filter { $0.0.hasPrefix("user/") && $0.0.hasSuffix(".log") }
        return try #require(logs.max { $0.1.count < $1.1.count })
    }

    static func filesHolding(_ text: String, under directory: String) throws -> [String] {
        let needle = Data(text.utf8)
        return try allBytes(under: directory).filter { $0.1.range(of: needle) != nil }.map(\.0)
    }

    @Test("the marker written into objects, index entries, the sync state and the session appears in no file; unencrypted, it does")
    func noPlaintextOnDisk() throws {
        let directory = TemporaryDirectory()
        let key = try EncryptionKey.random()
        let encrypted = directory.child("encrypted")
        let plain = directory.child("plain")
        try Self.fill(encrypted, key: key)
        try Self.fill(plain, key: nil)

        let files = try Self.allBytes(under: encrypted)
        #expect(files.contains { $0.0.hasSuffix(".ldb") }, "tables were written: \(files.map(\.0))")
        #expect(try Self.filesHolding(Self.marker, under: encrypted) == [])
        #expect(!files.contains { $0.0.hasSuffix("LOG") || $0.0.hasSuffix("LOG.old") }, "LevelDB's info log goes nowhere")
        #expect(!(try Self.filesHolding(Self.marker, under: plain).isEmpty), "the test can fail: the plain store holds the marker")

        // And the data is all there with the key.
        let store = try Store(path: encrypted, configuration: Self.configuration(key))
        defer { try? store.close() }
        let items = try store.model("Item")
        #expect(try items.count() == 2001)
        #expect(try items.findFirst(where: "label" == .string("\(Self.marker)-7"))?.id == "item-7")
        #expect(try store.storedSession()?["token"] == .string(Self.marker))
        let photo = try #require(try items.find("with-photo")?.attributes["photo"]?.stringValue)
        #expect(try store.blobs.data(for: photo) == Data((Self.marker + " in a blob").utf8))
        #expect(try store.verify().isHealthy)
    }

    @Test("no key, a wrong key, a key for a plain store: one .wrongKey error each, and not a byte changed")
    func wrongKeys() throws {
        let directory = TemporaryDirectory()
        let key = try EncryptionKey.random()
        let encrypted = directory.child("encrypted")
        let plain = directory.child("plain")
        try Self.fill(encrypted, key: key)
        try Self.fill(plain, key: nil)
        let encryptedBefore = try Self.allBytes(under: encrypted).map { "\($0.0):\($0.1.hashValue)" }.sorted()
        let plainBefore = try Self.allBytes(under: plain).map { "\($0.0):\($0.1.hashValue)" }.sorted()

        for (path, key, says) in [
            (encrypted, nil, "is encrypted"), (encrypted, try EncryptionKey.random(), "does not open"),
            (encrypted, EncryptionKey.passphrase("secret"), "not a passphrase"), (plain, key, "is not encrypted"),
        ] as [(String, EncryptionKey?, String)] {
            do {
                _ = try Store(path: path, configuration: Self.configuration(key))
                Issue.record("opened \(path) with \(String(describing: key))")
            } catch let error as SatchelError {
                #expect(error.code == .wrongKey, "\(error)")
                #expect(error.message.contains(says), "\(error.message)")
                if let hex = key?.hex, !hex.isEmpty { #expect(!error.message.contains(hex), "the key stays out of the message") }
            } catch {
                Issue.record("not a SatchelError: \(error)")
            }
        }
        #expect(try Self.allBytes(under: encrypted).map { "\($0.0):\($0.1.hashValue)" }.sorted() == encryptedBefore)
        #expect(try Self.allBytes(under: plain).map { "\($0.0):\($0.1.hashValue)" }.sorted() == plainBefore)
    }

    @Test(
        "an encrypted store whose key file is gone: opening with or without the key, and repair, say so and change nothing; with the file back it opens whole (found by a black-box probe)"
    )
    func keyFileGone() throws {
        let directory = TemporaryDirectory()
        let key = try EncryptionKey.random()
        let path = directory.child("store")
        try Self.fill(path, key: key)
        let before = try Self.labels(path, key: key)
        let keyFile = path + "/satchel.key"
        let saved = try Data(contentsOf: URL(fileURLWithPath: keyFile))
        try FileManager.default.removeItem(atPath: keyFile)
        let files = try Self.allBytes(under: path).map { "\($0.0):\($0.1.hashValue)" }.sorted()

        for attempt in [
            { _ = try Store(path: path, configuration: Self.configuration(nil)) },
            { _ = try Store(path: path, configuration: Self.configuration(key)) },
            { _ = try Store.repair(path: path) }, { _ = try Store.repair(path: path, configuration: Self.configuration(key)) },
        ] as [() throws -> Void] {
            #expect {
                try attempt()
            } throws: {
                guard let error = $0 as? SatchelError else { return false }
                return error.code == .wrongKey && error.message.contains("satchel.key is missing") && !error.message.contains("\n")
            }
        }
        #expect(try Self.allBytes(under: path).map { "\($0.0):\($0.1.hashValue)" }.sorted() == files, "not a byte changed")
        try saved.write(to: URL(fileURLWithPath: keyFile))
        #expect(try Self.labels(path, key: key) == before)
    }

    @Test("a key's text: 64 digits with at most one trailing newline, LF or CRLF; anything else refused, counted in bytes")
    func keyText() throws {
        let digits = String(repeating: "0123456789abcdef", count: 4)
        let key = try EncryptionKey(hex: digits)
        for accepted in [digits + "\n", digits + "\r\n", digits.uppercased()] {
            #expect(try EncryptionKey(hex: accepted).hex == key.hex, "\(accepted.debugDescription)")
        }
        for (refused, message) in [
            (digits + "\n\r\n", "65 characters"), (digits + "\r\r\n", "65 characters"), (digits + "\n\n", "65 characters"),
            (digits + "\r", "65 characters"), (String(digits.dropLast()) + "\r\n", "63 characters"), (digits + " ", "65 characters"),
        ] {
            #expect(throws: SatchelError.self, "\(refused.debugDescription)") { try EncryptionKey(hex: refused) }
            do { _ = try EncryptionKey(hex: refused) } catch {
                #expect(error.message.contains(message), "\(refused.debugDescription): \(error.message)")
            }
        }
    }

    @Test("a passphrase opens what it encrypted, and only that passphrase")
    func passphrase() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("store")
        do {
            let store = try Store(path: path, configuration: Self.configuration(.passphrase("correct horse")))
            _ = try store.model("Note").create(["text": .string(Self.marker)])
            try store.close()
        }
        #expect(throws: SatchelError.self) { _ = try Store(path: path, configuration: Self.configuration(.passphrase("wrong horse"))) }
        let store = try Store(path: path, configuration: Self.configuration(.passphrase("correct horse")))
        defer { try? store.close() }
        #expect(try store.model("Note").findAll().map { $0.attributes["text"] } == [.string(Self.marker)])
    }

    @Test("a damaged key file, a damaged file header, a truncated table and a table from another store: one clear error each")
    func damagedFiles() throws {
        let directory = TemporaryDirectory()
        let key = try EncryptionKey.random()
        let original = directory.child("original")
        try Self.fill(original, key: key)

        func copy(_ name: String) throws -> String {
            let path = directory.child(name)
            try FileManager.default.copyItem(atPath: original, toPath: path)
            return path
        }
        func tables(_ store: String) throws -> [String] {
            try Self.allBytes(under: store).map(\.0).filter { $0.hasPrefix("user/") && $0.hasSuffix(".ldb") }.sorted()
        }
        func openAndRead(_ path: String) throws {
            let store = try Store(path: path, configuration: Self.configuration(key))
            defer { try? store.close() }
            _ = try store.model("Item").findAll()
        }

        // The key file cut short.
        let shortKey = try copy("short-key")
        try Data(try Data(contentsOf: URL(fileURLWithPath: shortKey + "/satchel.key")).prefix(50)).write(
            to: URL(fileURLWithPath: shortKey + "/satchel.key"))
        #expect { try openAndRead(shortKey) } throws: { ($0 as? SatchelError)?.code == .corruption }

        // A byte of the sealed data key flipped: the seal does not open.
        let flippedKey = try copy("flipped-key")
        var keyBytes = try Data(contentsOf: URL(fileURLWithPath: flippedKey + "/satchel.key"))
        keyBytes[70] ^= 0x01
        try keyBytes.write(to: URL(fileURLWithPath: flippedKey + "/satchel.key"))
        #expect { try openAndRead(flippedKey) } throws: { ($0 as? SatchelError)?.code == .wrongKey }

        // A table's header magic damaged.
        let header = try copy("header")
        let table = try #require(try tables(header).first)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: header + "/" + table))
        bytes[0] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: header + "/" + table))
        #expect { try openAndRead(header) } throws: { error in
            let error = error as? SatchelError
            return error?.code == .corruption && error?.message.contains("not an encrypted file") == true
        }

        // A table truncated.
        let truncated = try copy("truncated")
        let cut = try #require(try tables(truncated).first)
        let whole = try Data(contentsOf: URL(fileURLWithPath: truncated + "/" + cut))
        try Data(whole.prefix(whole.count / 2)).write(to: URL(fileURLWithPath: truncated + "/" + cut))
        #expect { try openAndRead(truncated) } throws: { ($0 as? SatchelError)?.code == .corruption }

        // A table of another store (another data key) put in place of one of this store.
        let other = directory.child("other")
        try Self.fill(other, key: key)
        let foreign = try copy("foreign")
        let replaced = try #require(try tables(foreign).first)
        let otherTable = try #require(try tables(other).first)
        try FileManager.default.removeItem(atPath: foreign + "/" + replaced)
        try FileManager.default.copyItem(atPath: other + "/" + otherTable, toPath: foreign + "/" + replaced)
        #expect { try openAndRead(foreign) } throws: { error in
            let error = error as? SatchelError
            return error?.code == .corruption && error?.message.contains("another key") == true
        }
    }

    /// The store's objects, read with `key`.
    static func labels(_ path: String, key: EncryptionKey?) throws -> [String: JSONValue] {
        let store = try Store(path: path, configuration: configuration(key))
        defer { try? store.close() }
        #expect(try store.verify().isHealthy)
        let photo = try #require(try store.model("Item").find("with-photo")?.attributes["photo"]?.stringValue)
        #expect(try store.blobs.data(for: photo) == Data((marker + " in a blob").utf8), "the blob reads back")
        return Dictionary(uniqueKeysWithValues: try store.model("Item").findAll().map { ($0.id, $0.attributes["label"] ?? .null) })
    }

    @Test("encrypt, rekey, change the key, decrypt: the same objects at every step, each store opening with its key only")
    func conversions() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("store")
        try Self.fill(path, key: nil)
        let expected = try Self.labels(path, key: nil)
        #expect(expected.count == 2001)

        let first = try EncryptionKey.random()
        try Store.encrypt(path: path, key: first)
        #expect(try Self.filesHolding(Self.marker, under: path) == [])
        #expect(!FileManager.default.fileExists(atPath: path + ".converting"), "the old plain store is gone")
        #expect(try Self.labels(path, key: first) == expected)
        #expect { _ = try Store(path: path, configuration: Self.configuration(nil)) } throws: { ($0 as? SatchelError)?.code == .wrongKey }
        #expect { try Store.encrypt(path: path, key: first) } throws: { ($0 as? SatchelError)?.code == .wrongKey }

        let oldKeyFile = try Data(contentsOf: URL(fileURLWithPath: path + "/satchel.key"))
        let second = try EncryptionKey.random()
        try Store.rekey(path: path, from: first, to: second)
        #expect(try Self.labels(path, key: second) == expected)
        #expect { _ = try Store(path: path, configuration: Self.configuration(first)) } throws: { ($0 as? SatchelError)?.code == .wrongKey }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path + "/satchel.key")) != oldKeyFile)

        let third = EncryptionKey.passphrase("a long passphrase")
        try Store.changeEncryptionKey(path: path, from: second, to: third)
        #expect(try Self.labels(path, key: third) == expected)
        #expect { try Store.changeEncryptionKey(path: path, from: second, to: first) } throws: { ($0 as? SatchelError)?.code == .wrongKey }

        try Store.decrypt(path: path, key: third)
        #expect(!FileManager.default.fileExists(atPath: path + "/satchel.key"))
        #expect(try Self.labels(path, key: nil) == expected)
        #expect(!(try Self.filesHolding(Self.marker, under: path).isEmpty))
    }

    @Test("a conversion killed midway leaves the old store or the new one; what it left beside it goes at the next open")
    func interruptedConversion() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("store")
        try Self.fill(path, key: nil)
        let expected = try Self.labels(path, key: nil)
        // Killed while copying: a partial copy beside the old store.
        try FileManager.default.createDirectory(atPath: path + ".converting/user", withIntermediateDirectories: true)
        try Data("partial".utf8).write(to: URL(fileURLWithPath: path + ".converting/user/000005.ldb"))
        #expect(try Self.labels(path, key: nil) == expected)
        #expect(!FileManager.default.fileExists(atPath: path + ".converting"))
        // And a conversion runs over such a leftover.
        try FileManager.default.createDirectory(atPath: path + ".converting", withIntermediateDirectories: true)
        let key = try EncryptionKey.random()
        try Store.encrypt(path: path, key: key)
        #expect(try Self.labels(path, key: key) == expected)
    }

    @Test(
        "a killed decrypt's copy, in the clear beside the encrypted store, goes at the next open even when that open is refused (found by a black-box probe)"
    )
    func plainLeftoverOfARefusedOpen() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("store")
        let key = try EncryptionKey.random()
        try Self.fill(path, key: key)
        var wrongKey = Store.Configuration()
        wrongKey.encryptionKey = try EncryptionKey.random()
        for configuration in [Store.Configuration(), wrongKey] {
            // What a decrypt killed while copying leaves: part of the store, in the clear.
            try FileManager.default.createDirectory(atPath: path + ".converting/user", withIntermediateDirectories: true)
            try Data("plain text of the user's data".utf8).write(to: URL(fileURLWithPath: path + ".converting/user/000003.log"))
            #expect { _ = try Store(path: path, configuration: configuration) } throws: { ($0 as? SatchelError)?.code == .wrongKey }
            #expect(!FileManager.default.fileExists(atPath: path + ".converting"), "the plain copy is gone")
        }
        // Refused otherwise, the copy goes all the same: a repair without the key or with another,
        // an encrypt of the encrypted store, a restore over it without the key (a black-box
        // probe: each left the plain copy).
        let backup = directory.child("backup")
        try Self.fill(backup, key: nil)
        let refusals: [(String, () throws -> Void)] = [
            ("repair without the key", { _ = try Store.repair(path: path) }),
            ("repair with another key", { _ = try Store.repair(path: path, configuration: wrongKey) }),
            ("encrypt", { try Store.encrypt(path: path, key: try EncryptionKey.random()) }),
            ("restore", { _ = try Store.restore(from: backup, to: path) }),
        ]
        for (what, refused) in refusals {
            try FileManager.default.createDirectory(atPath: path + ".converting/user", withIntermediateDirectories: true)
            try Data("plain text of the user's data".utf8).write(to: URL(fileURLWithPath: path + ".converting/user/000003.log"))
            #expect(throws: SatchelError.self, "\(what)") { try refused() }
            #expect(!FileManager.default.fileExists(atPath: path + ".converting"), "\(what): the plain copy is gone")
        }
        #expect(try Self.labels(path, key: key).isEmpty == false)
    }

    @Test(
        "while a conversion runs (its lock held) the store is refused, its copy kept; once it is gone, the next open removes what it left (found by a black-box probe)"
    )
    func conversionUnderWay() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("store")
        try Self.fill(path, key: nil)
        let expected = try Self.labels(path, key: nil)
        // A conversion past its copy: the store closed, the copy beside it, the lock held.
        try FileManager.default.createDirectory(atPath: path + ".converting/user", withIntermediateDirectories: true)
        let lock = try #require(try FileSystem.lock(path + ".converting.lock"))
        #expect { _ = try Store(path: path) } throws: { ($0 as? SatchelError)?.code == .locked }
        #expect { try Store.encrypt(path: path, key: try EncryptionKey.random()) } throws: { ($0 as? SatchelError)?.code == .locked }
        #expect(FileManager.default.fileExists(atPath: path + ".converting/user"), "the copy is not taken for a leftover")
        FileSystem.unlock(lock)
        #expect(try Self.labels(path, key: nil) == expected)
        #expect(!FileManager.default.fileExists(atPath: path + ".converting") && !FileManager.default.fileExists(atPath: path + ".converting.lock"))
        let key = try EncryptionKey.random()
        try Store.encrypt(path: path, key: key)
        #expect(try Self.labels(path, key: key) == expected)
        #expect(!FileManager.default.fileExists(atPath: path + ".converting.lock"), "the conversion removes its lock file")
        // A conversion killed before its copy leaves its lock file alone: the next open removes
        // it (found by a black-box probe: it stayed for good).
        #expect(FileManager.default.createFile(atPath: path + ".converting.lock", contents: Data()))
        #expect(try Self.labels(path, key: key) == expected)
        #expect(!FileManager.default.fileExists(atPath: path + ".converting.lock"))
    }

    @Test("the leftover beside a store is found by the store's standard path, however the path was written")
    func stagingPathIsStandard() {
        let directory = FileManager.default.currentDirectoryPath
        for path in ["/a/b", "/a/./b", "/a/../b", "/a/b/", "/a//b", "/a/.hidden/b", "/a/b/.", "relative/store", "./store", "../up/store"] {
            let standard = URL(fileURLWithPath: path).standardizedFileURL.path + ".converting"
            #expect(Store.conversionStaging(path) == standard, "\(path) (from \(directory))")
        }
    }

    @Test("an encrypted store's backup is encrypted with the same key, restores, and repairs through its key")
    func backupAndRepair() throws {
        let directory = TemporaryDirectory()
        let key = try EncryptionKey.random()
        let path = directory.child("store")
        try Self.fill(path, key: key)
        let expected = try Self.labels(path, key: key)

        let store = try Store(path: path, configuration: Self.configuration(key))
        try store.backup(to: directory.child("backup"))
        try store.close()
        #expect(try Self.filesHolding(Self.marker, under: directory.child("backup")) == [])
        #expect(try Self.labels(directory.child("backup"), key: key) == expected)
        #expect { _ = try Store(path: directory.child("backup"), configuration: Self.configuration(nil)) } throws: {
            ($0 as? SatchelError)?.code == .wrongKey
        }
        _ = try Store.restore(from: directory.child("backup"), to: path, configuration: Self.configuration(key))
        #expect(try Self.labels(path, key: key) == expected)

        #expect { _ = try Store.repair(path: path) } throws: { ($0 as? SatchelError)?.code == .wrongKey }
        let report = try Store.repair(path: path, configuration: Self.configuration(key))
        #expect(report.isHealthy)
        #expect(try Self.filesHolding(Self.marker, under: path) == [])
        #expect(try Self.labels(path, key: key) == expected)
    }

    @Test("a damaged blob file, and one moved under another name or from another store, is .corruption; never wrong bytes")
    func blobs() throws {
        let directory = TemporaryDirectory()
        let key = try EncryptionKey.random()
        let store = try Store(path: directory.child("a"), configuration: Self.configuration(key))
        defer { try? store.close() }
        let first = try store.blobs.put(Data("first".utf8))
        let second = try store.blobs.put(Data("second".utf8))
        #expect(try store.blobs.put(Data("first".utf8)) == first, "equal bytes share a file")
        let firstURL = try #require(store.blobs.url(for: first))
        let secondURL = try #require(store.blobs.url(for: second))
        #expect(try Data(contentsOf: firstURL).range(of: Data("first".utf8)) == nil)

        let original = try Data(contentsOf: firstURL)
        var damaged = original
        damaged[damaged.count - 1] ^= 1
        try damaged.write(to: firstURL)
        #expect { _ = try store.blobs.data(for: first) } throws: { ($0 as? SatchelError)?.code == .corruption }
        try Data(contentsOf: secondURL).write(to: firstURL)
        #expect { _ = try store.blobs.data(for: first) } throws: { ($0 as? SatchelError)?.code == .corruption }

        let other = try Store(path: directory.child("b"), configuration: Self.configuration(key))
        let otherName = try other.blobs.put(Data("first".utf8))
        try other.close()
        #expect(otherName != first, "another store's data key names the same bytes otherwise")
        try Data(contentsOf: URL(fileURLWithPath: directory.child("b") + "/blobs/" + otherName.dropFirst(5))).write(to: firstURL)
        #expect { _ = try store.blobs.data(for: first) } throws: { ($0 as? SatchelError)?.code == .corruption }
        try original.write(to: firstURL)
        #expect(try store.blobs.data(for: first) == Data("first".utf8))
    }

    /// A frame cut short is where a log ends (a crash leaves one): a frame whose length was made
    /// to reach past the end must not pass for one, or every write after it is dropped unsaid.
    @Test("tamper-evident logs: a frame's length changed to reach past the end of the file is an error, not the log's end")
    func frameLengthChanged() throws {
        let directory = TemporaryDirectory()
        let key = try EncryptionKey.random()
        let path = directory.child("s")
        let (name, bytes) = try Self.largestLog(ofStoreAt: path, key: key, items: 20)
        // Format version 2 and flags 5 (tamper-evident, checked lengths): earlier builds refuse
        // the file as a later format.
        #expect(Array(bytes[8..<16]) == [2, 0, 0, 0, 5, 0, 0, 0])
        // The first frame's length, just after the header: it and its tag, 20 bytes, come first.
        let start = Sealing.fileHeaderSize
        let length = bytes[start..<(start + 4)].enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
        #expect(start + 20 + length + 16 < bytes.count, "more frames follow the first")
        for change in [bytes.count, 1 << 20] {
            var changed = bytes
            for i in 0..<4 { changed[start + i] = UInt8(truncatingIfNeeded: (length + change) >> (8 * i)) }
            let copy = directory.child("copy-\(change)")
            try FileManager.default.copyItem(atPath: path, toPath: copy)
            try changed.write(to: URL(fileURLWithPath: copy + "/" + name))
            #expect { _ = try Store(path: copy, configuration: Self.configuration(key)) } throws: { ($0 as? SatchelError)?.code == .corruption }
        }
    }

    @Test(
        "tamper-evident logs: a byte changed in the last frame, whole on the disk, is an error and repair reports the loss, as on a plain store (found by a black-box probe: the write was undone in silence)"
    )
    func lastFrameChanged() throws {
        let directory = TemporaryDirectory()
        let key = try EncryptionKey.random()
        let path = directory.child("s")
        let (name, bytes) = try Self.largestLog(ofStoreAt: path, key: key, items: 20)
        var changed = bytes
        changed[changed.count - 20] ^= 0x5A
        try changed.write(to: URL(fileURLWithPath: path + "/" + name))
        #expect { _ = try Store(path: path, configuration: Self.configuration(key)) } throws: { ($0 as? SatchelError)?.code == .corruption }
        let report = try Store.repair(path: path, configuration: Self.configuration(key))
        #expect(report.logsDamaged.map(\.partition) == [.user], "the lost write is reported")
        // A frame cut short (a crash while it was written) is still the log's end.
        let cut = directory.child("cut")
        let (cutName, cutBytes) = try Self.largestLog(ofStoreAt: cut, key: key, items: 20)
        try Data(cutBytes.dropLast(7)).write(to: URL(fileURLWithPath: cut + "/" + cutName))
        let store = try Store(path: cut, configuration: Self.configuration(key))
        #expect(try store.verify().isHealthy)
        try store.close()
    }

    @Test(
        "tamper-evident logs: repair drops a frame that fails its authentication, as a plain store drops a damaged block, and keeps the whole frames after it (a black-box probe: every write after the frame was lost)"
    )
    func damagedFrameKeepsTheRest() throws {
        let directory = TemporaryDirectory()
        let key = try EncryptionKey.random()
        let path = directory.child("s")
        let items = 2000
        var configuration = Self.configuration(key)
        configuration.writeBufferSize = 8 << 20  // the whole log kept
        do {
            let store = try Store(path: path, configuration: configuration)
            let pad = JSONValue.string(String(repeating: "x", count: 400))
            // Some 900 KB of log, in frames of a few writes each, over many 32 KiB blocks.
            for i in 0..<items { _ = try store.model("Item").put(["object": .string("item-\(i)"), "pad": pad]) }
            try store.close()
        }
        let (name, bytes) = try #require(
            try Self.allBytes(under: path).filter { $0.0.hasPrefix("user/") && $0.0.hasSuffix(".log") }.max { $0.1.count < $1.1.count })
        #expect(bytes.count > 300_000, "\(bytes.count) bytes of log")
        // The frames: a length, its tag, the sealed bytes, their tag. One byte changed in the
        // sealed bytes of the frame at the log's middle (its length still whole).
        var start = Sealing.fileHeaderSize
        var changed = bytes
        while start < bytes.count {
            let length = bytes[start..<(start + 4)].enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
            if start > bytes.count / 2 {
                changed[start + 20 + length / 2] ^= 0x10
                break
            }
            start += 20 + length + 16
        }
        #expect(changed != bytes)
        try changed.write(to: URL(fileURLWithPath: path + "/" + name))
        let report = try Store.repair(path: path, configuration: configuration)
        #expect(report.logsDamaged.map(\.partition) == [.user], "the lost writes are reported")
        let store = try Store(path: path, configuration: configuration)
        defer { try? store.close() }
        let kept = try store.model("Item").count()
        // What a damaged frame takes, with the rest of the 32 KiB block it ends in: a few
        // dozen writes, not the half of them after it.
        #expect(kept >= items * 9 / 10 && kept < items, "\(kept) of \(items) kept")
        #expect(try store.model("Item").find("item-\(items - 1)") != nil, "the last write, whole, is kept")
        #expect(try store.verify().isHealthy)
    }

    @Test(
        "a file header whose flags are unknown or disagree with its version is .corruption that says so; one without tamper evidence in a store with it says that"
    )
    func headerFlags() throws {
        let directory = TemporaryDirectory()
        let key = try EncryptionKey.random()
        let path = directory.child("s")
        let (name, bytes) = try Self.largestLog(ofStoreAt: path, key: key, items: 5)
        #expect(Array(bytes[8..<16]) == [2, 0, 0, 0, 5, 0, 0, 0])
        // An unknown bit; chunked with checked lengths; checked lengths in a version-1 header;
        // no tamper evidence in a store whose files all have it.
        let cases: [(version: UInt8, flags: UInt8, says: String)] = [
            (2, 5 | 0x40, "flags are unknown or disagree"), (2, 7, "flags are unknown or disagree"), (1, 5, "flags are unknown or disagree"),
            (1, 0, "not tamper-evident, in a store whose files all are"),
        ]
        for (n, (version, flags, says)) in cases.enumerated() {
            var changed = bytes
            changed[8] = version
            changed[12] = flags
            let copy = directory.child("copy-\(n)")
            try FileManager.default.copyItem(atPath: path, toPath: copy)
            try changed.write(to: URL(fileURLWithPath: copy + "/" + name))
            #expect {
                _ = try Store(path: copy, configuration: Self.configuration(key))
            } throws: { error in
                (error as? SatchelError)?.code == .corruption && "\(error)".contains(says)
            }
        }
    }

    @Test("tamper-evident files: a byte changed in a table is an error or ignored, never changed data; in a log before its last write, an error")
    func tamperEvidence() throws {
        let directory = TemporaryDirectory()
        let key = try EncryptionKey.random()
        let original = directory.child("original")
        try Self.fill(original, key: key)
        // Writes after the compaction: a log with several frames.
        do {
            let store = try Store(path: original, configuration: Self.configuration(key))
            for i in 0..<20 { _ = try store.model("Item").update("item-\(i)", with: ["n": .int(-1)]) }
            try store.close()
        }
        func everything(_ path: String) throws -> [String: JSONObject] {
            let store = try Store(path: path, configuration: Self.configuration(key))
            defer { try? store.close() }
            let report = try store.verify()
            guard report.isHealthy else { throw SatchelError(.corruption, "check: \(report.problems.first ?? "")") }
            return Dictionary(uniqueKeysWithValues: try store.model("Item").findAll().map { ($0.id, $0.attributes) })
        }
        let files = try Self.allBytes(under: original)
        // Read from a copy: opening recovers the log into a table.
        try FileManager.default.copyItem(atPath: original, toPath: directory.child("unchanged"))
        let expected = try everything(directory.child("unchanged"))
        #expect(expected.count == 2001)
        let table = try #require(files.first { $0.0.hasPrefix("user/") && $0.0.hasSuffix(".ldb") })
        let log = try #require(files.first { $0.0.hasPrefix("user/") && $0.0.hasSuffix(".log") && $0.1.count > 4096 })
        var rng = SplitMix64(seed: 11)
        for (name, bytes) in [table, log] {
            for trial in 0..<5 {
                let copy = directory.child("\(name.replacingOccurrences(of: "/", with: "-"))-\(trial)")
                try FileManager.default.copyItem(atPath: original, toPath: copy)
                var changed = bytes
                // A byte past the header, before the log's last write.
                let position = Int.random(in: Sealing.fileHeaderSize..<(changed.count - 600), using: &rng)
                changed[position] ^= UInt8.random(in: 1...255, using: &rng)
                try changed.write(to: URL(fileURLWithPath: copy + "/" + name))
                // Either an error, or the very data written (a change in a part LevelDB only
                // reads to speed reads up, a table's filter, is ignored with it): never other data.
                do {
                    let read = try everything(copy)
                    #expect(read == expected, "\(name) changed at \(position) and read with other data")
                    #expect(name.hasSuffix(".ldb"), "\(name) changed at \(position) and opened without an error")
                } catch let error as SatchelError {
                    #expect(error.code == .corruption, "\(name) at \(position): \(error)")
                }
            }
        }

        // The same change in a store encrypted without tamper evidence: the record's checksum
        // fails, and the open that replays the log refuses (it dropped the write and opened
        // before paranoid checks ran on every replay).
        var plainCTR = Self.configuration(key)
        plainCTR.tamperEvidence = false
        let weak = directory.child("weak")
        do {
            let store = try Store(path: weak, configuration: plainCTR)
            for i in 0..<20 { _ = try store.model("Item").put(["object": .string("item-\(i)"), "n": .int(Int64(i))]) }
            try store.close()
        }
        let weakLog = try #require(try Self.allBytes(under: weak).first { $0.0.hasPrefix("user/") && $0.0.hasSuffix(".log") })
        var changed = weakLog.1
        changed[Sealing.fileHeaderSize + 100] ^= 0x40
        try changed.write(to: URL(fileURLWithPath: weak + "/" + weakLog.0))
        #expect {
            _ = try Store(path: weak, configuration: plainCTR)
        } throws: { error in
            (error as? SatchelError)?.code == .corruption && "\(error)".contains("repair")
        }
    }

    @Test("the file header parser: every length and byte of a header gives an answer, never a crash")
    func headerParser() throws {
        var rng = SplitMix64(seed: 7)
        var header = Array("SatchEnc".utf8) + [1, 0, 0, 0] + [UInt8](repeating: 0, count: 52)
        #expect(Sealing.fileHeader(header) == .encrypted(keyID: [UInt8](repeating: 0, count: 16)))
        #expect(Sealing.fileHeader(Array(header.prefix(63))) == .truncated)
        #expect(Sealing.fileHeader(Array("MANIFEST".utf8)) == .notEncrypted)
        header[8] = 2  // a framed file with checked lengths
        #expect(Sealing.fileHeader(header) == .encrypted(keyID: [UInt8](repeating: 0, count: 16)))
        header[8] = 3
        #expect(Sealing.fileHeader(header) == .laterFormat)
        for _ in 0..<10_000 {
            let count = Int.random(in: 0...80, using: &rng)
            let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
            _ = Sealing.fileHeader(bytes)
            let keyFile = try? KeyFile(bytes: bytes, store: "x")
            #expect(keyFile == nil || bytes.count == KeyFile.size)
        }
    }
}
