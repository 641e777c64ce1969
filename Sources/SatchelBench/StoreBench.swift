import Foundation
import Satchel
import SatchelTestSupport

/// One system under test. Every method does the same work in each system; only these calls are
/// timed (generating the objects is not).
protocol BenchSystem: AnyObject {
    var name: String { get }
    /// Writes one batch of objects (a transaction), starting from the same objects in every
    /// system: each encodes what it stores (JSON text, or one text per attribute) in the call.
    func load(_ batch: [BenchData.Item]) throws
    /// Reads one object by id; returns something derived from it.
    func get(_ id: String) throws -> Int
    /// Objects whose brand equals `brand`, at most `limit`; returns how many.
    func findBrand(_ brand: String, limit: Int?) throws -> Int
    /// Objects with price ≥ `price`, by price, at most `limit`; returns how many.
    func priceRange(from price: Int64, limit: Int) throws -> Int
    /// Sets one object's price (one transaction, keeping the price index right).
    func updatePrice(_ id: String, to price: Int64) throws
    /// Reads every object; returns how many.
    func scan() throws -> Int
    /// Finishes the background work a load leaves (LevelDB compactions, SQLite's WAL), untimed,
    /// so the read measures compare settled stores.
    func settle() throws
    func close() throws
}

/// The measures of issue #3, run on every system with the same inputs.
enum StoreBench {
    struct Inputs {
        var getIDs: [String]
        var brands: [String]
        var allBrands: [String]
        var prices: [Int64]
        var updates: [(String, Int64)]
    }

    static let batchSize = 1000

    static func inputs(count: Int) -> Inputs {
        var rng = SplitMix64(seed: 7)
        let gets = min(20_000, max(count, 1))
        return Inputs(
            getIDs: (0..<gets).map { _ in BenchData.id(Int.random(in: 0..<count, using: &rng)) },
            brands: (0..<2000).map { _ in BenchData.brands.randomElement(using: &rng)! },
            allBrands: (0..<(count >= 500_000 ? 30 : 60)).map { BenchData.brands[$0 % BenchData.brands.count] },
            prices: (0..<2000).map { _ in Int64.random(in: 1...1000, using: &rng) },
            updates: (0..<min(10_000, count)).map { _ in
                (BenchData.id(Int.random(in: 0..<count, using: &rng)), Int64.random(in: 1...1000, using: &rng))
            })
    }

    /// Results: measure → system → value.
    typealias Results = [String: [String: Double]]

    /// Rounds of each read and update measure; each system keeps its best round. The rounds
    /// interleave the systems, so slow drifts of a shared machine hit them all alike.
    static let rounds = 3

    static func run(
        count: Int, systems makers: [(String) throws -> any BenchSystem], directory: String, measures: Set<String>? = nil, key: EncryptionKey? = nil
    ) throws
        -> Results
    {
        func wanted(_ name: String) -> Bool { measures?.contains(name) ?? true }
        let inputs = Self.inputs(count: count)
        var results: Results = [:]
        var systems: [any BenchSystem] = []
        defer { for system in systems { try? system.close() } }
        // Loading is repeated on fresh stores when it is short (a small run's load takes a
        // fraction of a second, so one run is mostly noise); the last round's stores stay. The
        // systems load in turns, a slice of batches each (the order rotating), so that a burst
        // of load on a shared machine lands on all of them alike; each keeps its best round.
        let loadRounds = count <= 200_000 ? rounds : 1
        for round in 0..<loadRounds {
            let last = round == loadRounds - 1
            let roundDirectory = directory + "/round-\(round)"
            try FileManager.default.createDirectory(atPath: roundDirectory, withIntermediateDirectories: true)
            let loading = try makers.map { try $0(roundDirectory) }
            log("loading \(count) objects into \(loading.map(\.name).joined(separator: ", ")), in turns of \(loadSlice) batches")
            var generator = BenchData.Generator()
            var loadTimes = Array(repeating: 0.0, count: loading.count)
            var loaded = 0
            var turn = 0
            while loaded < count {
                var batches: [[BenchData.Item]] = []
                while batches.count < loadSlice && loaded < count {
                    let n = min(batchSize, count - loaded)
                    batches.append((0..<n).map { _ in generator.next() })
                    loaded += n
                }
                for k in loading.indices {
                    let s = (k + turn) % loading.count
                    for batch in batches { loadTimes[s] += try timed { try loading[s].load(batch) } }
                }
                turn += 1
            }
            for (system, time) in zip(loading, loadTimes) {
                results["load", default: [:]][system.name] = max(results["load"]?[system.name] ?? 0, Double(count) / time)
                if last {
                    systems.append(system)
                    log("\(system.name): settling")
                    try system.settle()
                    results["disk", default: [:]][system.name] = Double(try bytesOnDisk(roundDirectory, system: system.name)) / 1e6
                } else {
                    try system.close()
                }
            }
            if !last { try? FileManager.default.removeItem(atPath: roundDirectory) }
        }

        // Every system's files into the page cache, untimed: on a machine that reclaims idle
        // cache (this one runs DAMON reclaim), the first-loaded system would otherwise read cold
        // files while the last one reads warm ones.
        log("warming the page cache")
        let roundDirectory = directory + "/round-\(loadRounds - 1)"
        if let files = FileManager.default.enumerator(atPath: roundDirectory) {
            for case let file as String in files {
                if let handle = FileHandle(forReadingAtPath: roundDirectory + "/" + file) {
                    while let data = try? handle.read(upToCount: 1 << 20), !data.isEmpty {}
                    try? handle.close()
                }
            }
        }

        /// Runs `measure` for every system in interleaved rounds, keeping the best value.
        func measure(_ name: String, higherIsBetter: Bool = false, _ body: (any BenchSystem, Int) throws -> Double) rethrows {
            guard wanted(name) else { return }
            log("measuring \(name)")
            for round in 0..<rounds {
                for system in systems {
                    let value = try body(system, round)
                    let best = results[name]?[system.name]
                    if best == nil || (higherIsBetter ? value > best! : value < best!) { results[name, default: [:]][system.name] = value }
                }
            }
        }

        var sink = 0
        // Each round takes its own slice of the inputs, so no round reads what the last one cached.
        func slice<T>(_ all: [T], _ round: Int) -> [T] {
            let size = max(all.count / rounds, 1)
            return Array(all.dropFirst(round * size).prefix(size))
        }
        try measure("get") { system, round in try perOperation(slice(inputs.getIDs, round)) { sink &+= try system.get($0) } * 1e6 }
        try measure("find_eq_limit20") { system, round in
            try perOperation(slice(inputs.brands, round)) { sink &+= try system.findBrand($0, limit: 20) } * 1e6
        }
        var hits = 0, queries = 0
        try measure("find_eq_all") { system, round in
            try perOperation(slice(inputs.allBrands, round), minimum: 2) {
                let n = try system.findBrand($0, limit: nil)
                if system.name == "satchel" {
                    hits += n
                    queries += 1
                }
            } * 1e3
        }
        if queries > 0 {
            log("find_eq_all: \(hits / queries) hits per query (\(String(format: "%.1f", 100 * Double(hits) / Double(queries) / Double(count)))%)")
        }
        try measure("range_order_limit20") { system, round in
            try perOperation(slice(inputs.prices, round)) { sink &+= try system.priceRange(from: $0, limit: 20) } * 1e6
        }
        try measure("update") { system, round in
            try perOperation(slice(inputs.updates, round)) { try system.updatePrice($0.0, to: $0.1) } * 1e6
        }
        try measure("scan", higherIsBetter: true) { system, _ in
            var scanned = 0
            let seconds = try timed { scanned = try system.scan() }
            if scanned != count { throw BenchError("\(system.name) scanned \(scanned) of \(count) objects") }
            return Double(scanned) / seconds
        }
        if wanted("open_query") {
            // Each system closed, then opened again and asked a first indexed query (brand ==
            // B, the first 20), in interleaved rounds; each keeps its best. Satchel's first open
            // here follows the close above (a clean close).
            log("measuring open_query")
            for system in systems { try system.close() }
            systems.removeAll()
            let roundDirectory = directory + "/round-\(loadRounds - 1)"
            // An open takes about a millisecond: more rounds than the other measures, so that
            // each system's best is not one lucky or unlucky moment of the disk.
            for round in 0..<(rounds * 10) {
                let brand = inputs.brands[round % rounds]
                for (name, openAndQuery) in Self.openQueries(key: key) {
                    guard FileManager.default.fileExists(atPath: roundDirectory + "/" + name + (name.hasPrefix("satchel") ? "" : ".db")) else {
                        continue
                    }
                    var found = 0
                    let seconds = try timed { found = try openAndQuery(roundDirectory, brand) }
                    if found != 20 { throw BenchError("\(name) found \(found) objects of \(brand) after opening, not 20") }
                    results["open_query", default: [:]][name] = min(results["open_query"]?[name] ?? .infinity, seconds * 1e3)
                }
            }
        }
        if sink == 42 { print("") }
        return results
    }

    /// Slices of the load: each system loads this many batches in its turn.
    static let loadSlice = 10

    /// The bytes of a system's files (a directory, or a database with its WAL) under `directory`.
    static func bytesOnDisk(_ directory: String, system: String) throws -> Int {
        var total = 0
        let fileManager = FileManager.default
        // `satchel` and not `satchel_plain`; `sqlite_json.db` and its `-wal`.
        for entry in try fileManager.contentsOfDirectory(atPath: directory) where entry == system || entry.hasPrefix(system + ".") {
            let path = directory + "/" + entry
            var isDirectory: ObjCBool = false
            guard fileManager.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
            let files = isDirectory.boolValue ? (fileManager.subpaths(atPath: path) ?? []).map { path + "/" + $0 } : [path]
            for file in files { total += (try? fileManager.attributesOfItem(atPath: file)[.size] as? Int) ?? 0 }
        }
        return total
    }

    /// Opening a settled store and running a first indexed query, per system that has one:
    /// returns how many objects the query found.
    /// `key`: the encrypted store's (`--encrypted`), which `satchel_plain` opens without.
    static func openQueries(key: EncryptionKey?) -> [(String, @Sendable (String, String) throws -> Int)] {
        func satchel(_ name: String, _ key: EncryptionKey?) -> (String, @Sendable (String, String) throws -> Int) {
            (
                name,
                { @Sendable directory, brand in
                    var configuration = Store.Configuration()
                    configuration.encryptionKey = key
                    let store = try Store(path: directory + "/" + name, configuration: configuration)
                    defer { try? store.close() }
                    return try store.model("Product").findAll(Query(where: "brand" == .string(brand), limit: 20)).count
                }
            )
        }
        return [satchel("satchel", key), satchel("satchel_plain", nil)] + otherOpenQueries
    }

    /// For profiling get: `satchel` and `leveldb_raw` under `directory` (a kept `--directory`'s
    /// round), and `leveldb_raw_decoded` (the raw read with its value decoded), each read `gets`
    /// random objects, in interleaved turns of 1,000; prints each one's mean in microseconds.
    /// `configuration`: the run's (`--cache` and the other overrides), for both.
    static func getChild(directory: String, gets: Int, configuration: Store.Configuration) throws {
        let satchel = try SatchelSystem(directory: directory, configuration: configuration)
        let raw = try RawLevelDBSystem(directory: directory, configuration: configuration)
        defer {
            try? satchel.close()
            try? raw.close()
        }
        // The raw read, and the raw read plus Satchel's decoding of the value: the floor of a
        // read that decodes the whole object.
        let systems: [(name: String, get: (String) throws -> Int)] = [
            ("satchel", satchel.get), ("leveldb_raw", raw.get), ("leveldb_raw_decoded", raw.getDecoded),
        ]
        let count = try satchel.scan()
        guard count > 0 else { throw BenchError("no objects under \(directory)/satchel: name a kept --directory's last round") }
        var rng = SplitMix64(seed: 11)
        var total = [Double](repeating: 0, count: systems.count)
        var sink = 0
        for _ in 0..<max(gets / 1000, 1) {
            let ids = (0..<1000).map { _ in BenchData.id(Int.random(in: 0..<count, using: &rng)) }
            // The decoded raw reads get ids of their own: the raw reads' blocks, just read from
            // the same database, would answer them from the processor's caches.
            let otherIDs = (0..<1000).map { _ in BenchData.id(Int.random(in: 0..<count, using: &rng)) }
            for (i, system) in systems.enumerated() {
                let turn = i == 2 ? otherIDs : ids
                total[i] += try timed { for id in turn { sink &+= try system.get(id) } }
            }
        }
        for (i, system) in systems.enumerated() { print(system.name, String(format: "%.3f us", total[i] * 1e6 / Double(max(gets / 1000, 1) * 1000))) }
        if sink == 42 { print("") }
    }

    /// For profiling open_query: each system with a database under `directory` (a kept
    /// `--directory`'s round) opened and asked `rounds` times, interleaved; prints each one's
    /// mean in milliseconds.
    static func openQueryChild(directory: String, rounds: Int) throws {
        var total: [String: Double] = [:]
        for round in 0..<rounds {
            for (name, openAndQuery) in openQueries(key: nil)
            where FileManager.default.fileExists(atPath: directory + "/" + name + (name.hasPrefix("satchel") ? "" : ".db")) {
                let seconds = try timed { _ = try openAndQuery(directory, BenchData.brands[round % BenchData.brands.count]) }
                total[name, default: 0] += seconds
            }
        }
        for (name, seconds) in total.sorted(by: { $0.key < $1.key }) { print(name, String(format: "%.3f ms", seconds * 1e3 / Double(rounds))) }
    }

    static let otherOpenQueries: [(String, @Sendable (String, String) throws -> Int)] = [
        (
            "sqlite_json",
            { directory, brand in
                let db = try SQLiteDatabase(path: directory + "/sqlite_json.db")
                let query = try db.prepare("SELECT id, body FROM docs WHERE json_extract(body, '$.brand') = ? LIMIT 20")
                query.bind(1, brand)
                var n = 0
                while try query.step() { n += try query.parsedObject(1).isEmpty ? 0 : 1 }
                return n
            }
        )
    ]

    static let measures: [(name: String, unit: String)] = [
        ("load", "docs/s"), ("get", "us"), ("find_eq_limit20", "us"), ("find_eq_all", "ms"), ("range_order_limit20", "us"),
        ("update", "us"), ("scan", "docs/s"), ("disk", "MB"), ("open_query", "ms"),
    ]

    static func report(_ results: Results, count: Int) {
        for (measure, unit) in measures {
            guard let values = results[measure], let satchel = values["satchel"] else { continue }
            let baselines = ["satchel_plain", "leveldb_raw", "sqlite_json", "rhoconnect_eav"].compactMap { name in values[name].map { (name, $0) } }
            Report.line(measure, n: count, satchel: satchel, unit: unit, baselines: baselines)
        }
    }

    /// Seconds one measure may take per system; a slow system runs fewer of the inputs (at least
    /// `minimum`), and the measure is the average over those it ran.
    static let budget = 4.0

    /// Runs `body` over `inputs` until done or over budget; returns the seconds per input.
    static func perOperation<T>(_ inputs: [T], minimum: Int = 10, _ body: (T) throws -> Void) rethrows -> Double {
        let start = ContinuousClock.now
        var done = 0
        for input in inputs {
            try body(input)
            done += 1
            if done >= minimum && seconds(ContinuousClock.now - start) > budget { break }
        }
        return seconds(ContinuousClock.now - start) / Double(max(done, 1))
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    static func timed(_ body: () throws -> Void) rethrows -> Double {
        let start = ContinuousClock.now
        try body()
        return seconds(ContinuousClock.now - start)
    }

    static func log(_ text: String) { FileHandle.standardError.write(Data("\(text)\n".utf8)) }
}

// MARK: - Satchel

final class SatchelSystem: BenchSystem {
    let name: String
    private let store: Store
    private let products: Model

    /// A store named `name` (`satchel`, or `satchel_plain` beside an encrypted one).
    init(directory: String, configuration: Store.Configuration, name: String = "satchel") throws {
        self.name = name
        store = try Store(path: directory + "/" + name, configuration: configuration)
        // A cache of server data: no change log. Two indexes, declared before the load.
        products = try store.register(ModelDefinition(name: "Product", syncType: .none))
        try products.createIndex(IndexDefinition("brand"))
        try products.createIndex(IndexDefinition("price"))
    }

    func load(_ batch: [BenchData.Item]) throws {
        try store.bulkUpdate { tx in
            // The id apart from the attributes, as every system takes it (and as an app stores
            // objects whose ids it knows).
            for item in batch { try tx.save(Object(id: item.id, attributes: item.attributes), in: products) }
        }
    }

    func get(_ id: String) throws -> Int { try products.find(id)?.attributes.count ?? 0 }

    func findBrand(_ brand: String, limit: Int?) throws -> Int {
        try products.findAll(Query(where: "brand" == .string(brand), limit: limit)).count
    }

    func priceRange(from price: Int64, limit: Int) throws -> Int {
        try products.findAll(Query(where: "price" >= .int(price), order: [.ascending("price")], limit: limit)).count
    }

    func updatePrice(_ id: String, to price: Int64) throws { try products.update(id, with: ["price": .int(price)]) }

    func scan() throws -> Int {
        var n = 0
        try products.forEach { _ in n += 1 }
        return n
    }

    func settle() throws { try store.compact() }

    func close() throws { try store.close() }
}
