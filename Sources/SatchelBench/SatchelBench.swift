import ArgumentParser
import Satchel
import SatchelSync
import Foundation

/// `satchel-bench`: Satchel against baselines run in the same process on the same data.
/// Prints one line per measure and baseline: `<measure> n=N satchel=X <unit> baseline_<name>=Y <unit> ratio=X/Y`
/// (units ending in `/s` are throughputs, higher is better; others are times, lower is better).
@main
struct SatchelBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "satchel-bench",
        abstract: "Measure Satchel against baselines in the same process. Build with -c release."
    )

    enum Group: String, ExpressibleByArgument, CaseIterable {
        /// The store against raw LevelDB, SQLite JSON and RhoConnect's SQLite schema.
        case store
        /// The JSON codec against Foundation's.
        case codec
        /// The sync engine pulling a server's objects into an empty store.
        case sync
        /// A first pull from a real Kinto server (needs --kinto-url; not run by default).
        case kinto
        /// Importing a JSON-lines file, against SQLite reading and inserting the same lines.
        case `import`
        /// A first pull of 20,000 objects from the loopback Parse Server (not run by default).
        case parse
        /// A first pull of 20,000 records from the loopback Salesforce, and 20,000 creates and
        /// updates pushed to it (not run by default).
        case salesforce
        /// A backup of a live store against copying its files, and a migration against the same
        /// rewrite by hand with `bulkUpdate`.
        case maintenance
        /// Aggregates and full-text search, against SQLite's GROUP BY and FTS5.
        case queries
        /// Live queries: commits with 100 observed queries against the same commits without.
        case observe

        static let byDefault: [Group] = [.store, .codec, .sync, .import, .maintenance, .queries, .observe]
    }

    @Option(help: "A Kinto server's /v1 root, for the kinto group.") var kintoURL: String?
    @Option(help: "The Kinto bucket of the kinto group (its Product collection is written when empty).") var kintoBucket = "satchel-bench"
    @Option(help: "user:password for the Kinto server.") var kintoUser = "bench:bench"

    @Flag(
        help: "Run the parse group too: a first pull from the loopback Parse Server, and creates and updates pushed to it (at most 20,000 objects).")
    var parse = false
    @Flag(
        help:
            "Run the salesforce group too: a first pull from the loopback Salesforce, and creates and updates pushed to it (at most 20,000 records).")
    var salesforce = false
    @Option(
        name: [.customLong("objects"), .customLong("docs")], help: ArgumentHelp("Number of objects (--docs is its earlier name).", valueName: "n"))
    var docs = 100_000
    @Option(help: "Systems to compare with: leveldb_raw, sqlite_json, rhoconnect_eav (comma list; default all).")
    var baselines: String?
    @Option(help: "A directory for the databases (default: a new temporary one, removed afterwards).") var directory: String?
    @Option(
        help:
            "Measures to run (comma list; default all): \(StoreBench.measures.map(\.name).joined(separator: ", ")) after the store's load; \(SyncBench.measures.joined(separator: ", ")) in the sync group."
    )
    var measures: String?
    @Option(help: "Override the block cache size, in MiB (all systems).") var cache: Int?
    @Option(help: "Override the write buffer size, in MiB.") var writeBuffer: Int?
    @Flag(help: "Turn Snappy compression off.") var noCompression = false
    @Option(help: "Override the table file size, in MiB.") var fileSize: Int?
    @Option(help: "Override the table block size, in KiB.") var blockSize: Int?
    @Flag(help: "Turn block checksum verification off.") var noChecksums = false
    @Option(help: "Comma-separated groups to run: \(Group.allCases.map(\.rawValue).joined(separator: ", ")).")
    var only: String?
    @Flag(
        help:
            "Measure an encrypted store against the same store unencrypted (baseline_satchel_plain): the store group's measures, and sync_pull in the sync group."
    )
    var encrypted = false
    @Flag(help: "With --encrypted: encrypt without tamper evidence (AES-256-CTR only), to measure what tamper evidence costs.")
    var noTamperEvidence = false

    @Option(help: .hidden) var childImport: String?
    @Option(help: .hidden) var childFile: String?
    @Option(help: .hidden) var childPath: String?
    @Option(help: .hidden) var childOpenQuery: String?
    @Option(help: .hidden) var childGet: String?

    func run() async throws {
        if let childImport, let childFile, let childPath {
            return try ImportBench.child(system: childImport, file: childFile, path: childPath, count: docs, configuration: storeConfiguration)
        }
        if let childGet {
            return try StoreBench.getChild(directory: childGet, gets: docs, configuration: storeConfiguration)
        }
        if let childOpenQuery {
            return try StoreBench.openQueryChild(directory: childOpenQuery, rounds: docs)
        }
        let groups =
            try only.map { list in
                try list.split(separator: ",").map { name in
                    guard let group = Group(rawValue: String(name)) else { throw ValidationError("unknown group '\(name)'") }
                    return group
                }
            } ?? (Group.byDefault + (kintoURL == nil ? [] : [.kinto]) + (parse ? [.parse] : []) + (salesforce ? [.salesforce] : []))
        #if DEBUG
        FileHandle.standardError.write(Data("warning: a debug build; measure with swift run -c release satchel-bench\n".utf8))
        #endif
        for group in groups {
            switch group {
            case .codec: try CodecBench.run(count: min(docs, 100_000))
            case .store: try runStore()
            case .sync:
                try await SyncBench.run(
                    count: docs, directory: directory, measures: measures.map { Set($0.split(separator: ",").map(String.init)) },
                    encrypted: encrypted,
                    tamperEvidence: !noTamperEvidence)
            case .kinto: try await runKinto()
            case .import: try ImportBench.run(count: docs, directory: directory, configuration: storeConfiguration, options: storeOptions)
            case .parse: try await ParseBench.run(count: min(docs, 20_000), directory: directory)
            case .salesforce: try await SalesforceBench.run(count: min(docs, 20_000), directory: directory)
            case .maintenance: try MaintenanceBench.run(count: docs, directory: directory)
            case .queries: try QueryBench.run(count: docs, directory: directory)
            case .observe: try await ObserveBench.run(count: docs, directory: directory)
            }
        }
    }

    private func runKinto() async throws {
        guard let text = kintoURL, let url = URL(string: text) else { throw ValidationError("the kinto group needs --kinto-url http://HOST:PORT/v1") }
        let parts = kintoUser.split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { throw ValidationError("--kinto-user is user:password") }
        try await KintoBench.run(
            url: url, bucket: kintoBucket, credentials: Credentials(user: parts[0], password: parts[1]), count: docs, directory: directory)
    }

    /// The store configuration the options give (the default, but for the overrides).
    private var storeConfiguration: Store.Configuration {
        var configuration = Store.Configuration()
        if let cache { configuration.blockCacheSize = cache << 20 }
        if let writeBuffer { configuration.writeBufferSize = writeBuffer << 20 }
        if noCompression { configuration.compression = false }
        if let fileSize { configuration.maxFileSize = fileSize << 20 }
        if let blockSize { configuration.blockSize = blockSize << 10 }
        if noChecksums { configuration.verifyChecksums = false }
        return configuration
    }

    /// The options that give it, for a child process of this executable.
    private var storeOptions: [String] {
        var options: [String] = []
        if let cache { options += ["--cache", String(cache)] }
        if let writeBuffer { options += ["--write-buffer", String(writeBuffer)] }
        if noCompression { options.append("--no-compression") }
        if let fileSize { options += ["--file-size", String(fileSize)] }
        if let blockSize { options += ["--block-size", String(blockSize)] }
        if noChecksums { options.append("--no-checksums") }
        return options
    }

    private func runStore() throws {
        let configuration = storeConfiguration
        let fileManager = FileManager.default
        let base =
            directory ?? fileManager.temporaryDirectory.appendingPathComponent("satchel-bench-\(ProcessInfo.processInfo.processIdentifier)").path
        try fileManager.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { if directory == nil { try? fileManager.removeItem(atPath: base) } }
        let chosen = baselines.map { Set($0.split(separator: ",").map(String.init)) }
        var systems: [(String) throws -> any BenchSystem] = []
        let key = encrypted ? try EncryptionKey.random() : nil
        if encrypted {
            // The same store encrypted (as `satchel`) and not (the baseline); other baselines
            // only when named.
            var sealed = configuration
            sealed.encryptionKey = key
            sealed.tamperEvidence = !noTamperEvidence
            systems.append { try SatchelSystem(directory: $0, configuration: sealed) }
            systems.append { try SatchelSystem(directory: $0, configuration: configuration, name: "satchel_plain") }
        } else {
            systems.append { try SatchelSystem(directory: $0, configuration: configuration) }
        }
        let all: [(String, (String) throws -> any BenchSystem)] = [
            ("leveldb_raw", { try RawLevelDBSystem(directory: $0, configuration: configuration) }),
            ("sqlite_json", { try SQLiteJSONSystem(directory: $0, configuration: configuration) }),
            ("rhoconnect_eav", { try RhoConnectEAVSystem(directory: $0, configuration: configuration) }),
        ]
        for (name, make) in all where chosen?.contains(name) ?? !encrypted { systems.append(make) }
        StoreBench.log(
            "store: \(docs) objects\(encrypted ? ", encrypted (\(noTamperEvidence ? "CTR only" : "tamper-evident")) against the same store unencrypted" : ""), block cache \(configuration.blockCacheSize >> 20) MiB, write buffer \(configuration.writeBufferSize >> 20) MiB, compression \(configuration.compression), checksums \(configuration.verifyChecksums), batches of \(StoreBench.batchSize)"
        )
        let selected = measures.map { Set($0.split(separator: ",").map(String.init)) }
        let results = try StoreBench.run(count: docs, systems: systems, directory: base, measures: selected, key: key)
        StoreBench.report(results, count: docs)
    }
}
