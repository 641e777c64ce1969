import Foundation
import SatchelTestSupport
import Testing

@testable import Satchel

/// Live queries with diffs: exact emission sequences for scripted writes, and random commits
/// whose every emission must equal the query run afresh, with a change that turns the previous
/// results into the new ones.
@Suite("Live queries")
struct LiveQueryTests {
    static func ids(_ results: LiveResults?) -> [String]? { results?.objects.map(\.id) }

    /// `old` with `change` applied as a list view applies it: deletions and moves' sources
    /// removed (positions in `old`), then insertions and moves' targets placed (positions in
    /// the new list).
    static func applied(_ change: ResultsChange, to old: [String], new: [String]) -> [String] {
        var list = old.enumerated().filter { i, _ in !change.deletions.contains(i) && !change.moves.contains { $0.from == i } }.map(\.element)
        let placed = (change.insertions.map { ($0, new[$0]) } + change.moves.map { ($0.to, old[$0.from]) }).sorted { $0.0 < $1.0 }
        for (at, id) in placed where at <= list.count { list.insert(id, at: at) }
        return list
    }

    struct Hung: Error {}

    /// The iterator's next emission, or `Hung` when none comes within a minute (a missed
    /// emission fails the test instead of hanging it).
    static func next(_ iterator: LiveQuerySequence.Iterator) async throws -> LiveResults? {
        try await withThrowingTaskGroup(of: LiveResults?.self) { group in
            group.addTask {
                var iterator = iterator
                return try await iterator.next()
            }
            group.addTask {
                try await Task.sleep(for: .seconds(60))
                throw Hung()
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
    }

    @Test("a limited window: entering, leaving, moving and changing objects give exact diffs; writes that cannot matter emit nothing")
    func window() async throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        defer { try? store.close() }
        let products = try store.model("Product")
        for i in 1...5 { try products.create(["object": .string("p\(i)"), "price": .int(Int64(i)), "name": .string("n\(i)")]) }
        let live = products.observeChanges(Query(where: "price" < 10).order(by: "price").limit(3)).makeAsyncIterator()
        let first = try await Self.next(live)
        #expect(Self.ids(first) == ["p1", "p2", "p3"] && first?.change == nil)

        try products.update("p5", with: ["price": 0])  // enters at the top; p3 leaves the window
        var next = try await Self.next(live)
        #expect(Self.ids(next) == ["p5", "p1", "p2"])
        #expect(next?.change == ResultsChange(deletions: [2], insertions: [0]))

        try products.update("p4", with: ["price": 100])  // matched beyond the window, now not at all: nothing
        try products.create(["object": "p9", "price": 50])  // no match
        try products.update("p1", with: ["name": "Lamp"])  // a member changes in place
        next = try await Self.next(live)
        #expect(Self.ids(next) == ["p5", "p1", "p2"])
        #expect(next?.change == ResultsChange(modifications: [1]), "the two writes before emitted nothing")

        try products.update("p2", with: ["price": -1])  // moves to the top
        next = try await Self.next(live)
        #expect(Self.ids(next) == ["p2", "p5", "p1"])
        #expect(next?.change == ResultsChange(moves: [.init(from: 2, to: 0)], modifications: [0]))

        // The null rule deletes p5: the full window loses a member and runs again to refill it.
        try products.update("p5", with: ["price": .null, "name": .null])
        next = try await Self.next(live)
        #expect(Self.ids(next) == ["p2", "p1", "p3"])
        #expect(next?.change == ResultsChange(deletions: [1], insertions: [2]))

        // A rolled-back transaction commits nothing; one server page is one emission.
        struct Rollback: Error {}
        _ = try? await store.bulkUpdate { tx in
            try tx.update("p3", with: ["price": -5], in: products)
            throw Rollback()
        }
        try await store.bulkUpdate { tx in
            for i in 20..<30 { try tx.writeServerObject(products, "s\(i)", ["price": .int(Int64(i - 30))]) }
        }
        next = try await Self.next(live)
        #expect(Self.ids(next) == ["s20", "s21", "s22"], "the rollback emitted nothing; the page once")
        #expect(next?.change == ResultsChange(deletions: [0, 1, 2], insertions: [0, 1, 2]))
    }

    @Test("ids that differ only in Unicode normalization are two objects to a live query, as to the store")
    func normalization() async throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        defer { try? store.close() }
        let notes = try store.model("Note")
        let (composed, decomposed) = ("caf\u{E9}", "cafe\u{301}")
        try notes.create(["object": .string(composed), "n": 1])
        try notes.create(["object": .string(decomposed), "n": 2])
        let live = notes.observeChanges(Query()).makeAsyncIterator()
        let first = try #require(try await Self.next(live))
        // In id order by bytes: "cafe" + U+0301 before "caf" + U+00E9.
        #expect(first.objects.map { Array($0.id.utf8) } == [Array(decomposed.utf8), Array(composed.utf8)])
        try notes.update(decomposed, with: ["n": 20])
        var next = try #require(try await Self.next(live))
        #expect(next.objects == (try notes.findAll(Query(order: [SortKey(.id)]))))
        #expect(next.change == ResultsChange(modifications: [0]))
        try notes.update(composed, with: ["n": 10])
        next = try #require(try await Self.next(live))
        #expect(next.objects == (try notes.findAll(Query(order: [SortKey(.id)]))))
        #expect(next.change == ResultsChange(modifications: [1]))
        _ = try notes.delete(composed)
        next = try #require(try await Self.next(live))
        #expect(next.objects.map { Array($0.id.utf8) } == [Array(decomposed.utf8)])
        #expect(next.change == ResultsChange(deletions: [1]))
    }

    @Test("a rename is not a delete: the list keeps its row, observe(id) follows the object, change sets say old → new")
    func renames() async throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        defer { try? store.close() }
        let products = try store.model("Product")
        for (id, price) in [("a", 1), ("local-1", 2), ("c", 3)] { try products.create(["object": .string(id), "price": .int(Int64(price))]) }
        let byPrice = products.observeChanges(Query().order(by: "price")).makeAsyncIterator()
        let byID = products.observeChanges(Query()).makeAsyncIterator()
        #expect(Self.ids(try await Self.next(byPrice)) == ["a", "local-1", "c"])
        #expect(Self.ids(try await Self.next(byID)) == ["a", "c", "local-1"])
        var sets = store.changes.makeAsyncIterator()
        var one = products.observe("local-1").makeAsyncIterator()
        #expect(try await one.next()??.id == "local-1")

        // The server acknowledges the create under its own id (what a push result or a link does).
        try await store.bulkUpdate { tx in _ = try tx.rename(products, from: "local-1", to: "b") }
        let set = await sets.next()
        #expect(set == ChangeSet(model: "Product", renamed: ["local-1": "b"], origin: .server), "no create, no delete")
        var next = try await Self.next(byPrice)
        #expect(Self.ids(next) == ["a", "b", "c"])
        #expect(next?.change == ResultsChange(modifications: [1], renames: [.init(position: 1, from: "local-1", to: "b")]), "the row stays")
        next = try await Self.next(byID)
        #expect(Self.ids(next) == ["a", "b", "c"])
        // In id order the new id moves the row: one move, whichever of the two the diff picks.
        let change = try #require(next?.change)
        #expect(change.renames == [.init(position: 1, from: "local-1", to: "b")] && change.deletions.isEmpty && change.insertions.isEmpty)
        #expect(change.moves.count == 1 && Self.applied(change, to: ["a", "c", "b"], new: ["a", "b", "c"]) == ["a", "b", "c"])
        let followed = try await one.next()
        #expect(followed??.id == "b" && followed??["price"] == 2, "observe(id) goes on with the object under its new id")

        // It keeps following: a write to the new id is seen, and a second rename too.
        try products.update("b", with: ["price": 20])
        #expect(try await one.next()??["price"] == 20)
        try await store.bulkUpdate { tx in _ = try tx.rename(products, from: "b", to: "b2") }
        #expect(try await one.next()??.id == "b2")
        next = try await Self.next(byPrice)
        #expect(Self.ids(next) == ["a", "c", "b2"])
        _ = try products.delete("b2")
        #expect(try await one.next() == .some(nil), "a delete is a delete")
    }

    @Test("random commits: every emission is the query run afresh, and its change turns the previous results into it")
    func differential() async throws {
        var rng = SplitMix64(seed: 30)
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        defer { try? store.close() }
        let things = try store.model("Thing")
        for i in 0..<60 { try things.create(["object": .string(String(format: "t%02d", i)), "a": .int(Int64(i % 7)), "b": .int(Int64(i % 5))]) }
        let queries = [
            Query(where: "a" < 4).order(by: "b").limit(5), Query(where: "a" >= 2, order: [.descending("b"), .ascending("a")], limit: 8),
            Query(where: "b" == 1), Query(where: "a" != 3).order(by: "a").limit(1), Query(where: "a" < 6, limit: 4),
        ]
        let iterators = queries.map { things.observeChanges($0).makeAsyncIterator() }
        var shown: [[Object]] = []
        for i in iterators.indices { shown.append(try #require(try await Self.next(iterators[i])).objects) }
        var renamesSeen = 0
        for round in 0..<150 {
            let writes = (0..<Int.random(in: 1...4, using: &rng)).map { _ -> (String, Int, Int, Int) in
                (
                    String(format: "t%02d", Int.random(in: 0..<70, using: &rng)), Int.random(in: 0..<10, using: &rng),
                    Int.random(in: 0..<7, using: &rng),
                    Int.random(in: 0..<5, using: &rng)
                )
            }
            try await store.bulkUpdate { tx in
                for (id, kind, a, b) in writes {
                    switch kind {
                    case 0: _ = try tx.delete(id, in: things)
                    case 1:  // the null rule
                        if try tx.find(id, in: things) != nil { _ = try tx.update(id, with: ["a": .null, "b": .null], in: things) }
                    case 2:  // a rename to an id not in use (what an acknowledged create does)
                        let to = String(format: "t%02d", a * 10 + b + 70 + round % 3 * 40)
                        if try tx.find(id, in: things) != nil, try tx.find(to, in: things) == nil { _ = try tx.rename(things, from: id, to: to) }
                    default: _ = try tx.put(["object": .string(id), "a": .int(Int64(a)), "b": .int(Int64(b))], in: things)
                    }
                }
            }
            for (q, query) in queries.enumerated() {
                var ordered = query
                if ordered.order.isEmpty { ordered.order = [SortKey(.id)] }
                let expected = try things.findAll(ordered)
                guard expected != shown[q] else { continue }
                let next = try #require(try await Self.next(iterators[q]))
                #expect(next.objects == expected, "round \(round), query \(q)")
                if let change = next.change {
                    // The previous ids, under the names the renames gave them.
                    let renamed = Dictionary(change.renames.map { ($0.from, $0.to) }, uniquingKeysWith: { a, _ in a })
                    let previous = shown[q].map { renamed[$0.id] ?? $0.id }
                    #expect(
                        Self.applied(change, to: previous, new: expected.map(\.id)) == expected.map(\.id), "round \(round), query \(q): \(change)")
                    renamesSeen += change.renames.count
                    for rename in change.renames { #expect(expected[rename.position].id == rename.to && shown[q].contains { $0.id == rename.from }) }
                    for i in change.modifications {
                        let before = shown[q].first { $0.id == expected[i].id || renamed[$0.id] == expected[i].id }
                        #expect(before != expected[i])
                    }
                } else {
                    Issue.record("round \(round), query \(q): an emission without its change")
                }
                shown[q] = next.objects
            }
        }
        #expect(renamesSeen > 10, "renames reached the diffs")
    }
}
