import ArgumentParser
import Foundation
import Satchel

struct ImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Load a JSON array or JSON-lines file of objects into a model.",
        discussion: """
            The file is checked whole before anything is written: a malformed file changes nothing. A file another \
            process changes meanwhile is refused, saying how many of its items were written (none, when it changed \
            while it was checked). Objects are \
            then written in batches, each one transaction. An object with an "object" id replaces the stored one; \
            one whose attributes are all null (or that has none but its id) deletes it, as every write does, and \
            counts among the N of "imported N": the items the file held.

            With --graph, each object is a nested object graph: a nested object that names its class ("class", \
            "className", or "__type":"Object" with "className") and its id ("id", "objectId" or "object") is stored \
            in the model of that class under that id, merged by id with what the store holds, and its parent keeps its \
            id (an array of them: the array of ids); the attribute becomes an association of the parent's model. \
            Prints "imported N" (the top-level objects), then on stderr one line per other model written. The file is checked \
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

    func validate() throws {
        if batchSize < 1 { throw ValidationError("--batch-size must be at least 1") }
    }

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

    /// `import --graph`: `imported N`, as every import prints it; then, on stderr, `  MODEL: n`
    /// for each other model written, by name (a black-box probe: on stdout they broke the line
    /// the contract promises).
    private func importGraph() throws {
        let summary = try store.leavingNoTrace {
            try store.withStore(creating: true) { store in try store.importGraph(from: URL(fileURLWithPath: file), model: model) }
        }
        Output.line("imported \(summary.roots)")
        for (name, count) in summary.objects.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) where name != model {
            Output.progress("  \(name): \(count)\n")
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
            Prints the stored object; when the null rule deleted it (no attribute left), one line on stderr says so. \
            An object of only nulls (or none) and no existing object of its id is refused: nothing would be stored.
            """
    )

    @OptionGroup var store: StoreOptions
    @Argument(help: "The model.") var model: String
    @Argument(help: "The object as JSON.") var json: String

    func run() throws {
        let attributes = try parseObjectArgument(json)
        let id = attributes[Object.idAttribute]?.stringValue
        let onlyNulls = attributes.allSatisfy { $0.key == Object.idAttribute || $0.value.isNull }
        let stored = try store.leavingNoTrace {
            try store.withStore(creating: true) { store in
                // Only nulls delete the object (the null rule); with no such object they would
                // store nothing, as a put without an id: refused alike, nothing changed (no model
                // named, no store made).
                if onlyNulls, let id {
                    let exists = try store.existingModel(model)?.find(id) != nil
                    guard exists else {
                        throw SatchelError(
                            .invalidObject, "an object needs at least one non-null attribute (there is no object '\(id)' in \(model) to delete)",
                            model: model, objectID: id)
                    }
                }
                return try store.model(model).put(attributes)
            }
        }
        report(stored, model: model, id: id)
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

struct MigrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Run the migration steps in FILE (JSON) on a model: each migration once per store, resumable after a kill.",
        discussion: """
            FILE holds a migration or an array of them: {"name": "v2", "steps": [...], "push": false}, each step one of \
            {"rename": "a", "to": "b"}, {"add": "a", "default": V}, {"remove": "a"}, {"convert": "a", "to": \
            "string|number|integer|boolean"}, {"createIndex": "a,b"} (a[] or a path into arrays such as items[].sku for an array-element index; "keysOnly": true; \
            "text": true for the full-text index), {"dropIndex": "a,b"} ("text": true for the full-text index), {"schema": {"a": "string", …}} or {"schema": null}. A step's attribute is a path as in \
            queries: "address.city" (a nested object), "items[].qty" (each element of an array), or one attribute's \
            name written as a JSON string, whatever it holds but a [] at its end ("\\"a.b\\""); a rename stays within the object that holds it. convert: to string, any value becomes its JSON text; to number, a string holding \
            a JSON number (a leading + allowed); to integer, a whole number within 64 bits or a string of digits \
            ("-12", "+5"); to boolean, "true"/"false" (any case), "1"/"0", 1/0; a string is read without the white \
            space around it; a null or missing value stays so. \
            Every object is checked first: one \
            that does not migrate refuses the migration and nothing of it changes (migrations before it in FILE stay \
            applied, as the error says). "push": true makes the rewrites changes to \
            push (synced models); by default a migration changes the local representation only. --dry-run prints each \
            object that would change as {"after": …, "before": …, "object": ID} (after null: deleted), then a summary \
            line, and writes nothing; each migration of FILE is checked against the store as the ones before it \
            leave it (they run on a scratch copy).
            """
    )

    @OptionGroup var store: StoreOptions
    @Argument(help: "The model.") var model: String
    @Argument(help: "The JSON file of the migration (or an array of them).") var file: String
    @Flag(help: "Check every object and print what would change; write nothing.") var dryRun = false

    func run() throws {
        let data: Data
        // A file that cannot be read is an io error, as `import`'s is.
        do { data = try Data(contentsOf: URL(fileURLWithPath: file)) } catch { throw SatchelError(.io, "cannot read '\(file)'") }
        let json: JSONValue
        do { json = try JSONValue(parsing: data) } catch { throw SatchelError(.malformedJSON, "'\(file)' is not JSON: \(error)") }
        let items = json.arrayValue ?? [json]
        // A file that lists none is a mistake, not a migration that did nothing.
        guard !items.isEmpty else { throw SatchelError(.invalidArgument, "'\(file)' lists no migration") }
        let bar = Output.stderrIsTerminal && !dryRun ? ProgressBar() : nil
        var steps: [String: [MigrationStep]] = [:]
        // A dry run's lines print once it went through: one the migration refuses prints none.
        var changes: [String] = []
        let reports = try store.withStore { store in
            let handle = try store.existingModel(named: model)
            let migrations = try items.enumerated().map { index, item in
                guard let object = item.objectValue else {
                    throw SatchelError(.invalidArgument, "'\(file)': migration \(index + 1) is not a JSON object")
                }
                return try Migration(model: handle.name, json: object)
            }
            for migration in migrations { steps[migration.name] = migration.steps }
            let progress: (MigrationProgress) -> Void = { progress in
                let label = "\(progress.migration): \(progress.phase == .checking ? "checking" : "writing") \(progress.processed)/\(progress.total)"
                bar?.draw(fraction: progress.total > 0 ? Double(progress.processed) / Double(progress.total) : 1, label: label)
            }
            let heard: (MigrationChange) -> Void = { change in
                var line: JSONObject = ["object": .string(change.objectID), "before": .object(change.before)]
                line["after"] = change.after.map(JSONValue.object) ?? .null
                changes.append(JSONValue.object(line).description)
            }
            guard dryRun && migrations.count > 1 else { return try store.migrate(migrations, dryRun: dryRun, progress: progress, changes: heard) }
            return try Self.dryRunInTurn(migrations, of: store, configuration: try self.store.configuration(), changes: heard)
        }
        bar?.finish()
        for change in changes { Output.line(change) }
        for report in reports {
            let what = "migration '\(report.migration)' of \(report.model)"
            if report.alreadyApplied {
                Output.line("already applied: \(what)")
            } else if dryRun {
                // What it would do beside rewriting objects: its index and kind steps.
                for step in steps[report.migration] ?? [] {
                    switch step {
                    case .createIndex(let definition): Output.line("dry run: \(what) would create index \(definition)")
                    case .dropIndex(let definition): Output.line("dry run: \(what) would drop index \(definition)")
                    case .setKind(.propertyBag): Output.line("dry run: \(what) would make the model a property bag")
                    case .setKind(.fixedSchema(let schema)):
                        Output.line("dry run: \(what) would give the model a fixed schema of \(schema.keys.sorted().joined(separator: ", "))")
                    default: break
                    }
                }
                Output.line(
                    "dry run: \(what) would change \(report.changed) of \(report.objects) objects (\(report.deleted) deleted); nothing was written")
            } else {
                Output.line("migrated: \(what): \(report.changed) of \(report.objects) objects changed (\(report.deleted) deleted)")
            }
        }
    }
}

extension MigrateCommand {
    /// A dry run of several migrations, each against the store as the ones before it leave it
    /// (a black-box probe: each was checked against the store as it is, so a list whose second
    /// migration the first makes impossible dry-ran clean and then stopped half-applied). They run
    /// on a backup in a scratch directory, each dry-run then applied there; the store is not
    /// written, and the copy goes.
    static func dryRunInTurn(
        _ migrations: [Migration], of store: Store, configuration: Store.Configuration, changes: @escaping (MigrationChange) -> Void
    ) throws -> [MigrationReport] {
        let temporary = FileManager.default.temporaryDirectory
        removeLeftDryRuns(in: temporary.path)
        let scratch = temporary.appendingPathComponent("\(dryRunPrefix)\(getpid())-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        try store.backup(to: scratch)
        let copy = try Store(path: scratch, configuration: configuration)
        defer { try? copy.close() }
        var reports: [MigrationReport] = []
        for migration in migrations {
            do {
                let report = try copy.migrate([migration], dryRun: true, changes: changes)
                reports += report
                if report.contains(where: { !$0.alreadyApplied }) { try copy.migrate([migration]) }
            } catch let error as SatchelError where !reports.isEmpty {
                let before = reports.map { "'\($0.migration)'" }.joined(separator: ", ")
                throw SatchelError(
                    error.code, "\(error.message) (checked after the migrations before it in the list, \(before); nothing was written)",
                    model: error.model, objectID: error.objectID)
            }
        }
        return reports
    }

    static let dryRunPrefix = "satchel-dry-run-"

    /// Removes the scratch copies of dry runs whose process is gone (killed before it removed
    /// its copy: a black-box probe found full copies of stores left in the temporary directory).
    /// A copy is named after its process id.
    static func removeLeftDryRuns(in directory: String) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where name.hasPrefix(dryRunPrefix) {
            guard let pid = Int32(name.dropFirst(dryRunPrefix.count).prefix { $0 != "-" }), pid > 0 else { continue }
            if kill(pid, 0) == -1 && errno == ESRCH { try? FileManager.default.removeItem(atPath: directory + "/" + name) }
        }
    }
}
