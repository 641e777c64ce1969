import Foundation
import Satchel
import SatchelSync
import SatchelTestSupport
import Testing

/// Everything at once on one store, for a fixed number of operations: readers taking snapshots
/// and querying through an index, a writer committing transactions that move amounts between
/// objects (and create and delete some), a sync engine pulling and pushing, and the server
/// changing its copy meanwhile. Run under ThreadSanitizer and AddressSanitizer by
/// `scripts/sanitizers.sh`; `SATCHEL_STRESS_SCALE` multiplies the operation counts.
@Suite("Stress: readers, a writer and a sync on one store")
struct StressTests {
    static let accounts = 200
    static let groups = 8
    /// The sum of every `balance`: each transaction keeps it.
    static let total: Int64 = 1_000_000

    struct Counts: Sendable {
        var reads = 0
        var transactions = 0
        var syncs = 0
        var serverChanges = 0
    }

    @Test("a reader never sees half a transaction; the store checks clean; the store and the server converge")
    func stress() async throws {
        let scale = Int(ProcessInfo.processInfo.environment["SATCHEL_STRESS_SCALE"] ?? "") ?? 1
        let (readers, readsEach, transactions, syncs, serverChanges) = (3, 150 * scale, 300 * scale, 25 * scale, 100 * scale)
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        let model = try store.register(ModelDefinition(name: "Account"))
        try model.createIndex(IndexDefinition("group"))
        // The server starts with the accounts; the device pulls them first.
        var configuration = InMemoryBackend.Configuration()
        configuration.serverAssignsIDs = false
        let server = InMemoryBackend(configuration: configuration)
        for k in 0..<Self.accounts {
            _ = await server.put("Account", ["group": .int(Int64(k % Self.groups)), "balance": .int(Self.total / Int64(Self.accounts))], id: "a\(k)")
        }
        var engineConfiguration = SyncEngine.Configuration()
        engineConfiguration.pageSize = 50
        let engine = SyncEngine(store: store, backend: server, configuration: engineConfiguration)
        try await engine.logIn(Credentials(user: "ann", password: "secret"))
        try await engine.sync()

        let counts = try await withThrowingTaskGroup(of: Counts.self) { group in
            for reader in 0..<readers {
                group.addTask {
                    var counts = Counts()
                    for _ in 0..<readsEach {
                        let (sum, objects, indexed) = try await store.read { snapshot in
                            let all = try snapshot.findAll(in: model)
                            let sum = all.reduce(Int64(0)) { $0 + ($1["balance"]?.intValue ?? 0) }
                            var indexed = 0
                            for g in 0..<Self.groups {
                                indexed += try snapshot.count(where: Condition(equalities: ["group": .int(Int64(g))]), in: model)
                            }
                            return (sum, all.count, indexed)
                        }
                        #expect(sum == Self.total, "reader \(reader) saw a sum of \(sum)")
                        #expect(objects == indexed, "reader \(reader) saw \(objects) objects and \(indexed) index entries")
                        counts.reads += 1
                    }
                    return counts
                }
            }
            group.addTask {
                var counts = Counts()
                for n in 0..<transactions {
                    try await store.bulkUpdate { tx in
                        var random = SystemRandomNumberGenerator()
                        let all = try tx.findAll(in: model).filter { ($0["balance"]?.intValue ?? 0) > 10 }
                        guard all.count >= 2 else { return }
                        // Moves between accounts; every tenth also opens one and closes another.
                        for _ in 0..<5 {
                            let from = all[Int.random(in: 0..<all.count, using: &random)], to = all[Int.random(in: 0..<all.count, using: &random)]
                            guard from.id != to.id, let a = try tx.find(from.id, in: model)?["balance"]?.intValue,
                                let b = try tx.find(to.id, in: model)?["balance"]?.intValue, a > 1
                            else { continue }
                            let amount = Int64.random(in: 1...(a / 2), using: &random)
                            _ = try tx.update(from.id, with: ["balance": .int(a - amount)], in: model)
                            _ = try tx.update(to.id, with: ["balance": .int(b + amount)], in: model)
                        }
                        if n % 10 == 0, let closing = all.first, let heir = all.last, closing.id != heir.id,
                            let a = try tx.find(closing.id, in: model)?["balance"]?.intValue,
                            let b = try tx.find(heir.id, in: model)?["balance"]?.intValue
                        {
                            _ = try tx.update(heir.id, with: ["balance": .int(b + a - 1)], in: model)
                            _ = try tx.delete(closing.id, in: model)
                            _ = try tx.create(["group": .int(Int64(n % Self.groups)), "balance": 1], in: model)
                        }
                    }
                    counts.transactions += 1
                }
                return counts
            }
            group.addTask {
                var counts = Counts()
                for _ in 0..<syncs {
                    do {
                        try await engine.sync()
                    } catch let error as SyncError where error.code == .busy {
                        continue
                    }
                    counts.syncs += 1
                }
                return counts
            }
            group.addTask {
                var counts = Counts()
                for n in 0..<serverChanges {
                    // Another device edits a note; balances are the writer's alone.
                    await server.update("Account", "a\((n * 7) % Self.accounts)", ["note": .string("edited \(n)")])
                    counts.serverChanges += 1
                    await Task.yield()
                }
                return counts
            }
            var total = Counts()
            for try await counts in group {
                total.reads += counts.reads
                total.transactions += counts.transactions
                total.syncs += counts.syncs
                total.serverChanges += counts.serverChanges
            }
            return total
        }

        // Settle: the server's note edits and the writer's balances raced, so some updates were
        // refused as conflicts (kept as refused changes); retry them over the server's copy, and
        // sync until nothing is left.
        var conflicts = 0
        for _ in 0..<5 where try !store.changeFates(model: "Account").isEmpty {
            for (id, fate) in try store.changeFates(model: "Account") {
                if case .refused = fate {
                    try store.resolve("Account", id, .retry)
                    conflicts += 1
                }
            }
            try await engine.sync()
        }
        #expect(try store.changeFates(model: "Account").isEmpty)
        #expect(try store.verify().problems == [])
        var local: [String: JSONObject] = [:]
        try model.forEach { local[$0.id] = $0.attributes }
        let remote = await server.objects("Account")
        #expect(local == remote, "\(local.count) objects here, \(remote.count) on the server")
        #expect(local.values.reduce(Int64(0)) { $0 + ($1["balance"]?.intValue ?? 0) } == Self.total)
        #expect(counts.reads == readers * readsEach && counts.transactions == transactions && counts.serverChanges == serverChanges)
        print(
            "stress: \(counts.reads) snapshot reads (\(readers) readers), \(counts.transactions) transactions, \(counts.syncs) syncs, \(counts.serverChanges) server changes, \(conflicts) conflicts retried; \(local.count) objects; invariants held"
        )
        try store.close()
    }
}
