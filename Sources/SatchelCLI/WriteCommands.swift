import ArgumentParser
import Foundation
import Satchel

struct ImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Load a JSON array or JSON-lines file of objects into a model.",
        discussion: """
            The file is checked whole before anything is written: a malformed file changes nothing. Objects are \
            then written in batches, each one transaction. An object with an "object" id replaces the stored one.

            With --graph, each object is a nested object graph: a nested object that names its class ("class", \
            "className", or "__type":"Object" with "className") and its id ("id", "objectId" or "object") is stored \
            in the model of that class under that id, merged by id with what the store holds, and its parent keeps its \
            id (an array of them: the array of ids); the attribute becomes an association of the parent's model. \
            Prints "imported N" (the top-level objects), then one line per other model written. The file is checked \
            whole first, and each partition's objects are written in one transaction (--batch-size does not apply).
            """
    )

    enum ProgressStyle: String, ExpressibleByArgument, CaseIterable {
        case auto, bar, lines, none
    }

    @OptionGroup var store: StoreOptions
    @Argument(help: "The model to load into.") var model: String
    @Argument(help: "The JSON array or JSON-lines file.") var file: String
    @Option(help: "Objects per transaction.") var batchSize = 1000
    @Option(help: "Progress on stderr: auto (a bar on a terminal), bar, lines, none.") var progress = ProgressStyle.auto
    @Flag(help: "Decompose nested objects that name their class and id into objects of those models.") var graph = false

    func run() throws {
        if graph { return try importGraph() }
        let style = progress == .auto ? (Output.stderrIsTerminal ? .bar : .none) : progress
        let bar = ProgressBar()
        let count = try store.leavingNoTrace {
            try store.withStore(creating: true) { store in
                try store.importObjects(
                    from: URL(fileURLWithPath: file), into: try store.model(model), batchSize: batchSize
                ) { state in
                    switch style {
                    case .bar: bar.draw(state)
                    case .lines:
                        if state.phase == .writing && state.batches > 0 {
                            Output.progress("batch \(state.batches) committed: \(state.items) objects\n")
                        }
                    case .none, .auto: break
                    }
                }
            }
        }
        if style == .bar { bar.finish() }
        Output.line("imported \(count)")
    }

    /// `import --graph`: `imported N`, then `  MODEL: n` for each other model written, by name.
    private func importGraph() throws {
        let summary = try store.leavingNoTrace {
            try store.withStore(creating: true) { store in try store.importGraph(from: URL(fileURLWithPath: file), model: model) }
        }
        Output.line("imported \(summary.roots)")
        for (name, count) in summary.objects.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) where name != model {
            Output.line("  \(name): \(count)")
        }
    }
}

/// A one-line progress bar redrawn in place on a terminal.
final class ProgressBar {
    private var lastDrawn = ""

    func draw(_ state: ImportProgress) {
        switch state.phase {
        case .validating:
            draw(
                fraction: state.totalBytes > 0 ? Double(state.bytesRead) / Double(state.totalBytes) : 0,
                label: "checking \(state.items) objects")
        case .writing:
            let total = max(state.totalItems ?? 1, 1)
            draw(fraction: Double(state.items) / Double(total), label: "\(state.items)/\(total) objects")
        }
    }

    func draw(fraction: Double, label: String) {
        let width = 30
        let filled = Int((min(max(fraction, 0), 1) * Double(width)).rounded())
        let line = "[\(String(repeating: "#", count: filled))\(String(repeating: "-", count: width - filled))] \(Int(fraction * 100))% \(label)"
        if line != lastDrawn {
            Output.progress("\r\u{1B}[K" + line)
            lastDrawn = line
        }
    }

    func finish() {
        if !lastDrawn.isEmpty { Output.progress("\r\u{1B}[K") }
    }
}

struct PutCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "put",
        abstract: "Store one object: replaces the object with its \"object\" id, or creates one with a new id.",
        discussion: """
            Prints the stored object; when the null rule deleted it (no attribute left), one line on stderr says so, \
            and when it held only nulls and no such object existed, one line says nothing was stored.
            """
    )

    @OptionGroup var store: StoreOptions
    @Argument(help: "The model.") var model: String
    @Argument(help: "The object as JSON.") var json: String

    func run() throws {
        let attributes = try parseObjectArgument(json)
        let id = attributes[Object.idAttribute]?.stringValue
        let (stored, existed) = try store.leavingNoTrace {
            try store.withStore(creating: true) { store in
                let handle = try store.model(model)
                let existed = try id.map { try handle.find($0) != nil } ?? false
                return (try handle.put(attributes), existed)
            }
        }
        if stored == nil && !existed {
            Output.note("nothing stored in \(model): every attribute is null (null removes an attribute)")
        } else {
            report(stored, model: model, id: id)
        }
    }
}

/// Prints a stored object on stdout, or, when the null rule deleted it, says so on stderr (so a
/// script reading stdout sees no object).
func report(_ stored: Object?, model: String, id: String?) {
    if let stored {
        Output.line(stored.description)
    } else {
        Output.note("deleted \(model) \(id ?? "object"): no attribute left (null removes an attribute)")
    }
}

struct UpdateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "update",
        abstract: "Merge attributes into an object: each given attribute replaces the old value; null removes it.",
        discussion: "Prints the stored object; when the null rule deleted it (no attribute left), one line on stderr says so."
    )

    @OptionGroup var store: StoreOptions
    @Argument(help: "The model.") var model: String
    @Argument(help: "The object id.") var id: String
    @Argument(help: "The attributes as a JSON object.") var json: String

    func run() throws {
        let attributes = try parseObjectArgument(json)
        let stored = try store.withStore { store in
            try store.existingModel(named: model).update(id, with: attributes)
        }
        report(stored, model: model, id: id)
    }
}

struct DeleteCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete one object. Exits 1 when there is no such object."
    )

    @OptionGroup var store: StoreOptions
    @Argument(help: "The model.") var model: String
    @Argument(help: "The object id.") var id: String

    func run() throws {
        let existed = try store.withStore { store in
            try store.existingModel(named: model).delete(id)
        }
        if !existed { throw SatchelError(.notFound, "model '\(model)' has no object '\(id)'") }
    }
}
