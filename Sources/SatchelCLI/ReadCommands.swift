import ArgumentParser
import Foundation
import Satchel

struct FindCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find",
        abstract: "Query a model.",
        discussion: """
            Prints the matching objects as JSON, one per line. --where takes ATTR OP VALUE in one argument; \
            several are and-ed. --id of a missing object prints nothing and exits 1.
            """
    )

    @OptionGroup var store: StoreOptions
    @Argument(help: "The model.") var model: String
    @Option(help: "Only the object with this id.") var id: String?
    @Option(name: .customLong("where"), help: "A condition ATTR OP VALUE, e.g. brand=Acme.") var conditions: [String] = []
    @Flag(help: "Print the number of matches instead of the objects.") var count = false

    func run() throws {
        let conditions = try self.conditions.map(Condition.init(parsing:))
        var equality = JSONObject()
        for condition in conditions {
            guard condition.op == .equal else {
                throw SatchelError(.notSupported, "operator '\(condition.op.rawValue)' is not supported yet; use =")
            }
            equality[condition.attribute] = condition.value
        }
        let missing = try store.withStore { store -> Bool in
            // Reading never registers a model: an unknown model has no objects.
            let model = store.existingModel(model)
            if let id {
                guard let document = try model?.find(id), document.matches(equality) else { return true }
                Output.line(count ? "1" : document.description)
                return false
            }
            if count {
                Output.line(String(try model?.count(where: equality) ?? 0))
            } else if let model {
                for document in try model.findAll(where: equality) { Output.line(document.description) }
            }
            return false
        }
        if missing { throw ExitCode.failure }
    }
}

struct StatsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Per model: objects, indexes, pending changes by kind, sync errors, bytes on disk."
    )

    @OptionGroup var store: StoreOptions
    @Flag(help: "One JSON object per model per line.") var json = false

    func run() throws {
        try store.withStore { store in
            for definition in store.models {
                let statistics = try store.model(definition.name).statistics()
                if json {
                    let line: JSONObject = [
                        "model": .string(statistics.model), "partition": .string(statistics.partition.rawValue),
                        "objects": .int(Int64(statistics.objects)),
                        "pending": [
                            "create": .int(Int64(statistics.pendingCreates)), "update": .int(Int64(statistics.pendingUpdates)),
                            "delete": .int(Int64(statistics.pendingDeletes)),
                        ],
                        "errors": 0, "indexes": .object(JSONObject()), "bytes": .int(Int64(statistics.approximateBytes)),
                    ]
                    Output.line(line.description)
                } else {
                    Output.line(
                        "\(statistics.model): partition=\(statistics.partition.rawValue) objects=\(statistics.objects) "
                            + "pending create=\(statistics.pendingCreates) update=\(statistics.pendingUpdates) delete=\(statistics.pendingDeletes) "
                            + "errors=0 indexes=none bytes≈\(statistics.approximateBytes)")
                }
            }
        }
    }
}

struct CheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Verify that every stored record decodes and is consistent; exits 1 on any problem."
    )

    @OptionGroup var store: StoreOptions

    func run() throws {
        let report = try store.withStore { try $0.verify() }
        for problem in report.problems { Output.line("problem: \(problem)") }
        if report.problemCount > report.problems.count {
            Output.line("… and \(report.problemCount - report.problems.count) more problems")
        }
        Output.line(
            "checked \(report.keys) keys: \(report.models) models, \(report.objects) objects, \(report.pendingChanges) pending changes; "
                + (report.isHealthy ? "ok" : "\(report.problemCount) problems"))
        if !report.isHealthy { throw ExitCode.failure }
    }
}

struct RepairCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "repair",
        abstract: "Rebuild a damaged store from the files that survive, recount, and check it.",
        discussion: "Use it when opening the store fails with a corruption error. Exits 1 if problems remain."
    )

    @OptionGroup var store: StoreOptions

    func run() throws {
        guard FileManager.default.fileExists(atPath: store.path) else {
            throw SatchelError(.storeMissing, "no store at \(store.path)")
        }
        let report = try Store.repair(path: store.path)
        for problem in report.problems { Output.line("problem: \(problem)") }
        Output.line("repaired: \(report.models) models, \(report.objects) objects, \(report.pendingChanges) pending changes; "
            + (report.isHealthy ? "ok" : "\(report.problemCount) problems remain"))
        if !report.isHealthy { throw ExitCode.failure }
    }
}
