import Foundation
import Satchel
import SatchelSync
import SatchelTestSupport

/// A crash campaign: runs the `satchel` executable (or the campaign's own bulk writer) on a
/// store, kills it with SIGKILL at a random moment, checks the store as the next run would find
/// it, and goes on from there. See `scripts/crash-campaign.sh` and docs/RELIABILITY.md.
struct Campaign {
    /// How big and how long.
    struct Settings {
        /// Kills that must land per scenario (a run that ends before its kill does not count).
        var kills: Int
        /// Objects of each scenario: imported, updated per transaction, pulled, pushed, indexed.
        var importObjects = 200_000
        var bulkObjects = 20_000
        var pullObjects = 100_000
        var pushChanges = 5_000
        var indexObjects = 200_000
        var backupObjects = 100_000
        var migrateObjects = 100_000
        var encryptObjects = 50_000
        /// Objects in each store the damage scenario damages.
        var damageObjects = 20_000
        var seed: UInt64
        /// The `satchel` executable.
        var satchel: String
        /// This executable (its `bulk-writer` mode).
        var campaign: String
        /// Where stores, files and the servers' state go.
        var work: String
    }

    /// One scenario's tally.
    struct Tally {
        var kills = 0
        /// Runs that finished before their kill came.
        var finished = 0
        var failures: [String] = []
        var seconds = 0.0
        /// Where the kills landed, when a scenario tells (`while writing: 31`), for its line.
        var landed: [String: Int] = [:]
    }

    let settings: Settings
    var random: SplitMix64

    init(_ settings: Settings) {
        self.settings = settings
        random = SplitMix64(seed: settings.seed)
    }

    // MARK: - Running and killing

    /// A run of a program that may have been killed.
    struct Run {
        var killed: Bool
        var status: Int32
        var stdout: String
        var stderr: String
        var seconds: Double
    }

    /// Runs `arguments` of the `satchel` executable, killing it after `killAfter` when given.
    func satchel(_ arguments: [String], killAfter: Duration? = nil) throws -> Run {
        try run(settings.satchel, arguments, killAfter: killAfter)
    }

    func run(_ executable: String, _ arguments: [String], killAfter: Duration? = nil) throws -> Run {
        let started = ContinuousClock.now
        let result = try ChildProcess.run(executable, arguments, killAfter: killAfter)
        let seconds = Self.seconds(ContinuousClock.now - started)
        return Run(
            killed: result.signaled && result.status == SIGKILL, status: result.status,
            stdout: String(decoding: result.stdout, as: UTF8.self), stderr: String(decoding: result.stderr, as: UTF8.self), seconds: seconds)
    }

    /// Runs `satchel arguments` to its end, failing unless it exits 0.
    @discardableResult
    func satchelOK(_ arguments: [String]) throws -> Run {
        let run = try satchel(arguments)
        guard !run.killed, run.status == 0 else {
            throw Finding(
                "satchel \(arguments.joined(separator: " ")) exited \(run.status): \(run.stderr.trimmingCharacters(in: .whitespacesAndNewlines))")
        }
        return run
    }

    /// A moment to kill at: uniform over the first `fraction` of `seconds` (at least 5 ms).
    mutating func moment(within seconds: Double, fraction: Double = 1) -> Duration {
        let upper = max(0.005, seconds * fraction)
        return .milliseconds(Int64(5 + random.unit() * (upper - 0.005) * 1000))
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    // MARK: - Checks every kill gets

    /// `satchel check` on the store, as the next run would do it: it must pass.
    func checkStore(_ db: String) throws {
        let run = try satchel(["--db", db, "check"])
        guard run.status == 0 else {
            throw Finding("satchel check failed (\(run.status)): \(run.stdout.suffix(400)) \(run.stderr.suffix(400))")
        }
    }

    /// Opens the store (no other process has it), runs `body`, closes it.
    func withStore<T>(_ db: String, _ body: (Store) throws -> T) throws -> T {
        let store = try Store(path: db)
        defer { try? store.close() }
        return try body(store)
    }

    /// A fresh, empty directory under the work directory.
    func freshDirectory(_ name: String) throws -> String {
        let path = (settings.work as NSString).appendingPathComponent(name)
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}

/// What a check found wrong.
struct Finding: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Asserts `condition`, or throws a finding saying `what`.
func require(_ condition: Bool, _ what: @autoclosure () -> String) throws {
    if !condition { throw Finding(what()) }
}
