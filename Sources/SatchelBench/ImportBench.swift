import CSQLite
import Foundation
import Satchel

/// Importing a JSON-lines file into an empty model: Satchel's streaming import (the file checked
/// whole, then written in batches of 1,000, each one transaction) against SQLite reading the same
/// lines and inserting each as a JSON object (`json()` validating it, the id taken from its
/// `object`), 1,000 to a transaction. Neither side has a secondary index, and the model records
/// no changes (a cache of server data), so both do the same work: read, check, store.
enum ImportBench {
    static let batchSize = 1000

    /// Runs the group with Satchel's store in `configuration`, which `options` give a child
    /// process of this executable (the bench's own overrides).
    static func run(count: Int, directory: String?, configuration: Store.Configuration, options: [String]) throws {
        let fileManager = FileManager.default
        let base = try Report.scratchDirectory("import", given: directory)
        defer { Report.removeScratch(base, given: directory) }

        let file = base + "/items.jsonl"
        try writeLines(count: count, to: file)
        let size = (try? fileManager.attributesOfItem(atPath: file)[.size] as? Int) ?? 0
        let buffer = configuration.writeBufferSize >> 20
        let header = "import: \(count) JSON lines (\(size >> 20) MiB), batches of \(batchSize), write buffer \(buffer) MiB"
        FileHandle.standardError.write(Data((header + "\n").utf8))

        // Interleaved rounds, each system keeping its best, so a burst of load on a shared
        // machine hits both alike.
        var satchel = Double.infinity, sqlite = Double.infinity
        for round in 0..<(count <= 200_000 ? 3 : 2) {
            satchel = min(satchel, try importSatchel(file, count: count, path: "\(base)/satchel-\(round)", configuration: configuration))
            sqlite = min(sqlite, try importSQLite(file, count: count, path: "\(base)/sqlite-\(round).db"))
        }
        Report.line("import", n: count, satchel: Double(count) / satchel, unit: "docs/s", baselines: [("sqlite_json", Double(count) / sqlite)])

        // Peak memory: each import again, alone in a child process of this executable.
        let satchelRSS = try peakRSS(of: "satchel", file: file, count: count, path: "\(base)/satchel-rss", options: options)
        let sqliteRSS = try peakRSS(of: "sqlite_json", file: file, count: count, path: "\(base)/sqlite-rss.db", options: options)
        Report.line("import_peak_rss", n: count, satchel: satchelRSS, unit: "MB", baselines: [("sqlite_json", sqliteRSS)])
    }

    /// The peak resident set, in MB, of a child process importing `file` with `system`.
    private static func peakRSS(of system: String, file: String, count: Int, path: String, options: [String]) throws -> Double {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        child.arguments = ["--child-import", system, "--child-file", file, "--child-path", path, "--objects", String(count)] + options
        let output = Pipe()
        child.standardOutput = output
        try child.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        child.waitUntilExit()
        guard child.terminationStatus == 0, let text = String(data: data, encoding: .utf8),
            let kilobytes = Double(text.trimmingCharacters(in: .whitespacesAndNewlines))
        else { throw BenchError("the \(system) import child failed (status \(child.terminationStatus))") }
        return kilobytes / 1024
    }

    /// In the child process: imports `file` with `system` into a new store at `path`, removes
    /// it, and prints the process's peak resident set in KiB.
    static func child(system: String, file: String, path: String, count: Int, configuration: Store.Configuration) throws {
        switch system {
        case "satchel": _ = try importSatchel(file, count: count, path: path, configuration: configuration)
        case "sqlite_json": _ = try importSQLite(file, count: count, path: path)
        default: throw BenchError("no import system '\(system)'")
        }
        // VmHWM, the peak of this process's own memory: getrusage's ru_maxrss would also count
        // the parent's, which Linux carries into a child across fork and exec.
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kilobytes = line.split(separator: " ").dropFirst().first(where: { !$0.isEmpty }).flatMap({ Int($0) })
        else { throw BenchError("no VmHWM in /proc/self/status") }
        print(kilobytes)
    }

    /// The benchmark's objects as JSON lines, each with its id under `object`.
    private static func writeLines(count: Int, to path: String) throws {
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        guard let handle = FileHandle(forWritingAtPath: path) else { throw BenchError("cannot write \(path)") }
        defer { try? handle.close() }
        var generator = BenchData.Generator()
        var buffer: [UInt8] = []
        for i in 0..<count {
            var item = generator.next()
            item.attributes["object"] = .string(item.id)
            buffer += item.attributes.jsonBytes
            buffer.append(UInt8(ascii: "\n"))
            if buffer.count > 1 << 20 || i == count - 1 {
                handle.write(Data(buffer))
                buffer.removeAll(keepingCapacity: true)
            }
        }
    }

    private static func importSatchel(_ file: String, count: Int, path: String, configuration: Store.Configuration) throws -> Double {
        let store = try Store(path: path, configuration: configuration)
        let model = try store.register(ModelDefinition(name: "Product", syncType: .none))
        let start = ContinuousClock.now
        let imported = try store.importObjects(from: URL(fileURLWithPath: file), into: model, batchSize: batchSize)
        let elapsed = ContinuousClock.now - start
        guard imported == count else { throw BenchError("satchel imported \(imported) of \(count)") }
        try store.close()
        try FileManager.default.removeItem(atPath: path)
        return Report.seconds(elapsed)
    }

    private static func importSQLite(_ file: String, count: Int, path: String) throws -> Double {
        let db = try SQLiteDatabase(path: path)
        try configure(db, cacheBytes: Store.Configuration().blockCacheSize)
        try db.execute("CREATE TABLE docs (id TEXT PRIMARY KEY NOT NULL, body TEXT NOT NULL)")
        let insert = try db.prepare("INSERT INTO docs (id, body) VALUES (json_extract(?1, '$.object'), json(?1))")
        let start = ContinuousClock.now
        guard let input = fopen(file, "r") else { throw BenchError("cannot read \(file)") }
        defer { fclose(input) }
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        var inserted = 0
        try db.execute("BEGIN")
        while true {
            let length = getline(&line, &capacity, input)
            if length < 0 { break }
            guard length > 1, let line else { continue }
            insert.bind(1, bytes: Array(UnsafeRawBufferPointer(start: line, count: length - 1)))
            try insert.run()
            inserted += 1
            if inserted % batchSize == 0 {
                try db.execute("COMMIT")
                try db.execute("BEGIN")
            }
        }
        try db.execute("COMMIT")
        let elapsed = ContinuousClock.now - start
        guard inserted == count else { throw BenchError("sqlite inserted \(inserted) of \(count)") }
        try FileManager.default.removeItem(atPath: path)
        return Report.seconds(elapsed)
    }
}
