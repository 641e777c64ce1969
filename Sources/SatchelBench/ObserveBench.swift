import Foundation
import Satchel

/// Live queries under writes: 100 observed queries (each one category's cheapest 20, served by
/// an index on category and price) over a model of `count` objects, and 10,000 single-object
/// updates of random objects' prices, each its own commit:
/// - satchel: time per commit with the 100 live queries (`observeChanges`) consuming, until
///   each has seen the last commit (a final commit every query's results show);
/// - `baseline_no_observers`: the same commits with no observer;
/// - `baseline_rerun_all`: the design that runs every live query again after each commit that
///   touches the model — each commit followed by the 100 queries (over 500 commits).
/// Rounds interleaved, each keeping its best.
enum ObserveBench {
    static let queries = 100
    static let updates = 10_000

    static func run(count: Int, directory: String?) async throws {
        let base = try Report.scratchDirectory("observe", given: directory)
        defer { Report.removeScratch(base, given: directory) }
        FileHandle.standardError.write(Data("observe: \(queries) live queries over \(count) objects, \(updates) updates\n".utf8))
        let store = try Store(path: base + "/satchel")
        defer { try? store.close() }
        let products = try store.register(ModelDefinition(name: "Product", syncType: .none))
        try products.createIndex(IndexDefinition("category", "price"))
        var rng = SystemRandomNumberGenerator()
        try load(products, count: count, in: store)
        let live = (0..<queries).map { Query(where: "category" == "c\($0)").order(by: "price").limit(20) }
        let changes = (0..<updates).map { _ in
            (String(format: "p%07d", Int.random(in: 0..<count, using: &rng)), Int.random(in: 1...100_000, using: &rng))
        }

        var observed = Double.infinity, none = Double.infinity, rerun = Double.infinity
        for _ in 0..<3 {
            none = min(none, try timed { for (id, price) in changes { try products.update(id, with: ["price": price]) } } / Double(updates))

            // The observers, subscribed and past their first results before the clock starts.
            var iterators = live.map { products.observeChanges($0).makeAsyncIterator() }
            for i in iterators.indices { _ = try await iterators[i].next() }
            let start = ContinuousClock.now
            let consumers = iterators.enumerated().map { i, iterator in
                Task {
                    var iterator = iterator
                    while let results = try await iterator.next() {
                        if results.objects.first?.id == "sentinel-\(i)" { return }
                    }
                }
            }
            for (id, price) in changes { try products.update(id, with: ["price": price]) }
            try sentinels(true, products, in: store)
            for consumer in consumers { try await consumer.value }
            observed = min(observed, Report.seconds(ContinuousClock.now - start) / Double(updates))
            try sentinels(false, products, in: store)

            let sample = changes.prefix(500)
            rerun = min(
                rerun,
                try timed {
                    for (id, price) in sample {
                        try products.update(id, with: ["price": price])
                        for query in live { _ = try products.findAll(query) }
                    }
                } / Double(sample.count))
        }
        Report.line(
            "observe_commit", n: count, satchel: observed * 1e6, unit: "us", baselines: [("no_observers", none * 1e6), ("rerun_all", rerun * 1e6)])
    }

    /// `count` objects, each of one of the queries' categories, 1,000 to a transaction.
    private static func load(_ products: Model, count: Int, in store: Store) throws {
        var rng = SystemRandomNumberGenerator()
        for start in stride(from: 0, to: count, by: 1000) {
            try store.bulkUpdate { tx in
                for i in start..<min(start + 1000, count) {
                    _ = try tx.put(
                        ["object": String(format: "p%07d", i), "category": "c\(i % queries)", "price": Int.random(in: 1...100_000, using: &rng)],
                        in: products)
                }
            }
        }
    }

    /// Writes (or deletes) one object per category cheaper than any: first in every query's
    /// results.
    private static func sentinels(_ present: Bool, _ products: Model, in store: Store) throws {
        try store.bulkUpdate { tx in
            for i in 0..<queries {
                if present {
                    _ = try tx.put(["object": "sentinel-\(i)", "category": "c\(i)", "price": 0], in: products)
                } else {
                    _ = try tx.delete("sentinel-\(i)", in: products)
                }
            }
        }
    }

    private static func timed(_ body: () throws -> Void) rethrows -> Double {
        let start = ContinuousClock.now
        try body()
        return Report.seconds(ContinuousClock.now - start)
    }
}
