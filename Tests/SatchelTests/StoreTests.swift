import Foundation
import SatchelTestSupport
import Testing

@testable import Satchel

func expectError(_ code: SatchelError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) {
    do {
        try body()
        Issue.record("expected a \(code) error, got success", sourceLocation: sourceLocation)
    } catch let error as SatchelError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected a SatchelError, got \(error)", sourceLocation: sourceLocation)
    }
}

/// Every key and value of every partition, for "the store is unchanged" checks.
func dump(_ store: Store) throws -> [[UInt8]: [UInt8]] {
    var all: [[UInt8]: [UInt8]] = [:]
    for partition in Partition.allCases {
        let iterator = try store.database(partition).makeIterator()
        iterator.seekToFirst()
        while iterator.isValid {
            all[[UInt8(partition.rawValue.utf8.first!)] + iterator.key] = iterator.value
            iterator.next()
        }
        try iterator.checkError()
    }
    return all
}

@Suite("Store and models")
struct StoreTests {
    @Test("a model's bytes on disk count its index entries (a black-box probe: four indexes storing copies were counted nowhere)")
    func bytesCountIndexes() throws {
        try withTemporaryStore { store in
            let plain = try store.model("Plain")
            let indexed = try store.model("Indexed")
            for model in [plain, indexed] {
                try store.bulkUpdate { tx in
                    for i in 0..<2_000 {
                        try tx.put(
                            ["object": .string("o\(i)"), "name": .string("name \(i) " + String(repeating: "x", count: 40)), "n": .int(Int64(i))],
                            in: model)
                    }
                }
            }
            for field in ["name", "n"] { try indexed.createIndex(IndexDefinition(Field(field))) }
            try store.compact()
            let without = try plain.statistics().approximateBytes
            let with = try indexed.statistics().approximateBytes
            #expect(without > 0 && 2 * with > 3 * without, "\(without) \(with)")
        }
    }

    @Test("create, find, update, save, delete")
    func crud() throws {
        try withTemporaryStore { store in
            let products = try store.model("Product")
            let widget = try products.create(["name": "Widget", "price": 9.5, "tags": ["a", "b"]])
            #expect(widget.id.count == 26)
            #expect(try products.find(widget.id) == widget)
            #expect(try products.find("nope") == nil)

            let updated = try products.update(widget.id, with: ["price": 12, "color": "red"])
            #expect(updated?["price"] == 12)
            #expect(try products.find(widget.id)?.attributes == ["name": "Widget", "price": 12, "tags": ["a", "b"], "color": "red"])

            let saved = try products.save(Object(id: widget.id, attributes: ["name": "Widget 2"]))
            #expect(saved?.attributes == ["name": "Widget 2"])
            #expect(try products.find(widget.id)?.attributes == ["name": "Widget 2"])

            #expect(try products.delete(widget.id))
            #expect(try products.delete(widget.id) == false)
            #expect(try products.find(widget.id) == nil)
            #expect(try products.count() == 0)
        }
    }

    @Test("a store's directory, its partitions and its blob files are the owner's alone; a store made by an older version is narrowed on open")
    func ownerOnly() throws {
        func mode(_ path: String) throws -> Int { try #require(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) }
        let directory = TemporaryDirectory()
        let path = directory.child("store")
        let store = try Store(path: path)
        let photo = try store.blobs.put(Data("bytes".utf8))
        // `app` and `local` are made when a model is first defined there.
        _ = try store.register(ModelDefinition(name: "Shared", partition: .app))
        _ = try store.register(ModelDefinition(name: "Setting", partition: .local))
        #expect(try mode(path) == 0o700)
        for partition in Partition.allCases { #expect(try mode(path + "/" + partition.rawValue) == 0o700, "\(partition)") }
        #expect(try mode(store.blobs.directory.path) == 0o700)
        #expect(try mode(try #require(store.blobs.url(for: photo)).path) == 0o600)
        try store.close()
        // As an older version left it: everyone may read the partitions.
        for partition in Partition.allCases {
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path + "/" + partition.rawValue)
        }
        try Store(path: path).close()
        for partition in Partition.allCases { #expect(try mode(path + "/" + partition.rawValue) == 0o700, "\(partition)") }
    }

    @Test(
        "forEach reads a large model ahead on a second thread: every object in id order, as findAll gives them, on one view; stopped by an error, the store closes",
        arguments: [100, Model.readAheadObjects + 1000])
    func forEachVisitsAll(count: Int) throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("s"))
        let items = try store.model("Item")
        // Values long enough that the read-ahead hands over several chunks.
        let padding = String(repeating: "x", count: 200)
        try store.bulkUpdate { tx in
            for i in 0..<count { _ = try tx.create(["object": .string("i\(i)"), "n": .int(Int64(i)), "pad": .string(padding)], in: items) }
        }
        var visited: [Object] = []
        try items.forEach { object in
            // Writes during the scan stay invisible to it.
            if visited.count == 10 { _ = try items.create(["object": "zzz", "n": 1]) }
            visited.append(object)
        }
        #expect(visited.count == count)
        #expect(visited.map(\.id) == visited.map(\.id).sorted())
        #expect(visited == (try items.findAll()).filter { $0.id != "zzz" })
        let numbers = Set(
            visited.compactMap { object -> Int64? in
                if case .int(let n)? = object.attributes["n"] { return n }
                return nil
            })
        #expect(numbers == Set(0..<Int64(count)))

        // A scan that stops part-way (its body throws) leaves nothing using the store.
        struct Stop: Error {}
        var seen = 0
        #expect(throws: Stop.self) {
            try items.forEach { _ in
                seen += 1
                if seen == count / 2 { throw Stop() }
            }
        }
        #expect(seen == count / 2)
        try store.close()
    }

    @Test(
        "a query over a whole large model reads ahead: the objects forEach gives, filtered, counted, exported, sorted; a cursor dropped part-way lets the store close"
    )
    func cursorReadsAhead() throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("s"))
        let items = try store.model("Item")
        let count = Model.readAheadObjects + 1500
        try store.bulkUpdate { tx in
            for i in 0..<count {
                let attributes: JSONObject = [
                    "object": .string("i\(i)"), "n": .int(Int64(i)), "parity": .string(i % 2 == 0 ? "even" : "odd"),
                    "pad": .string(String(repeating: "z", count: 150)),
                ]
                _ = try tx.create(attributes, in: items)
            }
        }
        var scanned: [Object] = []
        try items.forEach { scanned.append($0) }
        #expect(scanned.count == count)
        #expect(try items.findAll() == scanned)
        let even = scanned.filter { $0.attributes["parity"] == .string("even") }
        #expect(try items.findAll(Query(where: ["parity": "even"])) == even)
        #expect(try items.count(where: ["parity": "even"]) == even.count)
        #expect(try items.count(where: [:]) == count)
        var lines = 0
        #expect(try items.export { data in lines += data.split(separator: UInt8(ascii: "\n")).count } == count)
        #expect(lines == count)
        // Sorted in memory, and in reverse id order (which reads in place).
        let byNumber = try items.findAll(Query(order: [.descending("n")]))
        #expect(byNumber.map(\.id) == (0..<count).reversed().map { "i\($0)" })
        #expect(try items.findAll(Query(order: [.descending("object")])) == scanned.reversed())
        // A cursor dropped part-way, its thread reading ahead, holds nothing once gone.
        do {
            let cursor = try items.cursor(Query())
            for _ in 0..<10 { _ = try cursor.next() }
            #expect(try cursor.next() == scanned[10])
        }
        try store.close()
    }

    @Test("a scan read ahead over a damaged table, and a compaction, throw a corruption error, and the store still closes")
    func forEachOverDamage() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        let count = Model.readAheadObjects * 2
        do {
            let store = try Store(path: path)
            let items = try store.model("Item")
            try store.bulkUpdate { tx in
                for i in 0..<count { _ = try tx.create(["object": .string("i\(i)"), "pad": .string(String(repeating: "y", count: 300))], in: items) }
            }
            try store.close()
        }
        let table = try #require(StoreDamage.files(path, suffix: ".ldb").max { StoreDamage.size($0) < StoreDamage.size($1) })
        try StoreDamage.flip(table, at: StoreDamage.size(table) / 2, count: 64)
        let store = try Store(path: path)
        var visited = 0
        expectError(.corruption) { try store.model("Item").forEach { _ in visited += 1 } }
        #expect(visited < count)
        // A compaction that meets the damage (the table merged with a newer write within its
        // keys, far from the damaged block) fails, never says done (found by a black-box probe).
        _ = try store.model("Item").create(["object": "i0-new", "n": 1])
        expectError(.corruption) { try store.compact() }
        try? store.close()
    }

    @Test("a given object id is kept; a duplicate create is refused")
    func givenIDs() throws {
        try withTemporaryStore { store in
            let products = try store.model("Product")
            let p = try products.create(["object": "p-1", "name": "A"])
            #expect(p.id == "p-1")
            #expect(p.attributes["object"] == nil)
            #expect(try products.find("p-1")?.json == ["object": "p-1", "name": "A"])
            expectError(.alreadyExists) { try products.create(["object": "p-1", "name": "B"]) }
            expectError(.invalidObject) { try products.create(["object": 5, "name": "B"]) }
            expectError(.invalidObject) { try products.update("p-1", with: ["object": "p-2"]) }
            expectError(.notFound) { try products.update("p-2", with: ["name": "x"]) }
            #expect(try products.find("p-1")?["name"] == "A")
        }
    }

    @Test("put replaces the object with the given id, or creates one with a new id")
    func put() throws {
        try withTemporaryStore { store in
            let products = try store.model("Product")
            let created = try #require(try products.put(["name": "A", "gone": .null]))
            #expect(created.attributes == ["name": "A"])
            #expect(try products.put(["object": .string(created.id), "price": 2])?.attributes == ["price": 2])  // whole, not merged
            #expect(try products.put(["object": "p-9", "name": "B"])?.id == "p-9")  // created when missing
            #expect(try products.put(["object": "p-9", "name": .null]) == nil)  // the null rule deletes it
            #expect(try products.find("p-9") == nil)
            #expect(try products.put(["object": "ghost", "a": .null]) == nil)  // nothing to create
            expectError(.invalidObject) { try products.put(["object": 5, "name": "B"]) }
            expectError(.invalidObject) { try products.put(["a": .null]) }
            #expect(try products.findAll().map(\.json) == [["object": .string(created.id), "price": 2] as JSONObject])
            #expect(try products.pendingChanges().map(\.kind) == [.create])
            #expect(try store.verify().problems == [])
        }
    }

    @Test("generated ids are unique and sort in creation order")
    func idOrder() throws {
        let ids = (0..<10_000).map { _ in ObjectID.generate() }
        #expect(Set(ids).count == ids.count)
        #expect(ids == ids.sorted())
        #expect(ids.allSatisfy { $0.utf8.count == 26 })
    }

    @Test("null removes an attribute; no attributes left deletes the object")
    func nullRule() throws {
        try withTemporaryStore { store in
            let products = try store.model("Product")
            let p = try products.create(["name": "Widget", "price": 1, "gone": .null])
            #expect(p.attributes == ["name": "Widget", "price": 1])
            #expect(try products.update(p.id, with: ["price": .null])?.attributes == ["name": "Widget"])
            #expect(try products.update(p.id, with: ["name": .null]) == nil)
            #expect(try products.find(p.id) == nil)
            #expect(try products.count() == 0)

            let q = try products.create(["name": "Q"])
            #expect(try products.save(Object(id: q.id, attributes: ["name": .null])) == nil)
            #expect(try products.find(q.id) == nil)
            // Saving nothing but nulls for an id that does not exist creates nothing.
            #expect(try products.save(Object(id: "ghost", attributes: ["a": .null])) == nil)
            #expect(try products.find("ghost") == nil)
            expectError(.invalidObject) { try products.create(["a": .null]) }
            expectError(.invalidObject) { try products.create([:]) }
        }
    }

    @Test("findAll, findFirst and count with equality conditions, by scan")
    func equalityQueries() throws {
        try withTemporaryStore { store in
            let products = try store.model("Product")
            for i in 0..<30 {
                try products.create([
                    "object": .string("p\(i < 10 ? "0" : "")\(i)"), "brand": i % 3 == 0 ? "Acme" : "Other", "price": .int(Int64(i % 5)),
                ])
            }
            let acme = try products.findAll(where: ["brand": "Acme"])
            #expect(acme.count == 10)
            #expect(acme.map(\.id) == acme.map(\.id).sorted())
            #expect(try products.findAll(where: ["brand": "Acme", "price": 0.0]).map(\.id) == ["p00", "p15"])
            #expect(try products.findFirst(where: ["brand": "Other"])?.id == "p01")
            #expect(try products.findFirst(where: ["brand": "None"]) == nil)
            #expect(try products.findAll(where: ["brand": .null]).isEmpty)
            #expect(try products.findAll(where: ["object": "p07"]).map(\.id) == ["p07"])
            #expect(try products.count() == 30)
            #expect(try products.count(where: ["price": 4]) == 6)
            #expect(try products.findAll().count == 30)
            #expect(try products.delete(where: ["brand": "Acme"]) == 10)
            #expect(try products.count() == 20)
            #expect(try products.findAll(where: ["brand": "Acme"]).isEmpty)
        }
    }

    @Test("async reads and writes run on the stores' I/O queue, off the concurrency pool; a @MainActor caller awaits them")
    @MainActor
    func asyncAccess() async throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        defer { try? store.close() }
        let products = try store.model("Product")
        let wroteOnQueue = try await store.bulkUpdate { tx in
            try tx.create(["object": "a", "n": 1], in: products)
            try tx.create(["object": "b", "n": 2], in: products)
            return Store.isOnIOQueue
        }
        #expect(wroteOnQueue)
        let (ones, readOnQueue) = try await store.read { snapshot in (try snapshot.count(where: Field("n") == 1, in: products), Store.isOnIOQueue) }
        #expect(ones == 1 && readOnQueue)
        #expect(!Store.isOnIOQueue, "the caller stays where it was")
        // All or nothing, as the synchronous form.
        await #expect(throws: SatchelError.self) {
            try await store.bulkUpdate { tx in
                try tx.create(["object": "c", "n": 3], in: products)
                try tx.create(["object": "a", "n": 9], in: products)  // exists: the transaction fails
            }
        }
        #expect(try products.count() == 2)
    }

    @Test("attribute choices (picklists, dependent ones included) refuse a local write of a value they do not allow, before anything is written")
    func choices() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("store")
        var definition = ModelDefinition(name: "Account")
        definition.choices = [
            "Industry": AttributeChoices(values: ["Energy", "Retail"]),
            "Tier": AttributeChoices(
                values: ["Gold", "Silver", "Bronze"], controller: "Industry", validFor: ["Energy": ["Gold", "Silver"], "Retail": ["Bronze"]]),
            "Discount": AttributeChoices(
                values: ["None", "Low"], restricted: false, controller: "Active", validFor: ["false": ["None"], "true": ["Low"]]),
        ]
        do {
            let store = try Store(path: path)
            let accounts = try store.register(definition)
            try accounts.create(["object": "a1", "Industry": "Energy", "Tier": "Gold", "Active": true, "Discount": "Low"])
            for (changes, fragment) in [
                (["Industry": "Mining"] as JSONObject, "'Mining' is not a value of 'Industry'"),
                (["Tier": "Bronze"], "'Bronze' is not valid for 'Tier' of model 'Account' while 'Industry' is \"Energy\" (valid: Gold, Silver)"),
                (["Industry": "Retail"], "'Gold' is not valid for 'Tier'"),
                (["Active": false], "'Low' is not valid for 'Discount'"),
                (["Industry": 3], "a string"),
            ] {
                do {
                    try accounts.update("a1", with: changes)
                    Issue.record("\(changes) was accepted")
                } catch let error as SatchelError {
                    #expect(error.code == .schemaViolation && error.message.contains(fragment), "\(error.message)")
                }
            }
            #expect(try accounts.find("a1")?.attributes == ["Industry": "Energy", "Tier": "Gold", "Active": true, "Discount": "Low"])
            #expect(try accounts.pendingChanges().count == 1, "nothing refused was queued")
            // Both changed together: valid.
            try accounts.update("a1", with: ["Industry": "Retail", "Tier": "Bronze"])
            try store.close()
        }
        let store = try Store(path: path)
        defer { try? store.close() }
        #expect(try store.model("Account").definition == definition, "choices persist")
    }

    @Test("model definitions, objects and statistics persist across reopen")
    func reopen() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("store")
        var expected: [Object] = []
        do {
            let store = try Store(path: path)
            try store.register(ModelDefinition(name: "Setting", partition: .local))
            try store.register(
                ModelDefinition(name: "Price", kind: .fixedSchema(["sku": .string, "amount": .number]), partition: .app, syncType: .bulkOnly))
            let products = try store.model("Product")
            for i in 0..<100 { expected.append(try products.create(["i": .int(Int64(i)), "s": .string(String(repeating: "x", count: i))])) }
            try products.update(expected[0].id, with: ["i": .null, "z": 1.5])
            expected[0] = try #require(try products.find(expected[0].id))
            try store.model("Setting").create(["object": "theme", "value": "dark"])
            try store.close()
        }
        let store = try Store(path: path)
        defer { try? store.close() }
        #expect(store.models.map(\.name) == ["Price", "Product", "Setting"])
        #expect(try store.model("Setting").definition.partition == .local)
        #expect(
            try store.model("Price").definition
                == ModelDefinition(name: "Price", kind: .fixedSchema(["sku": .string, "amount": .number]), partition: .app, syncType: .bulkOnly))
        let products = try store.model("Product")
        #expect(try products.findAll() == expected.sorted { $0.id < $1.id })
        #expect(try products.count() == 100)
        #expect(try products.pendingChanges().count == 100)
        #expect(try store.model("Setting").find("theme")?["value"] == "dark")
    }

    @Test("fixed-schema models validate writes")
    func fixedSchema() throws {
        try withTemporaryStore { store in
            let prices = try store.register(ModelDefinition(name: "Price", kind: .fixedSchema(["sku": .string, "amount": .number, "qty": .integer])))
            let p = try prices.create(["sku": "A1", "amount": 9.5, "qty": 3])
            let before = try dump(store)
            expectError(.schemaViolation) { try prices.create(["sku": "A2", "color": "red"]) }
            expectError(.schemaViolation) { try prices.create(["sku": 5]) }
            expectError(.schemaViolation) { try prices.update(p.id, with: ["qty": 1.5]) }
            expectError(.schemaViolation) { try prices.save(Object(id: p.id, attributes: ["amount": "cheap"])) }
            #expect(try dump(store) == before)
            #expect(try prices.update(p.id, with: ["qty": 4.0, "amount": .null])?.attributes == ["sku": "A1", "qty": 4.0])
            expectError(.invalidName) { try store.register(ModelDefinition(name: "Bad", kind: .fixedSchema(["object": .string]))) }
        }
    }

    @Test("a model's partition changes only while it is empty")
    func partitionChange() throws {
        try withTemporaryStore { store in
            let notes = try store.model("Note")
            try store.register(ModelDefinition(name: "Note", partition: .local))
            #expect(try notes.definition.partition == .local)
            try notes.create(["text": "hi"])
            expectError(.modelConflict) { try store.register(ModelDefinition(name: "Note", partition: .user)) }
            #expect(try notes.definition.partition == .local)
            try store.register(ModelDefinition(name: "Note", partition: .local, syncType: .none))
            #expect(try notes.definition.syncType == .none)
            #expect(try notes.count() == 1)
        }
    }

    @Test("an empty model name is a model of its own, as any name is: it round-trips, across a reopen, beside a model named by a NUL")
    func emptyModelName() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("store")
        do {
            let store = try Store(path: path)
            try store.model("").create(["object": "a", "n": 1])
            try store.model("\u{0}").create(["object": "a", "n": 2])
            try store.model("").createIndex(IndexDefinition("n"))
            try store.close()
        }
        let store = try Store(path: path)
        defer { try? store.close() }
        #expect(store.models.map(\.name).sorted() == ["", "\u{0}"])
        #expect(try store.model("").find("a")?["n"] == 1)
        #expect(try store.model("\u{0}").find("a")?["n"] == 2)
        #expect(try store.model("").findAll(Query(where: Field("n") == 1)).map(\.id) == ["a"])
        #expect(try store.verify().problems.isEmpty)
    }

    @Test("a second open of the same store is refused as locked")
    func locked() throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("s"))
        expectError(.locked) { _ = try Store(path: directory.child("s")) }
        try store.close()
        let again = try Store(path: directory.child("s"))
        try again.close()
    }

    @Test("closing refuses while an iterator is alive; operations after close fail cleanly")
    func closeRules() throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("s"))
        let products = try store.model("P")
        try products.create(["a": 1])
        do {
            let iterator = try store.database(.user).makeIterator()
            expectError(.busy) { try store.close() }
            _ = iterator
        }
        try store.close()
        try store.close()  // idempotent
        expectError(.closed) { _ = try products.find("x") }
        expectError(.closed) { try products.create(["a": 2]) }
    }

    @Test("a store missing with creation off, or a file in its place, is a clear error")
    func missingStore() throws {
        let directory = TemporaryDirectory()
        var configuration = Store.Configuration()
        configuration.createIfMissing = false
        expectError(.storeMissing) { _ = try Store(path: directory.child("none"), configuration: configuration) }
        _ = FileManager.default.createFile(atPath: directory.child("file"), contents: Data("x".utf8))
        expectError(.invalidArgument) { _ = try Store(path: directory.child("file")) }
    }

    @Test("a store from a newer format is refused")
    func newerFormat() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        do {
            let store = try Store(path: path)
            var batch = LevelDBWriteBatch()
            batch.put(Keys.format, JSONValue.int(Keys.formatVersion + 1).jsonBytes)
            try store.database(.app).write(batch, sync: false)
            try store.close()
        }
        expectError(.unsupportedFormat) { _ = try Store(path: path) }
    }

    @Test("a damaged object is reported as corruption")
    func damagedDocument() throws {
        try withTemporaryStore { store in
            let products = try store.model("P")
            let p = try products.create(["a": 1])
            var batch = LevelDBWriteBatch()
            batch.put(Keys.object("P", p.id), Array("{\"a\":".utf8))
            try store.database(.user).write(batch, sync: false)
            expectError(.corruption) { _ = try products.find(p.id) }
            expectError(.corruption) { _ = try products.findAll() }
        }
    }

    @Test("a damaged version in an object's record: cut short, it is corruption; undecodable, check reports it and the attributes still read")
    func damagedVersion() throws {
        try withTemporaryStore { store in
            let products = try store.model("P")
            try store.bulkUpdate { tx in
                _ = try tx.writeServerObject(products, "p1", ["a": 1], replacing: nil, version: .some(7))
                _ = try tx.writeServerObject(products, "p2", ["a": 2], replacing: nil, version: .some(8))
            }
            #expect(try store.verify().problems == [])
            var batch = LevelDBWriteBatch()
            batch.put(Keys.object("P", "p1"), [StoredObject.versionMark] + Array("7{\"a\":1}".utf8))  // no end to the version
            batch.put(Keys.object("P", "p2"), [StoredObject.versionMark] + Array("[8".utf8) + [StoredObject.versionEnd] + Array("{\"a\":2}".utf8))
            try store.database(.user).write(batch, sync: false)
            expectError(.corruption) { _ = try products.find("p1") }
            expectError(.corruption) { _ = try store.read { try $0.objectSyncState(products, "p2") } }
            #expect(try products.find("p2")?.attributes == ["a": 2])
            let problems = try store.verify().problems
            #expect(problems.contains { $0.contains("'p1'") && $0.contains("version") })
            #expect(problems.contains { $0.contains("'p2'") && $0.contains("version") })
        }
    }

    @Test("reads see one consistent state while writers run")
    func concurrentReadsAndWrites() async throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("s"))
        let products = try store.model("P")
        try await store.bulkUpdate { tx in
            for i in 0..<200 { try tx.create(["object": .string("o\(i)"), "v": 0], in: products) }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for round in 1...50 {
                    // Every object gets the same value in one transaction.
                    try store.bulkUpdate { tx in
                        for i in 0..<200 { try tx.update("o\(i)", with: ["v": .int(Int64(round))], in: products) }
                    }
                }
            }
            for _ in 0..<2 {
                group.addTask {
                    for _ in 0..<50 {
                        let values = Set(try products.findAll().map { $0["v"]! })
                        #expect(values.count == 1, "a scan saw two transactions: \(values)")
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try products.findFirst(where: ["v": 50]) != nil)
        try store.close()
    }

    @Test("a directory that is not a store is refused before anything is written into it; an empty one only when not creating")
    func notAStore() throws {
        let directory = TemporaryDirectory()
        let other = directory.child("x")
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        try "hi".write(toFile: other + "/notes.txt", atomically: true, encoding: .utf8)
        expectError(.notAStore) { _ = try Store(path: other) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: other) == ["notes.txt"])
        let empty = directory.child("empty")
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        var configuration = Store.Configuration()
        configuration.createIfMissing = false
        expectError(.storeMissing) { _ = try Store(path: empty, configuration: configuration) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: empty).isEmpty)
        try Store(path: empty).close()
        // `app` and `local` are made when a model is first defined there.
        #expect(try FileManager.default.contentsOfDirectory(atPath: empty).sorted() == ["user"])
    }

    @Test("unregister removes an empty model with its indexes and sync state, and refuses one that holds anything")
    func unregister() throws {
        try withTemporaryStore { store in
            let empty = try store.model("Empty")
            try empty.createIndex(IndexDefinition(["a"]))
            let full = try store.model("Full")
            _ = try full.create(["a": 1])

            try store.unregister("Empty")
            #expect(store.existingModel("Empty") == nil)
            expectError(.modelConflict) { try store.unregister("Full") }
            expectError(.notFound) { try store.unregister("Empty") }
            #expect(try store.model("Empty").indexes.isEmpty, "registered afresh, without the old index")
            #expect(try store.verify().isHealthy)
        }
    }

    @Test("a handle kept across its model's unregistering and registering in another partition reads from the new one, and refuses a closed store")
    func handleAcrossCatalogChanges() throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("s"))
        let kept = try store.register(ModelDefinition(name: "Draft", partition: .user))
        let object = try kept.create(["title": "in user"])
        #expect(try kept.find(object.id)?["title"] == "in user")  // the handle has read its partition
        try kept.delete(object.id)
        try store.unregister("Draft")
        expectError(.notFound) { _ = try kept.find(object.id) }

        let local = try store.register(ModelDefinition(name: "Draft", partition: .local))
        try local.save(Object(id: object.id, attributes: ["title": "in local"]))
        #expect(try kept.find(object.id)?["title"] == "in local", "read from the partition the model is in now")
        #expect(try store.database(.user).get(Keys.object(prefix: Keys.objectPrefix("Draft"), object.id)) == nil)
        #expect(try store.database(.local).get(Keys.object(prefix: Keys.objectPrefix("Draft"), object.id)) != nil)

        try store.close()
        expectError(.closed) { _ = try kept.find(object.id) }
    }
}
