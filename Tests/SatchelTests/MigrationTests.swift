import Foundation
import SatchelTestSupport
import Synchronization
import Testing

@testable import Satchel

@Suite("Migrations")
struct MigrationTests {
    struct Stop: Error {}

    /// Notes 0..<count: a title, a priority as text, and a legacy attribute on every third.
    static func notes(_ store: Store, count: Int, model name: String = "Note") throws -> Model {
        let model = try store.model(name)
        try store.bulkUpdate { tx in
            for i in 0..<count {
                var attributes: JSONObject = [
                    "object": .string(String(format: "n%05d", i)), "title": .string("Note \(i)"), "priority": .string("\(i % 5)"),
                ]
                if i % 3 == 0 { attributes["legacy"] = true }
                _ = try tx.put(attributes, in: model)
            }
        }
        return model
    }

    static let v2 = Migration(
        "v2", model: "Note",
        steps: [
            .rename("title", to: "name"), .add("archived", default: false), .remove("legacy"), .convert("priority", .integer),
            .createIndex(IndexDefinition(["priority"])),
            .setKind(.fixedSchema(["name": .string, "archived": .boolean, "priority": .integer])),
        ])

    @Test("rename, add, remove, convert, an index and a new schema: every object after them, recorded once, never run twice")
    func steps() throws {
        try withTemporaryStore { store in
            let model = try Self.notes(store, count: 2500)
            var phases: Set<MigrationProgress.Phase> = []
            let reports = try store.migrate([Self.v2]) { phases.insert($0.phase) }
            #expect(reports == [MigrationReport(migration: "v2", model: "Note", objects: 2500, changed: 2500, deleted: 0)])
            #expect(phases == [.checking, .writing])
            for object in try model.findAll() {
                let i = Int(object.id.dropFirst())!
                #expect(object.attributes == ["name": .string("Note \(i)"), "archived": false, "priority": .int(Int64(i % 5))])
            }
            #expect(try model.explain(Query(where: ["priority": 3])).access == .index(IndexDefinition(["priority"])))
            #expect(try model.count(where: ["priority": 3]) == 500)
            #expect(try model.definition.kind == .fixedSchema(["name": .string, "archived": .boolean, "priority": .integer]))
            #expect(try model.appliedMigrations == ["v2"])
            #expect(try store.verify().isHealthy)

            // A fixed schema takes a new attribute only with the schema that names it.
            let v3 = Migration(
                "v3", model: "Note",
                steps: [
                    .add("color", default: "blue"),
                    .setKind(.fixedSchema(["name": .string, "archived": .boolean, "priority": .integer, "color": .string])),
                ])
            expectError(.schemaViolation) { try store.migrate([Migration("v3-bad", model: "Note", steps: [.add("color", default: "blue")])]) }
            // A drop of an index the model does not have: a mistake, refused and not recorded as
            // applied (a black-box probe: it was taken, and its dry run said it would drop it).
            for dryRun in [true, false] {
                expectError(.invalidArgument) {
                    try store.migrate([Migration("drop-typo", model: "Note", steps: [.dropIndex(IndexDefinition(["nope"]))])], dryRun: dryRun)
                }
            }
            #expect(try model.appliedMigrations == ["v2"])
            let again = try store.migrate([Self.v2, v3])
            #expect(again.map(\.alreadyApplied) == [true, false])
            #expect(try model.appliedMigrations == ["v2", "v3"])
            #expect(try model.find("n00007")?["color"] == "blue")

            // The name of a migration applied, with other steps: an error, not "already applied"
            // while the new steps never run (found by a black-box probe).
            let other = Migration("v3", model: "Note", steps: [.remove("color")])
            let error = #expect(throws: SatchelError.self) { try store.migrate([other]) }
            #expect(
                error?.code == .invalidArgument && error?.message.contains("'v3'") == true && error?.message.contains("other steps") == true,
                "\(String(describing: error))")
            #expect(try model.find("n00007")?["color"] == "blue")
            #expect(try store.migrate([v3]).map(\.alreadyApplied) == [true], "the same steps again: already applied")
        }
    }

    @Test(
        "number and integer read the same texts (a leading + too); a whole number outside 64 bits is said to be so, not to be no whole number (found by a black-box probe)"
    )
    func conversionRules() throws {
        /// The value converted, as JSON text, or the refusal's words.
        func converted(_ value: JSONValue, _ conversion: AttributeConversion) -> String {
            do { return String(decoding: (try conversion.convert(value) ?? .null).jsonBytes, as: UTF8.self) } catch { return "\(error)" }
        }
        #expect(converted(.string("+5"), .integer) == "5")
        #expect(converted(.string("+5"), .number) == "5")
        #expect(converted(.string(" +2.5 "), .number) == "2.5")
        #expect(converted(.string("-7"), .number) == "-7")
        for text in ["+", "++5", "+-5", "+ 5", "5+"] { #expect(converted(.string(text), .number) == "not a number", "\(text)") }
        let outside = "a whole number outside the 64-bit integer range"
        #expect(converted(.double(1e20), .integer) == outside)
        #expect(converted(.double(1e308), .integer) == outside)
        #expect(converted(.double(-1.8446744073709552e19), .integer) == outside)
        #expect(converted(.string("18446744073709551616"), .integer) == outside)
        #expect(converted(.string("-9223372036854775809"), .integer) == outside)
        #expect(converted(.double(2.5), .integer) == "not a whole number")
        #expect(converted(.double(.infinity), .integer) == "not a whole number")
        #expect(converted(.string("2.5"), .integer) == "not an integer")
        #expect(converted(.string("9223372036854775807"), .integer) == "9223372036854775807")
        // White space around a string goes, a line's end too; 1.0 is 1 to a boolean, as to queries.
        #expect(converted(.string("5\n"), .integer) == "5" && converted(.string("\t5 "), .number) == "5")
        #expect(converted(.string(" true\n"), .boolean) == "true")
        #expect(converted(.double(1.0), .boolean) == "true" && converted(.double(0.0), .boolean) == "false")
        #expect(converted(.double(0.5), .boolean) == "not true or false")
    }

    @Test(
        "an index a step cannot build beside the model's others refuses the migration before any object is rewritten, dry run too (found by a black-box probe)"
    )
    func indexStepRefusedFirst() throws {
        try withTemporaryStore { store in
            let model = try store.register(ModelDefinition(name: "P"))
            for i in 1...3 { try model.create(["object": .string("p\(i)"), "n": .int(Int64(i))]) }
            try model.createIndex(IndexDefinition("n"))
            try model.createIndex(.text("title"))
            let before = try model.findAll()
            let refused: [[MigrationStep]] = [
                [.convert("n", .string), .createIndex(IndexDefinition([Field("n")], storesObjects: false))],
                [.convert("n", .string), .createIndex(.text("body"))],
                [.convert("n", .string), .createIndex(IndexDefinition("m")), .createIndex(IndexDefinition([Field("m")], storesObjects: false))],
            ]
            for (i, steps) in refused.enumerated() {
                for dryRun in [true, false] {
                    do {
                        try store.migrate([Migration("m\(i)", model: "P", steps: steps)], dryRun: dryRun)
                        Issue.record("the migration ran: \(steps), dry run: \(dryRun)")
                    } catch let error as SatchelError {
                        #expect(error.code == .invalidArgument && error.message.contains("nothing was changed"), "\(error)")
                    }
                }
                #expect(try model.findAll() == before)
                let (applied, indexes) = (try model.appliedMigrations, try model.indexes)
                #expect(applied.isEmpty && indexes.count == 2)
                #expect(try store.verify().isHealthy)
            }
            // Dropped first, the index is built anew.
            let ran = try store.migrate([
                Migration(
                    "ok", model: "P",
                    steps: [
                        .convert("n", .string), .dropIndex(IndexDefinition("n")), .createIndex(IndexDefinition([Field("n")], storesObjects: false)),
                    ])
            ])
            let converted = try model.find("p1")?["n"]
            #expect(ran.first?.changed == 3 && converted == "1")
            // The text index is dropped as its refusal says, by a step that names it so (a
            // black-box probe: no step could), and one over more fields declared.
            let steps = try [#"{"dropIndex":"title","text":true}"#, #"{"createIndex":"title,body","text":true}"#].map {
                try MigrationStep(json: try JSONObject(parsing: $0))
            }
            #expect(steps.map(\.json) == [["dropIndex": "title", "text": true], ["createIndex": "title,body", "text": true]])
            try store.migrate([Migration("text", model: "P", steps: steps)])
            #expect(try model.indexes.map(\.definition).contains(.text("title", "body")))
            #expect(try !model.indexes.map(\.definition).contains(.text("title")))
        }
    }

    @Test("one object that does not migrate refuses the migration, naming how many and the first; nothing changes")
    func refusal() throws {
        try withTemporaryStore { store in
            let model = try Self.notes(store, count: 300)
            _ = try model.update("n00042", with: ["priority": "high"])
            _ = try model.update("n00043", with: ["priority": "low"])
            let before = try model.findAll()
            do {
                try store.migrate([Self.v2])
                Issue.record("the migration ran")
            } catch let error as SatchelError {
                #expect(
                    error.message.contains("2 of 300 objects") && error.message.contains("n00042") && error.message.contains("nothing was changed"),
                    "\(error)")
            }
            #expect(try model.findAll() == before)
            #expect(try model.appliedMigrations.isEmpty && model.indexes.isEmpty)
            #expect(try store.verify().isHealthy)

            // Both names held: a rename would lose one.
            _ = try model.update("n00001", with: ["name": "kept"])
            expectError(.invalidObject) { try store.migrate([Migration("r", model: "Note", steps: [.rename("title", to: "name")])]) }
            #expect(try model.find("n00001")?["name"] == "kept")

            // The id is no attribute: a step naming it is refused before any object is read
            // (found by a black-box probe: a rename to it lost the values and failed check).
            let all = try model.findAll()
            for step: MigrationStep in [
                .rename("title", to: "object"), .rename("object", to: "key"), .add("object", default: "zzz"), .remove("object"),
            ] {
                expectError(.invalidArgument) { try store.migrate([Migration("id", model: "Note", steps: [step])]) }
            }
            #expect(try model.findAll() == all)
            #expect(try store.verify().isHealthy)
        }
    }

    @Test("a fixed schema existing objects do not fit is refused at registration, naming how many and the first; a migration brings them there")
    func schemaAtRegistration() throws {
        try withTemporaryStore { store in
            let model = try Self.notes(store, count: 30)
            let schema = ModelDefinition(name: "Note", kind: .fixedSchema(["title": .string, "priority": .string]))
            do {
                try store.register(schema)
                Issue.record("the schema was registered")
            } catch let error as SatchelError {
                #expect(error.code == .schemaViolation && error.message.contains("10 of 30 objects") && error.message.contains("legacy"), "\(error)")
            }
            #expect(try model.definition.kind == .propertyBag)
            try store.migrate([Migration("drop legacy", model: "Note", steps: [.remove("legacy"), .setKind(schema.kind)])])
            // Every object can be updated under the new schema (the old defect: one holding a
            // removed attribute refused every later update).
            for object in try model.findAll() { _ = try model.update(object.id, with: ["priority": "9"]) }
            #expect(try store.verify().isHealthy)
        }
    }

    @Test("check reports an object that does not fit its model's schema")
    func checkValidatesSchemas() throws {
        try withTemporaryStore { store in
            let model = try store.register(ModelDefinition(name: "Price", kind: .fixedSchema(["amount": .number])))
            _ = try model.create(["object": "p1", "amount": 1])
            // An object another program (or an older version) wrote past the schema.
            try store.bulkUpdate { tx in try tx.writeServerObject(model, "p2", ["amount": "ten"]) }
            let report = try store.verify()
            #expect(report.problems.contains { $0.contains("'p2' does not fit") }, "\(report.problems)")
        }
    }

    @Test("a synced model's migration logs no change and renames the pending ones; one that pushes logs its rewrites")
    func syncedModels() throws {
        try withTemporaryStore { store in
            let model = try store.model("Note")
            try store.bulkUpdate { tx in
                for i in 0..<5 { try tx.writeServerObject(model, "n\(i)", ["title": .string("Note \(i)"), "tag": "a"]) }
            }
            _ = try model.update("n1", with: ["title": "edited", "tag": .null])
            try store.migrate([Migration("rename", model: "Note", steps: [.rename("title", to: "name")])])
            let pending = try model.pendingChanges()
            #expect(pending.map(\.objectID) == ["n1"])
            #expect(pending.first?.attributes == ["name": "edited", "tag": .null])
            // The values before the change (what the sync engine tells conflicts by) follow.
            #expect(pending.first?.baseValues == ["name": "Note 1", "tag": "a"])
            #expect(try model.find("n2")?.attributes == ["name": "Note 2", "tag": "a"])

            try store.migrate([Migration("pushed", model: "Note", pushesChanges: true, steps: [.add("color", default: "red")])])
            let pushed = try model.pendingChanges()
            #expect(pushed.count == 5)
            #expect(pushed.first { $0.objectID == "n3" }?.attributes == ["color": "red"])
        }
    }

    @Test(
        "a migration that leaves an object without attributes, not pushed, drops its pending create or update: the store checks healthy (a black-box probe: a create of a gone object stayed)"
    )
    func objectGoneTakesItsPendingChange() throws {
        try withTemporaryStore { store in
            let model = try store.model("R")
            try model.create(["object": "r1", "x": 1])
            try model.create(["object": "r2", "x": 1, "y": 2])
            try store.bulkUpdate { tx in try tx.writeServerObject(model, "s1", ["x": 1]) }
            try model.update("s1", with: ["x": 2])
            try store.migrate([Migration("rmx", model: "R", steps: [.remove("x")])])
            #expect(try model.findAll().map(\.id) == ["r2"])
            let pending = try store.pendingChanges()
            #expect(pending.map(\.objectID) == ["r2"] && pending.first?.kind == .create)
            let problems = try store.verify().problems
            #expect(problems.isEmpty, "\(problems)")
            let statistics = try model.statistics()
            #expect(statistics.pendingCreates == 1 && statistics.pendingUpdates == 0)
        }
    }

    @Test(
        "a synced model's migration renames changes in flight and refused ones too, and the server's copy a refusal keeps (found by a black-box probe)"
    )
    func changesInFlightAndRefused() throws {
        try withTemporaryStore { store in
            let model = try store.model("Note")
            try store.bulkUpdate { tx in
                for i in 0..<4 { try tx.writeServerObject(model, "n\(i)", ["title": .string("Note \(i)"), "tag": "a"]) }
                var sent = try tx.objectSyncState(model, "n1")
                sent.inFlight = InFlightChange(kind: .update, attributes: ["title": "sent"], baseValues: ["title": "Note 1"])
                try tx.setObjectSyncState(model, "n1", sent)
                var refused = try tx.objectSyncState(model, "n2")
                refused.refusal = RefusedChange(
                    model: "Note", objectID: "n2", kind: .update, message: "no", attributes: ["title": "bad"],
                    serverCopy: ["title": "Note 2", "tag": "a"])
                try tx.setObjectSyncState(model, "n2", refused)
            }
            // A delete in flight of an object no longer here keeps its last attributes.
            _ = try model.delete("n3")
            try store.bulkUpdate { tx in
                var records = try tx.objectSyncState(model, "n3")
                let delete = try #require(records.pending)
                records.pending = nil
                records.inFlight = InFlightChange(kind: .delete, attributes: delete.attributes)
                try tx.setObjectSyncState(model, "n3", records)
            }
            try store.migrate([Migration("rename", model: "Note", steps: [.rename("title", to: "name")])])
            let states = try store.read { snapshot in try snapshot.objectSyncStates(of: model) }
            func records(_ id: String) -> ObjectSyncState? { states.first { $0.id == id }?.records }
            #expect(records("n1")?.inFlight?.attributes == ["name": "sent"] && records("n1")?.inFlight?.baseValues == ["name": "Note 1"])
            #expect(records("n2")?.refusal?.attributes == ["name": "bad"] && records("n2")?.refusal?.serverCopy == ["name": "Note 2", "tag": "a"])
            #expect(records("n3")?.inFlight?.attributes == ["name": "Note 3", "tag": "a"])
            #expect(try store.verify().isHealthy)
        }
    }

    @Test("a dry run writes nothing and tells each change")
    func dryRun() throws {
        try withTemporaryStore { store in
            let model = try Self.notes(store, count: 12)
            let before = try model.findAll()
            var changes: [MigrationChange] = []
            let report = try store.migrate([Migration("rm", model: "Note", steps: [.remove("legacy")])], dryRun: true) { _ in
            } changes: {
                changes.append($0)
            }
            #expect(report.first?.changed == 4 && changes.map(\.objectID) == ["n00000", "n00003", "n00006", "n00009"])
            #expect(changes.first?.after == ["title": "Note 0", "priority": "0"])
            #expect(try model.findAll() == before && model.appliedMigrations.isEmpty)
        }
    }

    @Test("a migration stopped after a batch resumes as the store opens: every object migrated once, none half")
    func resumesOnOpen() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        do {
            let store = try Store(path: path)
            _ = try Self.notes(store, count: 3500)
            let batches = Locked(0)
            store.faultHooks.withLock {
                $0.afterMigrationBatch = {
                    let n = batches.withLock { count in
                        count += 1
                        return count
                    }
                    if n == 2 { throw Stop() }
                }
            }
            #expect(throws: Stop.self) { try store.migrate([Self.v2]) }
            store.faultHooks.withLock { $0.afterMigrationBatch = nil }
            let report = try store.verify()
            #expect(report.problems.contains { $0.contains("migration 'v2' is unfinished (2000 objects rewritten") }, "\(report.problems)")
            // Whole objects only: 2,000 after, the rest before.
            let model = try store.model("Note")
            #expect(try model.count(where: ["archived": false]) == 2000)
            #expect(
                try model.findAll().allSatisfy {
                    $0["archived"] == nil ? $0["title"] != nil && $0["priority"]?.stringValue != nil : $0["title"] == nil
                })
            try store.close()
        }
        let store = try Store(path: path)
        defer { try? store.close() }
        let model = try store.model("Note")
        #expect(try model.appliedMigrations == ["v2"])
        #expect(try model.count(where: ["archived": false]) == 3500)
        #expect(try store.verify().isHealthy)
    }

    @Test("a closure migration stopped mid-way resumes when run again, each object transformed once")
    func closureResumes() throws {
        try withTemporaryStore { store in
            let model = try store.model("Counter")
            try store.bulkUpdate { tx in for i in 0..<2500 { _ = try tx.put(["object": .string(String(format: "c%05d", i)), "n": 0], in: model) } }
            let bump = Migration(
                "bump", model: "Counter",
                steps: [.transform { $0["n"] = .int(($0["n"]?.intValue ?? 0) + 1) }])
            store.faultHooks.withLock { $0.afterMigrationBatch = { throw Stop() } }
            #expect(throws: Stop.self) { try store.migrate([bump]) }
            store.faultHooks.withLock { $0.afterMigrationBatch = nil }
            expectError(.busy) { try store.migrate([Migration("other", model: "Counter", steps: [.remove("x")])]) }
            let report = try store.migrate([bump])
            #expect(report.first?.changed == 2500)
            #expect(try model.count(where: ["n": 1]) == 2500)
        }
    }

    @Test("the JSON form: every named step parses and writes back; a wrong step is one clear error")
    func jsonForm() throws {
        let json = try JSONObject(
            parsing: #"""
                {"name":"m1","push":true,"steps":[{"rename":"a","to":"b"},{"add":"c","default":[1]},{"remove":"d"},{"convert":"e","to":"boolean"},
                {"createIndex":"f,g"},{"createIndex":"tags[]"},{"createIndex":"h","keysOnly":true},{"dropIndex":"i"},{"schema":{"b":"string"}},{"schema":null}]}
                """#)
        let migration = try Migration(model: "M", json: json)
        #expect(migration.pushesChanges && migration.steps.count == 10)
        #expect(migration.stepsJSON == json["steps"])
        for (bad, message) in [
            (#"{"name":"x","steps":[{"rename":"a"}]}"#, "step 1"),
            (#"{"name":"x","steps":[{"convert":"a","to":"date"}]}"#, "no conversion to 'date'"),
            (#"{"steps":[{"remove":"a"}]}"#, "needs a \"name\""), (#"{"name":"x","steps":[{"explode":"a"}]}"#, "a step is one of"),
            (#"{"name":"x","steps":[{"add":"a","default":null}]}"#, "not null"), (#"{"name":"x","steps":[]}"#, "non-empty array"),
            // A flag that is not true or false (a black-box probe: "text":"true" built a value index).
            (#"{"name":"x","steps":[{"createIndex":"t","text":"true"}]}"#, #""text" is true or false"#),
            (#"{"name":"x","steps":[{"createIndex":"t","keysOnly":1}]}"#, #""keysOnly" is true or false"#),
            (#"{"name":"x","steps":[{"dropIndex":"t","text":null}]}"#, #""text" is true or false"#),
        ] {
            let object = try JSONObject(parsing: bad)
            do throws(SatchelError) {
                _ = try Migration(model: "M", json: object)
                Issue.record("\(bad) parsed")
            } catch {
                #expect(error.code == .invalidArgument && error.message.contains(message), "\(bad): \(error)")
            }
        }
    }
}
