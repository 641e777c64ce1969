import SatchelTestSupport
import Testing

@testable import Satchel

private struct Boom: Error {}

@Suite("Bulk updates")
struct TransactionTests {
    @Test("all writes of a block land together")
    func commit() throws {
        try withTemporaryStore { store in
            let products = try store.model("Product")
            let ids = try store.bulkUpdate { tx in
                try (0..<100).map { i in try tx.create(["i": .int(Int64(i))], in: products).id }
            }
            #expect(try products.count() == 100)
            #expect(Set(try products.findAll().map(\.id)) == Set(ids))
        }
    }

    @Test("a thrown error writes nothing, whatever the block did before")
    func rollback() throws {
        try withTemporaryStore { store in
            let products = try store.model("Product")
            let keep = try products.create(["object": "keep", "name": "Keep"])
            let before = try dump(store)
            #expect(throws: Boom.self) {
                try store.bulkUpdate { tx in
                    try tx.create(["name": "new"], in: products)
                    try tx.update(keep.id, with: ["name": "changed"], in: products)
                    try tx.delete(where: ["name": "changed"], in: products)
                    throw Boom()
                }
            }
            #expect(try dump(store) == before)
            #expect(try products.find(keep.id) == keep)
            #expect(try products.count() == 1)
            #expect(try products.pendingChanges().count == 1)
        }
    }

    @Test("a failing write inside the block aborts the whole block")
    func failingWriteAborts() throws {
        try withTemporaryStore { store in
            let products = try store.model("Product")
            try products.create(["object": "a", "n": 1])
            let before = try dump(store)
            expectError(.alreadyExists) {
                try store.bulkUpdate { tx in
                    try tx.create(["object": "b", "n": 2], in: products)
                    try tx.create(["object": "a", "n": 3], in: products)
                }
            }
            #expect(try dump(store) == before)
        }
    }

    @Test("reads inside the block see the block's own writes")
    func readYourWrites() throws {
        try withTemporaryStore { store in
            let products = try store.model("Product")
            try products.create(["object": "a", "brand": "Acme"])
            try products.create(["object": "c", "brand": "Acme"])
            try store.bulkUpdate { tx in
                try tx.create(["object": "b", "brand": "Acme"], in: products)
                #expect(try tx.find("b", in: products)?["brand"] == "Acme")
                try tx.update("a", with: ["brand": "Other"], in: products)
                #expect(try tx.find("a", in: products)?["brand"] == "Other")
                try tx.delete("c", in: products)
                #expect(try tx.find("c", in: products) == nil)
                #expect(try tx.findAll(in: products).map(\.id) == ["a", "b"])
                #expect(try tx.findAll(where: ["brand": "Acme"], in: products).map(\.id) == ["b"])
                // Outside the transaction nothing is visible yet.
                #expect(try products.find("b") == nil)
                #expect(try products.find("a")?["brand"] == "Acme")
                try tx.create(["object": "c", "brand": "New"], in: products)
                #expect(try tx.findAll(in: products).map(\.id) == ["a", "b", "c"])
            }
            #expect(try products.findAll().map { $0["brand"]! } == ["Other", "Acme", "New"])
            #expect(try products.count() == 3)
        }
    }

    @Test("one transaction writes one partition")
    func crossPartition() throws {
        try withTemporaryStore { store in
            let products = try store.model("Product")
            let settings = try store.register(ModelDefinition(name: "Setting", partition: .local))
            let before = try dump(store)
            expectError(.crossPartition) {
                try store.bulkUpdate { tx in
                    try tx.create(["a": 1], in: products)
                    try tx.create(["b": 2], in: settings)
                }
            }
            #expect(try dump(store) == before)
            // Reading another partition is fine.
            try settings.create(["object": "s", "v": 1])
            try store.bulkUpdate { tx in
                let v = try tx.find("s", in: settings)?["v"]
                try tx.create(["copied": v ?? .null], in: products)
            }
            #expect(try products.findFirst(where: ["copied": 1]) != nil)
        }
    }

    @Test("a model first named inside a block is registered, and stays registered if the block fails")
    func registerInsideBlock() throws {
        try withTemporaryStore { store in
            try store.bulkUpdate { tx in
                try tx.create(["object": "o", "n": 1], in: try store.model("Fresh"))
            }
            #expect(try store.model("Fresh").find("o")?["n"] == 1)
            #expect(throws: Boom.self) {
                try store.bulkUpdate { tx in
                    try tx.create(["n": 1], in: try store.model("Other"))
                    throw Boom()
                }
            }
            #expect(store.models.map(\.name) == ["Fresh", "Other"])
            #expect(try store.model("Other").count() == 0)
        }
    }

    @Test("durable writes commit and read back")
    func durable() throws {
        var configuration = Store.Configuration()
        configuration.durableWrites = true
        try withTemporaryStore(configuration: configuration) { store in
            let products = try store.model("Product")
            try products.create(["object": "d", "x": 1])
            try store.bulkUpdate(durable: false) { tx in try tx.update("d", with: ["x": 2], in: products) }
            #expect(try products.find("d")?["x"] == 2)
        }
    }

    // The child process that stops leaves its store behind: the parent owns the directory and
    // removes it.
    @Test("a write from inside a block stops the program instead of deadlocking")
    func reentrancy() async {
        let directory = TemporaryDirectory()
        await #expect(processExitsWith: .failure) { [path = directory.child("s") as String] in
            let store = try Store(path: path)
            let products = try store.model("Product")
            try store.bulkUpdate { _ in
                try products.create(["a": 1])
            }
        }
    }

    @Test("a transaction used after its block stops the program")
    func escapedTransaction() async {
        let directory = TemporaryDirectory()
        await #expect(processExitsWith: .failure) { [path = directory.child("s") as String] in
            let store = try Store(path: path)
            let products = try store.model("Product")
            var escaped: Transaction?
            try store.bulkUpdate { tx in escaped = tx }
            try escaped?.create(["a": 1], in: products)
        }
    }
}
