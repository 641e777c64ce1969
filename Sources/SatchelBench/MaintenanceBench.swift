import Foundation
import Satchel

/// The work a store needs after day one, on a store of `count` benchmark objects (one index, on
/// `brand`):
/// - `backup`: the store's bytes per second copied by `store.backup(to:)` from the open store,
///   against copying its files with the store closed (each file then synced, as a backup must be);
/// - `migrate`: objects per second for a migration renaming `name` to `title` and adding `stock`
///   with a default, against doing the same by hand: reading every object and saving it renamed
///   with `bulkUpdate`, 1,000 objects to a transaction.
/// Rounds are interleaved, each system keeping its best, and each migration runs on a fresh copy
/// of the same template store.
enum MaintenanceBench {
    static let batchSize = 1000

    static func run(count: Int, directory: String?) throws {
        let base = try Report.scratchDirectory("maintenance", given: directory)
        defer { Report.removeScratch(base, given: directory) }
        let template = base + "/template"
        try makeTemplate(at: template, count: count)
        let size = try filesSize(template)
        FileHandle.standardError.write(Data("maintenance: a store of \(count) objects, \(size >> 20) MiB\n".utf8))

        var backup = Double.infinity, copyFiles = Double.infinity
        var migrate = Double.infinity, bulkUpdate = Double.infinity
        for round in 0..<3 {
            backup = min(backup, try timeBackup(of: template, to: "\(base)/backup-\(round)"))
            copyFiles = min(copyFiles, try timeCopy(of: template, to: "\(base)/copy-\(round)"))
            migrate = min(migrate, try timeMigration(of: template, at: "\(base)/migrate-\(round)", count: count))
            bulkUpdate = min(bulkUpdate, try timeBulkUpdate(of: template, at: "\(base)/bulk-\(round)", count: count))
        }
        let megabytes = Double(size) / 1_048_576
        Report.line("backup", n: count, satchel: megabytes / backup, unit: "MB/s", baselines: [("copy_files", megabytes / copyFiles)])
        Report.line("migrate", n: count, satchel: Double(count) / migrate, unit: "docs/s", baselines: [("bulk_update", Double(count) / bulkUpdate)])
    }

    /// The steps both sides apply.
    static let steps: [MigrationStep] = [.rename("name", to: "title"), .add("stock", default: .int(0))]

    private static func makeTemplate(at path: String, count: Int) throws {
        let store = try Store(path: path)
        let model = try store.register(ModelDefinition(name: "Product", syncType: .none))
        var generator = BenchData.Generator()
        var written = 0
        while written < count {
            let size = min(batchSize, count - written)
            try store.bulkUpdate { transaction in
                for _ in 0..<size {
                    var item = generator.next()
                    item.attributes[Object.idAttribute] = .string(item.id)
                    try transaction.put(item.attributes, in: model)
                }
            }
            written += size
        }
        try model.createIndex(IndexDefinition("brand"))
        try store.close()
    }

    private static func timeBackup(of template: String, to destination: String) throws -> Double {
        let store = try Store(path: template)
        let start = ContinuousClock.now
        try store.backup(to: destination)
        let elapsed = ContinuousClock.now - start
        try store.close()
        try FileManager.default.removeItem(atPath: destination)
        return Report.seconds(elapsed)
    }

    private static func timeCopy(of template: String, to destination: String) throws -> Double {
        let start = ContinuousClock.now
        try FileManager.default.copyItem(atPath: template, toPath: destination)
        try synchronizeFiles(under: destination)
        let elapsed = ContinuousClock.now - start
        try FileManager.default.removeItem(atPath: destination)
        return Report.seconds(elapsed)
    }

    /// The bytes of the regular files under `directory`.
    private static func filesSize(_ directory: String) throws -> Int {
        guard let walker = FileManager.default.enumerator(atPath: directory) else { throw BenchError("cannot list \(directory)") }
        var total = 0
        while let name = walker.nextObject() as? String {
            let attributes = try FileManager.default.attributesOfItem(atPath: directory + "/" + name)
            if attributes[.type] as? FileAttributeType == .typeRegular { total += (attributes[.size] as? NSNumber)?.intValue ?? 0 }
        }
        return total
    }

    /// fsync on every regular file under `directory`.
    private static func synchronizeFiles(under directory: String) throws {
        guard let walker = FileManager.default.enumerator(atPath: directory) else { throw BenchError("cannot list \(directory)") }
        while let name = walker.nextObject() as? String {
            let file = directory + "/" + name
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            let descriptor = open(file, O_RDONLY)
            guard descriptor >= 0 else { throw BenchError("cannot open \(file)") }
            fsync(descriptor)
            close(descriptor)
        }
    }

    private static func timeMigration(of template: String, at path: String, count: Int) throws -> Double {
        try FileManager.default.copyItem(atPath: template, toPath: path)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let store = try Store(path: path)
        let start = ContinuousClock.now
        let reports = try store.migrate([Migration("v2", model: "Product", steps: steps)])
        let elapsed = ContinuousClock.now - start
        guard reports.first?.changed == count else { throw BenchError("the migration changed \(reports.first?.changed ?? 0) of \(count)") }
        try store.close()
        return Report.seconds(elapsed)
    }

    private static func timeBulkUpdate(of template: String, at path: String, count: Int) throws -> Double {
        try FileManager.default.copyItem(atPath: template, toPath: path)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let store = try Store(path: path)
        let model = try store.model("Product")
        let start = ContinuousClock.now
        let cursor = try model.cursor(Query())
        var changed = 0
        var done = false
        while !done {
            var batch: [Object] = []
            while batch.count < batchSize, let object = try cursor.next() { batch.append(object) }
            done = batch.count < batchSize
            try store.bulkUpdate { transaction in
                for var object in batch {
                    object.attributes["title"] = object.attributes.removeValue(forKey: "name")
                    object.attributes["stock"] = .int(0)
                    try transaction.save(object, in: model)
                }
            }
            changed += batch.count
        }
        let elapsed = ContinuousClock.now - start
        guard changed == count else { throw BenchError("the bulk update changed \(changed) of \(count)") }
        try store.close()
        return Report.seconds(elapsed)
    }
}
