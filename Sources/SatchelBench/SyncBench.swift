import Foundation
import Satchel
import SatchelSync

/// The sync engine applying a server's objects: a first pull of every object from the in-memory
/// server into an empty store, in pages of 1,000 (each page one batch with its cursor), against
/// the same objects saved in batches of 1,000 through the public transaction API into a model
/// that records no changes: what the writes cost without the engine.
enum SyncBench {
    static let pageSize = 1000

    static func run(count: Int, directory: String?) async throws {
        let fileManager = FileManager.default
        let base = directory ?? fileManager.temporaryDirectory.appendingPathComponent("satchel-sync-bench-\(ProcessInfo.processInfo.processIdentifier)").path
        try fileManager.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { if directory == nil { try? fileManager.removeItem(atPath: base) } }

        let server = InMemoryBackend()
        var generator = BenchData.Generator()
        var items: [BenchData.Item] = []
        items.reserveCapacity(count)
        for _ in 0..<count {
            let item = generator.next()
            items.append(item)
            await server.put("Product", item.attributes, id: item.id)
        }
        FileHandle.standardError.write(Data("sync: \(count) objects on an in-memory server, pages of \(pageSize)\n".utf8))

        var pull = Double.infinity, save = Double.infinity
        for round in 0..<3 {
            pull = min(pull, try await firstSync(from: server, credentials: Credentials(user: "bench", password: "bench"), count: count, path: "\(base)/pull-\(round)"))
            save = min(save, try saveAll(items, path: "\(base)/save-\(round)"))
        }
        Report.line("sync_pull", n: count, satchel: Double(count) / pull, unit: "objects/s", baselines: [("bulk_save", Double(count) / save)])
    }

    /// Seconds for one first sync of the server's `count` products into a new store, in pages of
    /// ``pageSize`` (the sync and the Kinto measures).
    static func firstSync(from server: any SyncBackend, credentials: Credentials, count: Int, path: String) async throws -> Double {
        let store = try Store(path: path)
        var configuration = SyncEngine.Configuration()
        configuration.pageSize = pageSize
        let engine = SyncEngine(store: store, backend: server, configuration: configuration)
        try await engine.logIn(credentials)
        _ = try store.model("Product")
        let start = ContinuousClock.now
        let report = try await engine.sync()
        let elapsed = ContinuousClock.now - start
        guard report.pulled == count, try store.model("Product").count() == count else {
            throw SatchelError(.unknown, "the sync pulled \(report.pulled) objects, not \(count)")
        }
        try store.close()
        try FileManager.default.removeItem(atPath: path)
        return Report.seconds(elapsed)
    }

    /// Seconds to save the same objects, a batch per page, without the engine.
    private static func saveAll(_ items: [BenchData.Item], path: String) throws -> Double {
        let store = try Store(path: path)
        let model = try store.register(ModelDefinition(name: "Product", syncType: .none))
        let start = ContinuousClock.now
        var index = 0
        while index < items.count {
            let end = min(index + pageSize, items.count)
            try store.bulkUpdate { tx in
                for item in items[index..<end] { try tx.save(Object(id: item.id, attributes: item.attributes), in: model) }
            }
            index = end
        }
        let elapsed = ContinuousClock.now - start
        try store.close()
        try FileManager.default.removeItem(atPath: path)
        return Report.seconds(elapsed)
    }
}
