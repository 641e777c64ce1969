import Foundation

// The crash campaign's command line (scripts/crash-campaign.sh runs it):
//
//   CrashCampaign [--kills N] [--scale F] [--seed S] [--work DIR] [--satchel PATH] [SCENARIO…]
//   CrashCampaign bulk-writer DB ROUNDS        (the transaction writer the bulk scenario kills)
//
// SCENARIO is import, bulk, pull, push, index, backup, migrate or damage (default: all).
// --scale multiplies the object counts (1: 200,000 imported, 20,000 per transaction, 100,000
// pulled, 5,000 pushed, 200,000 indexed, 100,000 backed up, 100,000 migrated, 20,000 in each
// damaged store). The damage
// scenario damages N stores (--kills) instead of killing a run. It prints one line per scenario
// and a total, and exits 1 on any failure.

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "bulk-writer" {
    do {
        try Campaign.bulkWriter(Array(arguments.dropFirst()))
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("bulk-writer: \(error)\n".utf8))
        exit(1)
    }
}

func usage(_ message: String) -> Never {
    FileHandle.standardError.write(Data("CrashCampaign: \(message)\n".utf8))
    exit(2)
}

var kills = 50
var scale = 1.0
var seed = UInt64(Date().timeIntervalSince1970)
var work: String?
let here = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
var satchel = here.appendingPathComponent("satchel").path
var scenarios: [String] = []
var iterator = arguments.makeIterator()
while let argument = iterator.next() {
    func value() -> String {
        guard let value = iterator.next() else { usage("\(argument) needs a value") }
        return value
    }
    func number<T: LosslessStringConvertible>(_: T.Type) -> T {
        guard let number = T(value()) else { usage("\(argument) takes a number") }
        return number
    }
    switch argument {
    case "--kills": kills = number(Int.self)
    case "--scale": scale = number(Double.self)
    case "--seed": seed = number(UInt64.self)
    case "--work": work = value()
    case "--satchel": satchel = value()
    case "import", "bulk", "pull", "push", "index", "backup", "migrate", "encrypt", "damage": scenarios.append(argument)
    default: usage("unknown argument '\(argument)'")
    }
}
if scenarios.isEmpty { scenarios = ["import", "bulk", "pull", "push", "index", "backup", "migrate", "encrypt", "damage"] }
guard FileManager.default.isExecutableFile(atPath: satchel) else { usage("no satchel executable at \(satchel) (pass --satchel)") }

let workDirectory = work ?? NSTemporaryDirectory() + "satchel-crash-\(getpid())"
try FileManager.default.createDirectory(atPath: workDirectory, withIntermediateDirectories: true)
let factor = scale
func scaled(_ n: Int) -> Int { max(1, Int((Double(n) * factor).rounded())) }
let settings = Campaign.Settings(
    kills: kills, importObjects: scaled(200_000), bulkObjects: scaled(20_000), pullObjects: scaled(100_000), pushChanges: max(5, scaled(5_000)),
    indexObjects: scaled(200_000), backupObjects: scaled(100_000), migrateObjects: scaled(100_000), encryptObjects: scaled(50_000),
    damageObjects: scaled(20_000), seed: seed,
    satchel: satchel,
    campaign: CommandLine.arguments[0], work: workDirectory)

/// Prints a line at once (the script shows progress as it comes).
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

/// Runs the scenarios; returns the exit status.
func runCampaign(_ settings: Campaign.Settings, _ scenarios: [String], scale: Double) async -> Int32 {
    var campaign = Campaign(settings)
    say("crash campaign: seed \(settings.seed), \(settings.kills) kills per scenario, scale \(scale), in \(settings.work)")
    var total = Campaign.Tally()
    var damaged = 0
    for scenario in scenarios {
        let tally: Campaign.Tally
        let size: String
        do {
            switch scenario {
            case "import":
                tally = try campaign.importScenario()
                size = "\(settings.importObjects) objects imported"
            case "bulk":
                tally = try campaign.bulkScenario()
                size = "\(settings.bulkObjects) objects per transaction"
            case "pull":
                tally = try await campaign.pullScenario()
                size = "\(settings.pullObjects) objects pulled"
            case "push":
                tally = try await campaign.pushScenario()
                size = "\(settings.pushChanges) changes pushed"
            case "backup":
                tally = try campaign.backupScenario()
                size = "\(settings.backupObjects) objects backed up"
            case "migrate":
                tally = try campaign.migrateScenario()
                size = "\(settings.migrateObjects) objects migrated"
            case "encrypt":
                tally = try campaign.encryptionScenario()
                size = "\(settings.encryptObjects) objects encrypted, rekeyed and decrypted in turn"
            case "damage":
                var figures = Campaign.DamageFigures()
                tally = try campaign.damageScenario(figures: &figures)
                for failure in tally.failures { say("  FAILURE \(failure)") }
                say(
                    "crash damage: \(figures.stores) stores damaged (flipped bytes, first blocks, log cut short, MANIFEST gone, CURRENT gone in turn), \(figures.objects) objects written, \(figures.survived) whose bytes survived, \(figures.salvaged) salvaged, \(figures.queries) indexed counts compared with scans (\(figures.indexesDeclaredAgain) indexes declared again as repair asked), failures: \(tally.failures.count), \(Int(tally.seconds)) s"
                )
                total.failures += tally.failures
                damaged += figures.stores
                continue
            default:
                tally = try campaign.indexScenario()
                size = "\(settings.indexObjects) objects indexed"
            }
        } catch {
            say("crash \(scenario): could not run: \(error)")
            return 1
        }
        for failure in tally.failures { say("  FAILURE \(failure)") }
        let landed = tally.landed.sorted { $0.key < $1.key }.map { "; \($0.value) \($0.key)" }.joined()
        say(
            "crash \(scenario): \(tally.kills) kills (\(tally.finished) runs ended before their kill\(landed)), \(size), failures: \(tally.failures.count), \(Int(tally.seconds)) s"
        )
        total.kills += tally.kills
        total.finished += tally.finished
        total.failures += tally.failures
    }
    let killed = scenarios.filter { $0 != "damage" }.count
    say(
        "crash campaign: \(total.kills) kills in \(killed) scenarios\(scenarios.contains("damage") ? ", \(damaged) damaged stores repaired" : ""), failures: \(total.failures.count)"
    )
    return total.failures.isEmpty ? 0 : 1
}

let status = await runCampaign(settings, scenarios, scale: factor)
if work == nil { try? FileManager.default.removeItem(atPath: workDirectory) }
exit(status)
