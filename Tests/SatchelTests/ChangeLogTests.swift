import SatchelTestSupport
import Synchronization
import Testing

@testable import Satchel

@Suite("Change log")
struct ChangeLogTests {
    private func change(_ model: Model, _ id: String) throws -> PendingChange? {
        try model.pendingChanges().first { $0.objectID == id }
    }

    @Test("create, update and delete each record one pending change")
    func basicKinds() throws {
        try withTemporaryStore { store in
            let products = try store.model("Product")
            #expect(try products.isChanged == false)
            let p = try products.create(["name": "A", "price": 1])
            #expect(try products.isChanged)
            #expect(try change(products, p.id) == PendingChange(model: "Product", objectID: p.id, kind: .create, attributes: [:]))
            // Simulate the server's acknowledgement of the create (the sync engine's job later).
            try clearChanges(store, products)
            try products.update(p.id, with: ["price": 2, "name": "A"])
            #expect(try change(products, p.id)?.kind == .update)
            #expect(try change(products, p.id)?.attributes == ["price": 2])
            try clearChanges(store, products)
            try products.delete(p.id)
            #expect(
                try change(products, p.id) == PendingChange(model: "Product", objectID: p.id, kind: .delete, attributes: ["name": "A", "price": 2]))
        }
    }

    @Test("create then update stays a create; create then delete leaves nothing")
    func createCoalescing() throws {
        try withTemporaryStore { store in
            let products = try store.model("Product")
            let p = try products.create(["name": "A"])
            try products.update(p.id, with: ["name": "B", "x": 1])
            #expect(try products.pendingChanges().map(\.kind) == [.create])
            try products.delete(p.id)
            #expect(try products.pendingChanges().isEmpty)
            #expect(try products.isChanged == false)
            #expect(try products.statistics().pendingCreates == 0)
        }
    }

    @Test("update then update merges attributes, the later value winning; removals are nulls")
    func updateCoalescing() throws {
        try withTemporaryStore { store in
            let products = try store.model("Product")
            let p = try products.create(["name": "A", "price": 1, "color": "red"])
            try clearChanges(store, products)
            try products.update(p.id, with: ["price": 2])
            try products.update(p.id, with: ["price": 3, "color": .null, "size": "L"])
            #expect(try change(products, p.id)?.attributes == ["price": 3, "color": .null, "size": "L"])
            // Writing an unchanged value records nothing new.
            try products.update(p.id, with: ["name": "A"])
            #expect(try change(products, p.id)?.attributes == ["price": 3, "color": .null, "size": "L"])
            // Save (replace) records the difference.
            try products.save(Object(id: p.id, attributes: ["name": "B", "price": 3]))
            #expect(try change(products, p.id)?.attributes == ["price": 3, "color": .null, "size": .null, "name": "B"])
            #expect(try products.statistics().pendingUpdates == 1)
        }
    }

    @Test("update then delete is a delete carrying the attributes the server has: the update's changes undone by their base values")
    func updateThenDelete() throws {
        try withTemporaryStore { store in
            let products = try store.model("Product")
            let p = try products.create(["name": "A", "old": 1])
            try clearChanges(store, products)
            try products.update(p.id, with: ["name": "B", "old": .null, "new": 2])
            try products.delete(p.id)
            #expect(
                try products.pendingChanges() == [
                    PendingChange(model: "Product", objectID: p.id, kind: .delete, attributes: ["name": "A", "old": 1])
                ])
        }
    }

    @Test("delete then create of the same id becomes an update that also removes old attributes")
    func deleteThenCreate() throws {
        try withTemporaryStore { store in
            let products = try store.model("Product")
            try products.create(["object": "p", "name": "A", "old": 1])
            try clearChanges(store, products)
            try products.delete("p")
            try products.create(["object": "p", "name": "B"])
            #expect(
                try products.pendingChanges() == [
                    PendingChange(
                        model: "Product", objectID: "p", kind: .update, attributes: ["name": "B", "old": .null], baseValues: ["name": "A", "old": 1])
                ])
        }
    }

    @Test("the local partition and sync type none record no changes")
    func unsyncedModels() throws {
        try withTemporaryStore { store in
            let local = try store.register(ModelDefinition(name: "Draft", partition: .local))
            let none = try store.register(ModelDefinition(name: "Cache", syncType: .none))
            for model in [local, none] {
                let o = try model.create(["a": 1])
                try model.update(o.id, with: ["a": 2])
                try model.delete(o.id)
                try model.create(["b": 1])
                #expect(try model.pendingChanges().isEmpty)
                #expect(try model.isChanged == false)
            }
            #expect(try store.pendingChanges().isEmpty)
        }
    }

    @Test("changes land in the same batch as the data, and vanish with a failed block")
    func atomicWithData() throws {
        try withTemporaryStore { store in
            let products = try store.model("Product")
            try? store.bulkUpdate { tx in
                try tx.create(["a": 1], in: products)
                try tx.create(["object": 1], in: products)  // invalid: aborts the block
            }
            #expect(try products.pendingChanges().isEmpty)
            #expect(try products.count() == 0)
            try store.bulkUpdate { tx in
                let a = try tx.create(["a": 1], in: products)
                try tx.update(a.id, with: ["a": 2], in: products)
                try tx.create(["b": 1], in: products)
            }
            #expect(try products.pendingChanges().map(\.kind) == [.create, .create])
            #expect(try store.pendingChanges().count == 2)
        }
    }

    @Test("statistics agree with a scan after a random mix of writes")
    func countersAgree() throws {
        try withTemporaryStore { store in
            let products = try store.model("Product")
            var rng = SystemRandomNumberGenerator()
            let ids = (0..<40).map { "o\($0)" }
            for step in 0..<600 {
                let id = ids.randomElement(using: &rng)!
                let exists = try products.find(id) != nil
                switch Int.random(in: 0..<5, using: &rng) {
                case 0 where !exists: try products.create(["object": .string(id), "v": .int(Int64(step))])
                case 1 where exists: try products.update(id, with: ["v": Bool.random(using: &rng) ? .null : .int(Int64(step))])
                case 2: try products.delete(id)
                case 3: try products.save(Object(id: id, attributes: ["w": .int(Int64(step % 3))]))
                default: if Int.random(in: 0..<20, using: &rng) == 0 { try clearChanges(store, products) }
                }
            }
            let statistics = try products.statistics()
            let changes = try products.pendingChanges()
            #expect(statistics.objects == (try products.findAll().count))
            #expect(statistics.pendingCreates == changes.filter { $0.kind == .create }.count)
            #expect(statistics.pendingUpdates == changes.filter { $0.kind == .update }.count)
            #expect(statistics.pendingDeletes == changes.filter { $0.kind == .delete }.count)
        }
    }
}

/// Drops every pending change of `model`, keeping the statistics right: what the sync engine does
/// when the server acknowledges them.
func clearChanges(_ store: Store, _ model: Model) throws {
    let prefix = Keys.changePrefix(model.name)
    var batch = LevelDBWriteBatch()
    let iterator = try store.database(model.definition.partition).makeIterator()
    iterator.seek(prefix)
    while iterator.isValid && iterator.keyHasPrefix(prefix) {
        batch.delete(iterator.key)
        iterator.next()
    }
    var statistics = try store.entry(model.name).statistics
    statistics.pendingCreates = 0
    statistics.pendingUpdates = 0
    statistics.pendingDeletes = 0
    batch.put(Keys.modelStatistics(model.name), statistics.encoded)
    try store.database(model.definition.partition).write(batch, sync: false)
    store.catalog.withLock { $0.models[NameKey(model.name)]?.statistics = statistics }
}
