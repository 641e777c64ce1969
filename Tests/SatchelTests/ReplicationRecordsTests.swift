import SatchelTestSupport
import Testing

@testable import Satchel

/// The core's records for sync, written through the engine's `package` seam.
@Suite("Replication records")
struct ReplicationRecordsTests {
    @Test("server writes record no pending change, and keep indexes and counts right")
    func serverWritesRecordNoChange() throws {
        try withTemporaryStore { store in
            let model = try store.model("Product")
            try model.createIndex(IndexDefinition("brand"))
            let effects = try store.bulkUpdate { tx -> [Transaction.ObjectEffect] in
                [
                    try tx.writeServerObject(model, "p1", ["brand": "Acme", "price": 1]),
                    try tx.writeServerObject(model, "p1", ["brand": "Zenith", "price": 1]),
                    try tx.writeServerObject(model, "p1", ["brand": "Zenith", "price": 1]),
                    try tx.writeServerObject(model, "p2", ["brand": "Acme"]),
                    try tx.writeServerObject(model, "p2", ["brand": .null]),
                ]
            }
            #expect(effects == [.created, .updated, .unchanged, .created, .deleted])
            #expect(try model.pendingChanges() == [])
            #expect(try model.count() == 1)
            #expect(try model.findAll(where: ["brand": "Zenith"]).map(\.id) == ["p1"])
            #expect(try store.verify().problems == [])
        }
    }

    @Test("references to several renamed objects are rewritten in one pass, indexed or not", arguments: [false, true])
    func rewriteReferences(indexed: Bool) throws {
        try withTemporaryStore { store in
            let orders = try store.model("Order")
            if indexed { try orders.createIndex(IndexDefinition("customer")) }
            for (id, customer) in [("o1", "c1"), ("o2", "c2"), ("o3", "c3"), ("o4", "c1")] {
                try store.bulkUpdate { try $0.writeServerObject(orders, id, ["customer": .string(customer), "total": 1]) }
            }
            try orders.update("o1", with: ["customer": "c2"])  // a pending update naming a renamed id
            try orders.create(["object": "o5", "customer": "c1"])  // a pending create
            try store.bulkUpdate { tx in
                var records = try tx.objectSyncState(orders, "o4")
                records.inFlight = InFlightChange(kind: .update, attributes: ["customer": "c1"], baseVersion: nil)
                try tx.setObjectSyncState(orders, "o4", records)
                try tx.rewriteReferences(in: orders, attribute: "customer", renames: ["c1": "s1", "c2": "s2"])
            }
            let customers = Dictionary(uniqueKeysWithValues: try orders.findAll().map { ($0.id, $0["customer"]) })
            #expect(customers == ["o1": "s2", "o2": "s2", "o3": "c3", "o4": "s1", "o5": "s1"])
            let pending = Dictionary(uniqueKeysWithValues: try orders.pendingChanges().map { ($0.objectID, $0) })
            #expect(pending["o1"]?.attributes["customer"] == "s2")
            #expect(pending["o5"]?.kind == .create)
            #expect(try store.read { try $0.objectSyncState(orders, "o4") }.inFlight?.attributes["customer"] == "s1")
            #expect(try orders.findAll(where: ["customer": "c1"]).isEmpty)
            #expect(try store.verify().problems == [])
        }
    }

    @Test("an object's sync records are written together, keep the statistics right, and a snapshot sees them as they were")
    func syncRecordsTogether() throws {
        try withTemporaryStore { store in
            let model = try store.model("Product")
            try model.create(["object": "p1", "name": "a"])
            let before = try store.read { try $0.objectSyncState(model, "p1") }
            #expect(before.pending?.kind == .create)
            #expect(before.inFlight == nil && before.refusal == nil && before.version == nil)

            // Push: the pending create goes in flight, in one write.
            try store.bulkUpdate { tx in
                var records = try tx.objectSyncState(model, "p1")
                records.inFlight = InFlightChange(kind: .create, attributes: ["name": "a"], baseVersion: nil)
                records.pending = nil
                try tx.setObjectSyncState(model, "p1", records)
            }
            var statistics = try model.statistics()
            #expect((statistics.pendingCreates, statistics.inFlight, statistics.refusedChanges) == (0, 1, 0))

            // The server refuses it, while a reader holds a snapshot from before.
            try store.read { snapshot in
                try store.bulkUpdate { tx in
                    var records = try tx.objectSyncState(model, "p1")
                    records.inFlight = nil
                    records.refusal = RefusedChange(model: "Product", objectID: "p1", kind: .create, message: "no", attributes: ["name": "a"])
                    records.version = "v1"
                    try tx.setObjectSyncState(model, "p1", records)
                }
                let seen = try snapshot.objectSyncState(model, "p1")
                #expect(seen.inFlight?.kind == .create)
                #expect(seen.refusal == nil && seen.version == nil)
            }
            let after = try store.read { try $0.objectSyncState(model, "p1") }
            #expect(after.refusal?.message == "no")
            #expect(after.version == "v1")
            #expect(try store.read { try $0.objectSyncStates(of: model) }.map(\.id) == ["p1"])
            statistics = try model.statistics()
            #expect((statistics.pendingCreates, statistics.inFlight, statistics.refusedChanges) == (0, 0, 1))
            #expect(try store.verify().problems == [])
        }
    }

    @Test("every object's records, listed by id across pending changes, changes in flight and errors, inside a transaction too")
    func allRecordsInIDOrder() throws {
        try withTemporaryStore { store in
            let model = try store.model("Product")
            // Ids whose UTF-8 order is not their insertion order, sharing prefixes, beyond ASCII.
            let ids = ["b", "a", "ab", "é", "Z", "a b", "aa", "日本", "b0"]
            for id in ids { try model.create(["object": .string(id), "name": .string(id)]) }
            func inFlight(_ id: String) -> InFlightChange { InFlightChange(kind: .update, attributes: ["name": .string(id)], baseVersion: nil) }
            func error(_ id: String) -> RefusedChange { RefusedChange(model: "Product", objectID: id, kind: .update, message: "no", attributes: [:]) }
            try store.bulkUpdate { tx in
                for id in ["ab", "é", "Z"] {
                    var records = try tx.objectSyncState(model, id)
                    records.pending = nil
                    records.inFlight = inFlight(id)
                    records.version = .string("v-\(id)")
                    try tx.setObjectSyncState(model, id, records)
                }
                for id in ["a", "é", "b0"] {
                    var records = try tx.objectSyncState(model, id)
                    records.refusal = error(id)
                    try tx.setObjectSyncState(model, id, records)
                }
            }
            let expected = ids.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
            let listed = try store.read { try $0.objectSyncStates(of: model) }
            #expect(listed.map(\.id) == expected)
            let byID = Dictionary(uniqueKeysWithValues: listed.map { ($0.id, $0.records) })
            #expect(byID["é"]?.inFlight == inFlight("é") && byID["é"]?.refusal == error("é") && byID["é"]?.pending == nil)
            #expect(byID["a"]?.pending?.kind == .create && byID["a"]?.refusal == error("a") && byID["a"]?.inFlight == nil)
            #expect(byID["Z"]?.version == nil)  // versions are read only when asked for
            try store.bulkUpdate { tx in
                // The transaction's own writes are merged in order: a new pending change, one dropped.
                try tx.update("日本", with: ["n": 1], in: model)
                try tx.create(["object": "0", "name": "zero"], in: model)
                var records = try tx.objectSyncState(model, "b")
                records.pending = nil
                try tx.setObjectSyncState(model, "b", records)
                let seen = try tx.objectSyncStates(of: model, withVersions: true)
                #expect(seen.map(\.id) == ["0"] + expected.filter { $0 != "b" })
                #expect(seen.first { $0.id == "Z" }?.records.version == "v-Z")
                #expect(try tx.changesInFlight(of: model).map(\.id) == ["Z", "ab", "é"])
            }
        }
    }

    /// What the store holds under object `id`'s key of family `family` (`.object`: its record).
    private static func stored(_ store: Store, _ family: KeyFamily, _ model: String, _ id: String) throws -> [UInt8]? {
        try store.database(.user).get(family == .object ? Keys.object(model, id) : Keys.objectRecord(family, model, id))
    }

    @Test(
        "a server version rides in its object's record (a pulled object's), or in its version record (an object made here, or deleted): kept by local writes, read back either way"
    )
    func versionInTheObjectsRecord() throws {
        try withTemporaryStore { store in
            let model = try store.model("Product")
            try model.createIndex(IndexDefinition("brand"))
            // A pulled object and its version: one record.
            try store.bulkUpdate { tx in
                _ = try tx.writeServerObject(model, "p1", ["brand": "Acme", "price": 1], replacing: nil, version: .some(.int(7)))
            }
            #expect(try Self.stored(store, .version, "Product", "p1") == nil)
            #expect(
                try Self.stored(store, .object, "Product", "p1") == [0x01] + Array("7".utf8) + [0x00] + Array(#"{"brand":"Acme","price":1}"#.utf8))
            #expect(try store.read { try $0.objectSyncState(model, "p1") }.version == 7)
            #expect(try model.find("p1")?.attributes == ["brand": "Acme", "price": 1])
            #expect(try model.findAll(where: ["brand": "Acme"]).map(\.attributes) == [["brand": "Acme", "price": 1]])  // from the index's copy

            // Local writes keep it, in a later transaction and in the same one.
            try model.update("p1", with: ["price": 2])
            try store.bulkUpdate { tx in
                _ = try tx.update("p1", with: ["price": 3], in: model)
                _ = try tx.save(Object(id: "p1", attributes: ["brand": "Zenith", "price": 3]), in: model)
                #expect(try tx.objectSyncState(model, "p1").version == 7)
            }
            #expect(try store.read { try $0.objectSyncState(model, "p1") }.version == 7)
            #expect(try store.bulkUpdate { try $0.objectSyncStates(of: model, withVersions: true) }.first?.records.version == 7)

            // A local delete: the version stays the base of the delete to push.
            try model.delete("p1")
            #expect(try Self.stored(store, .version, "Product", "p1") == Array("7".utf8))
            #expect(try store.read { try $0.objectSyncState(model, "p1") }.version == 7)
            // Created again: it reads the version record still. A new version (its push's) lands
            // in the version record too: the object's record is not written again for it.
            try model.create(["object": "p1", "brand": "Acme"])
            #expect(try store.read { try $0.objectSyncState(model, "p1") }.version == 7)
            let made = try Self.stored(store, .object, "Product", "p1")
            try store.bulkUpdate { tx in
                var records = try tx.objectSyncState(model, "p1")
                records.version = "v8"
                try tx.setObjectSyncState(model, "p1", records)
            }
            #expect(try store.read { try $0.objectSyncState(model, "p1") }.version == "v8")
            #expect(try Self.stored(store, .object, "Product", "p1") == made)
            #expect(try Self.stored(store, .version, "Product", "p1") == Array(#""v8""#.utf8))
            // Sent back by the server with the same version and attributes: nothing is written.
            let echo = try store.bulkUpdate { tx in
                try tx.writeServerObject(model, "p1", ["brand": "Acme"], replacing: try tx.find("p1", in: model)?.attributes, version: .some("v8"))
            }
            #expect(try echo == .unchanged && Self.stored(store, .object, "Product", "p1") == made)
            // Changed by the server: its version rides in the record again, and shadows the
            // version record; a delete moves it back there.
            try store.bulkUpdate { tx in
                _ = try tx.writeServerObject(
                    model, "p1", ["brand": "Bolt"], replacing: try tx.find("p1", in: model)?.attributes, version: .some("v9"))
            }
            #expect(try Self.stored(store, .object, "Product", "p1")?.first == StoredObject.versionMark)
            #expect(try store.read { try $0.objectSyncState(model, "p1") }.version == "v9")
            try model.delete("p1")
            #expect(try Self.stored(store, .version, "Product", "p1") == Array(#""v9""#.utf8))
            try model.create(["object": "p1", "brand": "Acme"])
            try store.bulkUpdate { tx in
                var records = try tx.objectSyncState(model, "p1")
                records.version = "v8"
                try tx.setObjectSyncState(model, "p1", records)
            }
            #expect(try store.read { try $0.objectSyncState(model, "p1") }.version == "v8")
            // No version: neither the record nor a version record keeps one.
            try store.bulkUpdate { tx in
                var records = try tx.objectSyncState(model, "p1")
                records.version = nil
                try tx.setObjectSyncState(model, "p1", records)
            }
            #expect(try store.read { try $0.objectSyncState(model, "p1") }.version == nil)
            #expect(try Self.stored(store, .version, "Product", "p1") == nil)
            #expect(try Self.stored(store, .object, "Product", "p1")?.first == UInt8(ascii: "{"))

            // A server delete that says nothing of the version keeps it; one that clears it does not.
            try store.bulkUpdate { tx in
                _ = try tx.writeServerObject(model, "p2", ["brand": "Acme"], replacing: nil, version: .some("a"))
                _ = try tx.writeServerObject(model, "p3", ["brand": "Acme"], replacing: nil, version: .some("b"))
            }
            try store.bulkUpdate { tx in
                _ = try tx.writeServerObject(model, "p2", nil)
                _ = try tx.writeServerObject(model, "p3", nil, replacing: try tx.find("p3", in: model)?.attributes, version: .some(nil))
            }
            #expect(try store.read { try $0.objectSyncState(model, "p2") }.version == "a")
            #expect(try store.read { try $0.objectSyncState(model, "p3") }.version == nil)
            #expect(try Self.stored(store, .version, "Product", "p3") == nil)

            // The same object sent back with the same version writes nothing.
            try store.bulkUpdate { tx in
                _ = try tx.writeServerObject(model, "p4", ["brand": "Acme"], replacing: nil, version: .some(1))
            }
            let unchanged = try store.bulkUpdate { tx in
                try tx.writeServerObject(model, "p4", ["brand": "Acme"], replacing: try tx.find("p4", in: model)?.attributes, version: .some(1))
            }
            #expect(unchanged == .unchanged)
            // A renamed object takes its version along.
            try store.bulkUpdate { tx in _ = try tx.rename(model, from: "p4", to: "s4") }
            #expect(try store.read { try $0.objectSyncState(model, "s4") }.version == 1)
            #expect(try store.read { try $0.objectSyncState(model, "p4") }.version == nil)
            #expect(try store.verify().problems == [])

            // An index built over versioned records copies their attributes only.
            try store.bulkUpdate { tx in
                _ = try tx.writeServerObject(model, "p5", ["brand": "Acme", "price": 9], replacing: nil, version: .some("c"))
            }
            try model.createIndex(IndexDefinition("price"))
            #expect(try model.explain(Query(where: Field("price") == 9)).access == .index(IndexDefinition("price")))
            #expect(try model.findAll(Query(where: Field("price") == 9)).map(\.attributes) == [["brand": "Acme", "price": 9]])
            #expect(try store.verify().problems == [])
        }
    }

    @Test("a format-1 store (versions in version records) opens as format 2 with every version where it was")
    func formatOneStore() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        do {
            let store = try Store(path: path)
            let model = try store.model("Product")
            try store.bulkUpdate { tx in _ = try tx.writeServerObject(model, "p1", ["name": "a"]) }
            // What format 1 wrote: the version beside the object, and its marker.
            var batch = LevelDBWriteBatch()
            batch.put(Keys.objectRecord(.version, "Product", "p1"), Array("41".utf8))
            batch.put(Keys.format, JSONValue.int(1).jsonBytes)
            try store.database(.user).write(batch, sync: false)
            try store.close()
        }
        let store = try Store(path: path)
        defer { try? store.close() }
        #expect(try store.database(.user).get(Keys.format) == Array("2".utf8))
        let model = try store.model("Product")
        #expect(try store.read { try $0.objectSyncState(model, "p1") }.version == 41)
        try model.update("p1", with: ["name": "b"])
        #expect(try store.read { try $0.objectSyncState(model, "p1") }.version == 41)
        try store.bulkUpdate { tx in
            _ = try tx.writeServerObject(model, "p1", ["name": "c"], replacing: try tx.find("p1", in: model)?.attributes, version: .some(42))
        }
        #expect(try store.read { try $0.objectSyncState(model, "p1") }.version == 42)
        #expect(try store.verify().problems == [])
    }

    @Test(
        "reads in key order through iterators give what point reads give: ascending, with gaps, absent keys, backwards, shuffled, the transaction's own writes"
    )
    func readingInOrder() throws {
        try withTemporaryStore { store in
            let model = try store.register(ModelDefinition(name: "Item", syncType: .incremental))
            let ids = (0..<300).map { "i" + String(1000 + $0) }
            try store.bulkUpdate { tx in
                for (n, id) in ids.enumerated() where n % 2 == 0 {
                    // Every fourth from the server with a version, the others local creates.
                    if n % 4 == 0 {
                        try tx.writeServerObject(model, id, ["n": .int(Int64(n))], version: .int(Int64(n)))
                    } else {
                        _ = try tx.create(["object": .string(id), "n": .int(Int64(n))], in: model)
                    }
                }
            }
            var generator = SystemRandomNumberGenerator()
            let orders: [[String]] = [
                ids, ids.enumerated().filter { $0.offset % 37 == 0 }.map(\.element), ids.reversed(), ids.shuffled(using: &generator),
            ]
            try store.bulkUpdate { tx in
                // The transaction's own writes: an update, a delete, a create where none was.
                _ = try tx.update(ids[10], with: ["n": -1], in: model)
                _ = try tx.delete(ids[20], in: model)
                _ = try tx.create(["object": .string(ids[21]), "n": 21], in: model)
                struct Seen: Equatable {
                    var n: JSONValue?
                    var pending: PendingChange.Kind?
                    var version: JSONValue?
                }
                func readAll(_ order: [String]) throws -> [String: Seen] {
                    var seen: [String: Seen] = [:]
                    for id in order {
                        let records = try tx.objectSyncState(model, id)
                        seen[id] = Seen(n: try tx.find(id, in: model)?["n"], pending: records.pending?.kind, version: records.version)
                    }
                    return seen
                }
                let pointReads = try readAll(ids)
                #expect(pointReads[ids[0]] == Seen(n: 0, pending: nil, version: 0))
                #expect(pointReads[ids[1]] == Seen())
                #expect(pointReads[ids[2]] == Seen(n: 2, pending: .create))
                #expect(pointReads[ids[4]] == Seen(n: 4, version: 4))
                #expect(pointReads[ids[10]] == Seen(n: -1, pending: .create))
                #expect(pointReads[ids[20]] == Seen(pending: .delete, version: 20))
                #expect(pointReads[ids[21]] == Seen(n: 21, pending: .create))
                for order in orders {
                    let inOrder = try tx.readingInOrder(reads: .max) { try readAll(order) }
                    #expect(inOrder.count == order.count)
                    #expect(inOrder.allSatisfy { pointReads[$0.key] == $0.value })
                }
                // Nested: the outer readers serve both.
                let nested = try tx.readingInOrder(reads: .max) { try tx.readingInOrder(reads: .max) { try readAll(ids) } }
                #expect(nested == pointReads)
            }
            // The readers' iterators are gone with the block: the store closes (the helper's
            // close would throw `busy`).
        }
    }

    @Test("a pending create's stored form, recognised without parsing, decodes as the parser reads it; other forms still parse")
    func pendingCreateForm() throws {
        let create = StoredChange(kind: .create, attributes: ["ignored": 1])
        #expect(create.encoded == Array(#"{"op":"create"}"#.utf8))
        for text in [#"{"op":"create"}"#, #"{ "op" : "create" }"#, #"{"attrs":{},"op":"create"}"#] {
            let decoded = try Array(text.utf8).withUnsafeBytes { try StoredChange(decoding: $0) }
            #expect(decoded == StoredChange(kind: .create, attributes: JSONObject()), "\(text)")
        }
        let update = StoredChange(kind: .update, attributes: ["price": 2], base: ["price": 1])
        #expect(try update.encoded.withUnsafeBytes { try StoredChange(decoding: $0) } == update)
        #expect(String(decoding: update.encoded, as: UTF8.self) == #"{"attrs":{"price":2},"op":"update","was":{"price":1}}"#)
        #expect(throws: SatchelError.self) { try Array(#"{"op":"creat"}"#.utf8).withUnsafeBytes { try StoredChange(decoding: $0) } }
    }

    @Test(
        "a change in flight read for finishing comes as the kind sent, unread, with the version; finished, it goes, and the pending and refused changes read for it as none stay"
    )
    func inFlightReadForFinishing() throws {
        let changes = [
            InFlightChange(kind: .create, attributes: ["name": "Widget", "tags": ["a", ["b": 1]]]),
            InFlightChange(kind: .update, attributes: ["price": 2, "gone": .null], baseVersion: .string("v7"), baseValues: ["price": 1]),
            InFlightChange(kind: .delete, attributes: ["name": "Widget"], baseVersion: 3),
        ]
        for change in changes {
            let bytes = change.json.jsonBytes
            #expect(try bytes.withUnsafeBytes { try InFlightChange(decoding: $0) } == change)
        }
        try withTemporaryStore { store in
            let model = try store.model("Product")
            _ = try model.put(["object": "p1", "name": "Widget"])
            let later = PendingChange(model: "Product", objectID: "p1", kind: .update, attributes: ["name": "Gadget"], baseValues: ["name": "Widget"])
            let refusal = RefusedChange(model: "Product", objectID: "p1", kind: .update, message: "no")
            try store.bulkUpdate { tx in
                try tx.setObjectSyncState(
                    model, "p1", ObjectSyncState(pending: later, inFlight: changes[1], refusal: refusal, version: "v7"),
                    replacing: try tx.objectSyncState(model, "p1"))
            }
            try store.bulkUpdate { tx in
                let before = try tx.objectSyncState(model, "p1", finishing: .update)
                #expect(before == ObjectSyncState(inFlight: InFlightChange(kind: .update, attributes: JSONObject()), version: "v7"))
                var records = before
                records.inFlight = nil
                records.version = "v8"
                try tx.setObjectSyncState(model, "p1", records, replacing: before)
            }
            #expect(try store.read { try $0.objectSyncState(model, "p1") } == ObjectSyncState(pending: later, refusal: refusal, version: "v8"))
            #expect(try store.verify().problems == [])
        }
        for text in [#"{"attrs":{"price":2,},"op":"update","state":"sent"}"#, #"{"attrs":{"price":2},"op":"updat","state":"sent"}"#, #"{"attrs":"#] {
            #expect(throws: SatchelError.self, "\(text)") {
                try Array(text.utf8).withUnsafeBytes { try InFlightChange(decoding: $0) }
            }
        }
    }
}
