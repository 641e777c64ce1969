import ArgumentParser
import Foundation
import Satchel
import SatchelSync

/// `satchel search`: what the server holds that matches, printed, stored only when asked.
struct SearchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "search",
        abstract: "Ask the server for the objects of a model that match; print them as JSON, one per line.",
        discussion: """
            --where takes the conditions of 'satchel find' (several are and-ed). The server is asked what its query \
            language can say (Parse's where, SOQL, Kinto's filters, RhoConnect's search parameters) and the answer is \
            held to the whole condition, so what is printed is exactly the server's objects that match. Nothing is \
            stored unless --store is given (then as a sync stores a page, but an object with a local change not yet \
            acknowledged is left as it is, so that the next sync still meets what the server changed); the \
            model's sync position never moves. On RhoConnect, whose server keeps what each client was sent, the \
            search reads as another client: storing anything makes the model's next sync a full one, so that the \
            server's later deletes reach it. The store must exist; credentials as for 'satchel sync'.
            """
    )

    @OptionGroup var store: StoreOptions
    @OptionGroup var server: BackendOptions
    @Argument(help: "The model (the server's class, collection, sObject or source of that name).") var model: String
    @Option(name: .customLong("where"), help: "A condition, as find takes it: brand=Acme, 'price < 100 or brand in Acme,Globex'.")
    var conditions: [String] = []
    @Flag(name: .customLong("store"), help: "Store what the server answered, as a sync would (the model must be in the store).")
    var storeObjects = false

    func validate() throws {
        if server.backend == nil { throw ValidationError("search needs --backend and --url") }
        _ = try condition()
    }

    func condition() throws -> Condition { try WhereExpression.condition(conditions) }

    func run() async throws {
        let condition = try condition()
        try await withEngine(store, server) { engine in
            // A model the store lacks is asked for as a property bag; it can be stored only once synced.
            if storeObjects { _ = try engine.store.existingModel(named: model) }
            try await server.logIn(engine, reading: "search")
            for object in try await engine.search(model, where: condition, storing: storeObjects) { Output.line(object.description) }
        }
    }
}

/// `satchel verify`: the drift check.
struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Compare a model in the store with the server's copy, changing neither.",
        discussion: """
            Prints one JSON line per object that differs — {"drift":"onlyHere"|"onlyThere"|"differs", "model", "object", \
            and "here", "there" or "attributes": {ATTR: {"here": …, "there": …}}} — then a summary line \
            {"agree", "model", "objects", "onlyHere", "onlyThere", "differing", "unconfirmed"}. Local changes the server has \
            not confirmed (pending, in flight, refused) account for the differences they make and are counted as \
            unconfirmed, not as drift. Exit 0 when the store and the server agree, 4 when they differ.
            """
    )

    @OptionGroup var store: StoreOptions
    @OptionGroup var server: BackendOptions
    @Argument(help: "The model.") var model: String

    func validate() throws {
        if server.backend == nil { throw ValidationError("verify needs --backend and --url") }
    }

    func run() async throws {
        let report = try await withEngine(store, server) { engine in
            _ = try engine.store.existingModel(named: model)
            try await server.logIn(engine, reading: "verify")
            return try await engine.verify(model)
        }
        for drift in report.drifts {
            var line = drift.json
            line["model"] = .string(report.model)
            Output.line(line.description)
        }
        Output.line(report.summary.description)
        if !report.agrees {
            // One line on stderr, as for every non-zero exit (a black-box probe: there was none).
            let counts = [(DriftReport.Kind.onlyHere, "only here"), (.onlyThere, "only there"), (.differs, "differing")].map {
                kind, words in "\(report.drifts.count { $0.kind == kind }) \(words)"
            }
            Output.note("the store and the server differ on \(report.model): \(counts.joined(separator: ", ")) (the lines above)")
            throw ExitCode(4)
        }
    }
}
