import Foundation
import Satchel
import SatchelTestSupport
import Testing

/// Live queries and change sets: the exact emissions scripted writes cause.
@Suite("Observation")
struct ObservationTests {
    static func names(_ objects: [Object]?) -> [String]? { objects?.compactMap { $0["name"]?.stringValue } }

    @Test("observe(query) yields the results at once and after each commit that touches the model; other models' commits emit nothing")
    func liveQuery() async throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        let products = try store.model("Product")
        let orders = try store.model("Order")
        try products.create(["object": "p1", "name": "Lamp", "price": 5])
        var emissions = products.observe(Query(where: Field("price") < 10).order(by: "price")).makeAsyncIterator()
        #expect(Self.names(try await emissions.next()) == ["Lamp"], "the current results at once")

        try products.create(["object": "p2", "name": "Pen", "price": 2])
        #expect(Self.names(try await emissions.next()) == ["Pen", "Lamp"])

        try orders.create(["object": "o1", "total": 3])  // another model: no emission
        try products.update("p1", with: ["price": 50])
        #expect(Self.names(try await emissions.next()) == ["Pen"], "the order's commit emitted nothing before this")

        try await store.bulkUpdate { tx in  // one batch, one emission
            try tx.create(["object": "p3", "name": "Cup", "price": 3], in: products)
            try tx.update("p2", with: ["price": 9], in: products)
            _ = try tx.delete("p1", in: products)
        }
        #expect(Self.names(try await emissions.next()) == ["Cup", "Pen"])

        // A server's write (a sync page) is a commit like any other.
        try await store.bulkUpdate { tx in try tx.writeServerObject(products, "p4", ["name": "Ink", "price": 1]) }
        #expect(Self.names(try await emissions.next()) == ["Ink", "Cup", "Pen"])

        try store.close()
        #expect(try await emissions.next() == nil, "the stream ends when the store closes")
    }

    @Test("observe(id) follows one object, nil once deleted")
    func oneObject() async throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        defer { try? store.close() }
        let products = try store.model("Product")
        var lamp = products.observe("p1").makeAsyncIterator()
        #expect(try await lamp.next() == .some(nil), "no such object yet")
        try products.create(["object": "p1", "name": "Lamp"])
        #expect(try await lamp.next()??["name"] == "Lamp")
        try products.update("p1", with: ["name": "Desk lamp"])
        #expect(try await lamp.next()??["name"] == "Desk lamp")
        _ = try products.delete("p1")
        #expect(try await lamp.next() == .some(nil))
    }

    @Test("store.changes delivers each commit's change sets: ids created, updated, deleted, and where they came from")
    func changeSets() async throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        defer { try? store.close() }
        let products = try store.model("Product")
        let orders = try store.model("Order")
        try products.create(["object": "p0", "name": "Old"])
        var changes = store.changes.makeAsyncIterator()
        try await store.bulkUpdate { tx in
            try tx.create(["object": "p1", "name": "Lamp"], in: products)
            try tx.update("p0", with: ["name": "Older"], in: products)
        }
        try orders.create(["object": "o1", "total": 1])
        _ = try products.delete("p0")
        try await store.bulkUpdate { tx in try tx.writeServerObject(products, "p9", ["name": "From the server"]) }
        #expect(await changes.next() == ChangeSet(model: "Product", created: ["p1"], updated: ["p0"], origin: .local))
        #expect(await changes.next() == ChangeSet(model: "Order", created: ["o1"], origin: .local))
        #expect(await changes.next() == ChangeSet(model: "Product", deleted: ["p0"], origin: .local))
        #expect(await changes.next() == ChangeSet(model: "Product", created: ["p9"], origin: .server))
    }

    @Test("a slow consumer sees the latest results, not a backlog; several consumers observe the same query")
    func coalesced() async throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        defer { try? store.close() }
        let products = try store.model("Product")
        let query = Query(where: Field("n") >= 0)
        var slow = products.observe(query).makeAsyncIterator()
        var other = products.observe(query).makeAsyncIterator()
        #expect(try await slow.next()?.count == 0)
        #expect(try await other.next()?.count == 0)
        for i in 0..<50 { try products.create(["n": .int(Int64(i))]) }
        // Fifty commits: the slow consumer catches up to the end without taking fifty steps.
        var steps = 0
        var last = -1
        while last != 50, let results = try await slow.next() {
            steps += 1
            last = results.count
        }
        #expect(last == 50 && steps < 50, "\(steps) emissions for 50 commits")
        var seen = 0
        while seen != 50, let results = try await other.next() { seen = results.count }
        #expect(seen == 50)
    }

    @Test("after close: observe throws .closed at once, count() and the other reads throw .closed rather than answer stale")
    func closedStore() async throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        let products = try store.model("Product")
        try products.create(["object": "p1", "name": "Lamp"])
        try store.close()
        func isClosed(_ error: any Error) -> Bool { (error as? SatchelError)?.code == .closed }
        var query = products.observe(Query()).makeAsyncIterator()
        await #expect(throws: SatchelError.self) { _ = try await query.next() }
        var one = products.observe("p1").makeAsyncIterator()
        do {
            _ = try await one.next()
            Issue.record("observe(id) on a closed store yielded")
        } catch {
            #expect(isClosed(error), "\(error)")
        }
        #expect { _ = try products.count() } throws: { isClosed($0) }
        #expect { _ = try products.count(where: "name" == "Lamp") } throws: { isClosed($0) }
        #expect { _ = try products.indexes } throws: { isClosed($0) }
        #expect { _ = try products.find("p1") } throws: { isClosed($0) }
    }
}
