import Foundation

/// Timing and the one-line report format (docs/BENCHMARKS.md):
/// `<measure> n=N satchel=X <unit> baseline_<name>=Y <unit> ratio=X/Y`.
enum Report {
    /// Seconds taken by `body`, best of `repeats` runs (after one warm-up run when `warmUp`).
    static func seconds(repeats: Int = 3, warmUp: Bool = true, _ body: () throws -> Void) rethrows -> Double {
        if warmUp { try body() }
        var best = Double.infinity
        for _ in 0..<repeats {
            let start = ContinuousClock.now
            try body()
            best = min(best, seconds(ContinuousClock.now - start))
        }
        return best
    }

    /// `duration` in seconds.
    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    static func format(_ value: Double) -> String {
        if value >= 100 { return String(Int(value.rounded())) }
        if value >= 10 { return String(format: "%.1f", value) }
        return String(format: "%.2f", value)
    }

    /// Prints one line per baseline. `unit` ending in "/s" means higher is better.
    static func line(_ measure: String, n: Int, satchel: Double, unit: String, baselines: [(String, Double)]) {
        for (name, value) in baselines {
            print(
                "\(measure) n=\(n) satchel=\(format(satchel)) \(unit) baseline_\(name)=\(format(value)) \(unit) ratio=\(String(format: "%.2f", satchel / value))"
            )
        }
    }
}

extension Report {
    /// The directory a group writes its stores into: `given`, or a new temporary one named for
    /// the group; created when missing.
    static func scratchDirectory(_ group: String, given: String?) throws -> String {
        let path =
            given
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("satchel-\(group)-bench-\(ProcessInfo.processInfo.processIdentifier)")
            .path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Removes a scratch directory the benchmark made (never one it was given).
    static func removeScratch(_ path: String, given: String?) {
        if given == nil { try? FileManager.default.removeItem(atPath: path) }
    }
}
