import ArgumentParser
import Foundation

/// `satchel-bench`: Satchel against baselines run in the same process on the same data.
/// Prints one line per measure and baseline: `<measure> n=N satchel=X <unit> baseline_<name>=Y <unit> ratio=X/Y`
/// (units ending in `/s` are throughputs, higher is better; others are times, lower is better).
@main
struct SatchelBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "satchel-bench",
        abstract: "Measure Satchel against baselines in the same process. Build with -c release."
    )

    enum Group: String, ExpressibleByArgument, CaseIterable {
        case codec
    }

    @Option(help: "Number of documents.") var docs = 100_000
    @Option(help: "Comma-separated groups to run: \(Group.allCases.map(\.rawValue).joined(separator: ", ")).")
    var only: String?

    func run() throws {
        let groups = try only.map { list in
            try list.split(separator: ",").map { name in
                guard let group = Group(rawValue: String(name)) else { throw ValidationError("unknown group '\(name)'") }
                return group
            }
        } ?? Group.allCases
        #if DEBUG
        FileHandle.standardError.write(Data("warning: a debug build; measure with swift run -c release satchel-bench\n".utf8))
        #endif
        for group in groups {
            switch group {
            case .codec: try CodecBench.run(count: docs)
            }
        }
    }
}
