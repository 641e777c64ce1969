import ArgumentParser
import Foundation
import Satchel
import SatchelSync

struct FindCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find",
        abstract: "Query a model.",
        discussion: """
            Prints the matching objects as JSON, one per line. --where takes an expression: comparisons ATTR OP VALUE \
            with OP one of = (or ==) != < <= > >= ^= (prefix) ~= (contains), ATTR in V1,V2 (or in (V1, V2)), ATTR \
            exists, ATTR missing, joined by and, or, not and parentheses ('brand=Acme and (price < 10 or tags ~= sale)'). \
            VALUE is read as JSON when it parses, else as a string; a VALUE that is empty or holds spaces, parentheses, \
            commas, operator characters or those words is written in double quotes (name="" or name="Acme or not"). \
            A mistake names its column. Several --where are and-ed. Attribute paths may reach into objects with dots \
            (address.city); an attribute's name written as a JSON string is that one name, whatever it holds but a [] at its end \
            ("a.b"=8, "unit price"<10, "in" exists), in every option that takes a path. --order takes ATTR, ATTR:asc or ATTR:desc. --id of a missing object prints one line on \
            stderr and exits 1 (with --count it prints 0). A model the store does not have is an error. --include (with --id) prints the object \
            with the named associations resolved into nested objects (customer, items, customer.address; an id whose \
            object is missing stays an id).
            """
    )

    @OptionGroup var store: StoreOptions
    @Argument(help: "The model.") var model: String
    @Option(help: "Only the object with this id.") var id: String?
    @Option(name: .customLong("where"), help: "A condition, e.g. brand=Acme, 'price < 100' or 'brand=Acme or not tags ~= sale'.")
    var conditions: [String] = []
    @Option(help: ArgumentHelp("Order by ATTR, ascending, or ATTR:desc (ATTR:asc); repeat for more keys.", valueName: "attr[:desc]"))
    var order: [String] = []
    @Option(parsing: .unconditional, help: "At most this many objects (a positive integer).") var limit: Int?
    @Option(parsing: .unconditional, help: "Skip this many objects first.") var offset = 0
    @Option(help: ArgumentHelp("Only these attributes (comma list; items[].x keeps each element's x).", valueName: "a,b")) var select: String?
    @Option(
        help: ArgumentHelp("Full-text search in the model's text index: words, \"a phrase\", pref*; prints matches best first.", valueName: "query"))
    var match: String?
    @Flag(help: "Print the number of matches instead of the objects.") var count = false
    @Flag(help: "Print how the query runs (index or scan) instead of running it.") var explain = false
    @Flag(help: "Refuse (exit 2, one line naming the attribute to index) a query that would scan the whole model.")
    var requireIndex = false
    @Option(help: ArgumentHelp("With --id: resolve these associations into nested objects (comma list of paths).", valueName: "path,…"))
    var include: String?

    func validate() throws {
        if let limit, limit < 1 { throw ValidationError("--limit must be a positive integer, not \(limit)") }
        if offset < 0 { throw ValidationError("--offset must be zero or a positive integer, not \(offset)") }
        if let match {
            if match.allSatisfy(\.isWhitespace) { throw ValidationError("--match needs a word, a \"phrase\" or a pref* to look for") }
            // A query that does not parse is a usage error, as an empty one is (a black-box probe: it exited 1).
            do { _ = try TextQuery(parsing: match) } catch { throw ValidationError("--match: \(error.message)") }
        }
        if match != nil && (id != nil || include != nil) {
            throw ValidationError("--match searches the text index: it does not combine with --id or --include")
        }
        if include != nil {
            guard id != nil else { throw ValidationError("--include needs --id: it resolves the associations of one object") }
            if count || explain || select != nil { throw ValidationError("--include does not combine with --count, --explain or --select") }
            _ = try includePaths()
        }
        _ = try query()
    }

    /// The association paths of `--include`.
    func includePaths() throws -> [String] {
        let paths = (include ?? "").split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        guard !paths.contains(where: { $0.isEmpty || $0.split(separator: ".", omittingEmptySubsequences: false).contains { $0.isEmpty } }) else {
            throw ValidationError("--include takes association paths, e.g. customer or customer.address,items")
        }
        return paths
    }

    /// The query the options ask; a malformed condition or order key is a usage error.
    func query() throws -> Query {
        var condition = try WhereExpression.condition(conditions)
        if let id { condition = Field.id == .string(id) && condition }
        let sortKeys = try order.map(Self.sortKey)
        let projection = try select.map { try Field.list($0).map { try Names.path($0) } }
        var query = Query(where: condition, order: sortKeys, limit: limit, offset: offset, select: projection)
        query.requiresIndex = requireIndex
        return query
    }

    /// `ATTR`, `ATTR:asc` or `ATTR:desc`.
    static func sortKey(_ text: String) throws -> SortKey {
        var attribute = Substring(text)
        var descending = false
        // A name in double quotes may hold a colon: a direction comes after its closing quote.
        if let colon = text.lastIndex(of: ":"), !text.hasSuffix("\"") {
            switch text[text.index(after: colon)...] {
            case "asc": break
            case "desc": descending = true
            default: throw ValidationError("--order takes ATTR, ATTR:asc or ATTR:desc, not '\(text)'")
            }
            attribute = text[..<colon]
        }
        guard !attribute.isEmpty else { throw ValidationError("--order needs an attribute: ATTR, ATTR:asc or ATTR:desc") }
        if attribute.hasSuffix(":asc") || attribute.hasSuffix(":desc") {
            throw ValidationError("--order takes one direction: ATTR, ATTR:asc or ATTR:desc, not '\(text)'")
        }
        let field = try Names.path(String(attribute))
        return descending ? .descending(field) : .ascending(field)
    }

    func run() throws {
        do {
            try find()
        } catch let error as SatchelError where error.code == .unindexedQuery && requireIndex {
            // Exit 2 is --require-index's refusal; --match on a model without a text index is
            // an error as any (a black-box probe: it exited 2 too).
            Output.error(error.message)
            throw ExitCode(2)
        }
    }

    private func find() throws {
        let query = try query()
        let printed = try store.withStore { store -> Int in
            let model = try store.existingModel(named: model)
            if let match {
                if explain {
                    Output.line(try model.explainSearch(match, where: query.condition, order: query.order))
                    return 1
                }
                let matches = try model.search(
                    match, where: query.condition, order: query.order, limit: limit.map { $0 > .max - offset ? .max : $0 + offset },
                    select: query.projection)
                let page = matches.dropFirst(offset)
                if count {
                    Output.line(String(page.count))
                } else {
                    for found in page { Output.line(found.object.description) }
                }
                return page.count
            }
            if explain {
                Output.line(try model.explain(query).description)
                return 1
            }
            if let id, include != nil {
                // One snapshot: the object matches the conditions, and its associations are read as they were then.
                let paths = try includePaths()
                let object = try store.read { snapshot -> Object? in
                    let included = try snapshot.find(id, in: model, including: paths)
                    return try snapshot.cursor(query, in: model).next() == nil ? nil : included
                }
                if let object {
                    Output.line(object.description)
                    return 1
                }
                return try notFound(id, in: model)
            }
            let cursor = try model.cursor(query)
            var n = 0
            while let object = try cursor.next() {
                n += 1
                if !count { Output.line(object.description) }
            }
            // A count is its own answer: `--id X --count` of a missing object prints 0, exit 0.
            if count { Output.line(String(n)) }
            if let id, n == 0, !count { return try notFound(id, in: model) }
            return n
        }
        _ = printed
    }

    /// The error of `--id` when nothing printed.
    private func notFound(_ id: String, in model: Model) throws -> Int {
        let exists = try model.find(id) != nil
        // Said as it is (a black-box probe: an --offset that skipped it was called conditions).
        let why =
            offset > 0 && conditions.isEmpty
            ? "object '\(id)' of \(model.name) is skipped by --offset \(offset)"
            : "object '\(id)' of \(model.name) does not match the conditions"
        throw SatchelError(.notFound, exists ? why : "no object '\(id)' in \(model.name)", model: model.name, objectID: id)
    }
}

struct IndexCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "index",
        abstract: "Declare (and build) an index, list a model's indexes, or drop one.",
        discussion: """
            satchel index MODEL ATTR[,ATTR…] builds a value index on the attributes, in order, whose entries hold copies \
            of the objects (fast queries; --keys-only for a smaller, slower index); ATTR[] (or --elements) builds an \
            array-element index, which serves ~= (contains), and = or in on ATTR[]. Building shows a progress bar on a terminal.
            """
    )

    @OptionGroup var store: StoreOptions
    @Argument(help: "The model.") var model: String
    @Argument(help: ArgumentHelp("The attributes, comma-separated.", valueName: "attr[,attr…]")) var attributes: String?
    @Flag(help: "List the model's indexes.") var list = false
    @Option(help: ArgumentHelp("Drop the index on these attributes.", valueName: "attr[,attr…]")) var drop: String?
    @Flag(help: "An array-element index (one entry per element).") var elements = false
    @Flag(help: "A full-text index over the attributes' words (satchel find --match searches it).") var text = false
    @Flag(help: "A value index whose entries hold keys only, not copies of the objects (less disk, slower reads).")
    var keysOnly = false

    func validate() throws {
        // One thing at a time: a declaration beside --drop or --list would be ignored.
        let asked = [attributes != nil, list, drop != nil].filter { $0 }.count
        if asked > 1 { throw ValidationError("give attributes to index, --list or --drop ATTR, one of them") }
        if asked == 0 { throw ValidationError("name the attributes to index, e.g. brand or brand,price (or --list, --drop ATTR)") }
    }

    private func definition(_ text: String) throws -> IndexDefinition {
        var text = text
        // A text index as --list prints it, `text(title,body)`, names it for --drop too.
        var isText = self.text
        if drop != nil, !isText, text.hasPrefix("text("), text.hasSuffix(")") {
            text = String(text.dropFirst(5).dropLast())
            isText = true
        }
        var elementIndex = elements
        // `tags[]`: the elements of `tags` (`a[][]` stays as written, for the path's check to
        // refuse: a black-box probe found it indexed as `a[]`).
        if !isText && text.hasSuffix("[]") && !text.dropLast(2).hasSuffix("[]") {
            text.removeLast(2)
            elementIndex = true
        }
        let names = Field.list(text)
        guard !text.isEmpty, !names.contains(where: \.isEmpty) else {
            // A usage error, as an empty name is wherever a path goes.
            throw ValidationError(
                isText
                    ? "name the attributes to search, e.g. --text title or --text title,body (an empty name is none)"
                    : "name the attributes to index, e.g. brand or brand,price (an empty name is none)")
        }
        let fields = try names.map { try Names.path(String($0)) }
        // Usage errors, as a path below the id is (a black-box probe: `object[]` exited 1).
        if fields.contains(Field.id) {
            throw ValidationError(
                elementIndex
                    ? "'\(Object.idAttribute)[]': \(Object.idAttribute) is the object's id, a string: no path goes below it"
                    : "the object id is the key already; it needs no index")
        }
        if isText {
            // Usage errors, as the options' other mistakes (a black-box probe: these exited 1).
            if elements || keysOnly { throw ValidationError("--text does not combine with --elements or --keys-only") }
            return .text(fields)
        }
        // A path into arrays (`items[].product`) is indexed element by element.
        if fields.count == 1 && fields[0].reachesIntoArrays { elementIndex = true }
        if elementIndex {
            if keysOnly {
                throw ValidationError("--keys-only is for value indexes: an array-element index always holds keys only; leave it out")
            }
            guard fields.count == 1 else { throw ValidationError("an array-element index has exactly one attribute") }
            return .elements(of: fields[0])
        }
        return IndexDefinition(fields, storesObjects: !keysOnly)
    }

    func run() throws {
        try store.withStore { store in
            // Indexes belong to a model the store has: `put` and `import` make models, not this.
            let model = try store.existingModel(named: self.model)
            if list {
                for index in try model.indexes {
                    let kind =
                        switch index.definition.kind {
                        case .arrayElements: "elements"
                        case .text: "text"
                        case .value: index.definition.storesObjects ? "value" : "value, keys only"
                        }
                    Output.line("\(index.definition)\t\(kind)\t\(index.isReady ? "ready" : "incomplete")\t\(index.entries) entries")
                }
                return
            }
            if let drop {
                let definition = try definition(drop)
                guard try model.dropIndex(definition) else {
                    throw SatchelError(.notFound, "model '\(self.model)' has no index \(definition)")
                }
                Output.line("dropped index \(definition) of \(self.model)")
                return
            }
            guard let attributes else { throw SatchelError(.invalidArgument, "name the attributes to index, or use --list or --drop") }
            let definition = try definition(attributes)
            let bar = Output.stderrIsTerminal ? ProgressBar() : nil
            try model.createIndex(definition) { progress in
                bar?.draw(
                    fraction: progress.total > 0 ? Double(progress.processed) / Double(progress.total) : 1,
                    label: "\(progress.processed)/\(progress.total) objects indexed")
            }
            bar?.finish()
            let entries = try model.indexes.first { $0.definition == definition }?.entries ?? 0
            Output.line("index \(definition) of \(self.model): \(entries) entries")
        }
    }
}

struct StatsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Per model: objects, indexes, pending changes by kind, sync errors, bytes on disk.",
        discussion:
            "Pending counts every change the server has not confirmed and that is not in flight, refused ones (listed by satchel errors) included."
    )

    @OptionGroup var store: StoreOptions
    @Flag(help: "One JSON object per model per line: model, partition, objects, pending, inFlight, errors, indexes (no bytes).") var json = false

    func run() throws {
        try store.withStore { store in
            for definition in store.models {
                let model = try store.model(definition.name)
                var statistics = try model.statistics()
                let indexes = try model.indexes
                try Self.countRefusedAsPending(&statistics, of: model, in: store)
                if json {
                    let line: JSONObject = [
                        "model": .string(statistics.model), "partition": .string(statistics.partition.rawValue),
                        "objects": .int(Int64(statistics.objects)),
                        "pending": [
                            "create": .int(Int64(statistics.pendingCreates)), "update": .int(Int64(statistics.pendingUpdates)),
                            "delete": .int(Int64(statistics.pendingDeletes)),
                        ],
                        "errors": .int(Int64(statistics.refusedChanges)), "inFlight": .int(Int64(statistics.inFlight)),
                        "indexes": .object(JSONObject(indexes.map { ($0.definition.description, JSONValue.int(Int64($0.entries))) })),
                    ]
                    Output.line(line.description)
                } else {
                    Output.line(
                        "\(Names.shown(statistics.model)): partition=\(statistics.partition.rawValue) objects=\(statistics.objects) "
                            + "pending create=\(statistics.pendingCreates) update=\(statistics.pendingUpdates) delete=\(statistics.pendingDeletes) "
                            + "in-flight=\(statistics.inFlight) errors=\(statistics.refusedChanges) indexes=\(indexes.isEmpty ? "none" : indexes.map { "\($0.definition):\($0.entries)" }.joined(separator: ",")) "
                            + "bytes≈\(statistics.approximateBytes)")
                }
            }
        }
    }
}

extension StatsCommand {
    /// Counts a refused change among the pending ones of its kind, unless the object has a
    /// later pending change (counted already): pending + in flight are the changes the server
    /// has not confirmed, and a refused one waits for its resolution.
    static func countRefusedAsPending(_ statistics: inout ModelStatistics, of model: Model, in store: Store) throws {
        guard statistics.refusedChanges > 0 else { return }
        let pending = Set(try model.pendingChanges().map(\.objectID))
        for refused in try store.refusedChanges(model: model.name) where !pending.contains(refused.objectID) {
            switch refused.kind {
            case .create: statistics.pendingCreates += 1
            case .update: statistics.pendingUpdates += 1
            case .delete: statistics.pendingDeletes += 1
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
        for note in report.notes { Output.line("note: \(note)") }
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
        abstract: "Salvage every record that decodes from a damaged store, rebuild its indexes, recount, and check it.",
        discussion: """
            Use it when opening the store fails with a corruption error, or `check` finds problems. Damaged blocks are \
            skipped whole; a lost format marker or model definition is written again; every index is rebuilt from the \
            objects. Prints what it salvaged, then one summary line. Exits 1 if problems remain. Refuses a directory \
            that is not a Satchel store (--force repairs it all the same).
            """
    )

    @OptionGroup var store: StoreOptions
    @Flag(help: "Repair a directory that does not look like a Satchel store all the same.") var force = false

    func run() throws {
        let path = try store.path()
        let report: RepairReport
        do {
            // What it finds is forgotten once its report is written, below.
            report = try Store.repair(path: path, force: force, configuration: store.configuration(), keepingFindings: true)
        } catch let error as SatchelError where error.code == .notAStore {
            throw SatchelError(.notAStore, "\(error.message); nothing was changed (--force repairs it all the same)")
        }
        for partition in report.markersRewritten {
            Output.line("salvaged: the \(partition.rawValue) partition's format marker, lost with a damaged block, was written again")
        }
        for model in report.modelsRecreated {
            Output.line("salvaged: model '\(model)' had lost its definition; registered again as a property bag with its records")
        }
        for index in report.indexesLost {
            Output.line("salvaged: index \(index) had lost its definition; its entries were removed: declare it again with 'satchel index'")
        }
        if report.recordsDropped > 0 {
            Output.line("salvaged: \(report.recordsDropped) definitions or statistics that no longer decoded were removed")
        }
        for (partition, damage) in report.logsDamaged {
            Output.line(
                "lost: the \(partition.rawValue) partition's log was damaged (\(damage)): the writes in its damaged block were dropped, whatever they changed (objects keep their state before them)"
            )
        }
        for (partition, damage) in report.tablesMissing {
            Output.line(
                "lost: the \(partition.rawValue) partition's tables named by its manifest were gone (\(damage)): the writes they held are lost, whatever they changed (an older version of an object may be what the store holds now)"
            )
        }
        for (partition, file) in report.filesSetAside {
            Output.line(
                "lost: the \(partition.rawValue) partition's file \(file) could not be read whole: the records in its damaged blocks are lost (an older version of one may be what the store holds now); the file is kept in \(partition.rawValue)/lost"
            )
        }
        for lost in report.objectsLost {
            Output.line(
                "lost: model '\(lost.model)': \(lost.counted - lost.salvaged) of its \(lost.counted) objects (as it counted them before the damage)")
        }
        for model in Set(report.changesDropped.map(\.model)).sorted() {
            let changes = report.changesDropped.filter { $0.model == model }
            let ids = changes.prefix(5).map { "'\($0.objectID)'" }.joined(separator: ", ") + (changes.count > 5 ? ", …" : "")
            Output.line(
                "lost: model '\(model)': \(changes.count) pending changes whose object is gone were dropped (\(changes.count { $0.kind == .create }) creates, never on the server; \(changes.count { $0.kind == .update }) updates): \(ids)"
            )
        }
        for lost in report.changesLost {
            Output.line(
                "lost: model '\(lost.model)': \(lost.lost) of its \(lost.counted) changes the server had not confirmed (pending, in flight or refused; as it counted them before the damage): what they changed here is not pushed"
            )
        }
        for model in report.countsLost {
            Output.line(
                "lost: model '\(model)': its statistics were in the damage: the objects and pending changes it lost, if any, cannot be counted (its objects are counted again)"
            )
        }
        for model in Set(report.createsRestored.map(\.model)).sorted() {
            let ids = report.createsRestored.filter { $0.model == model }.map(\.objectID)
            let shown = ids.prefix(5).map { "'\($0)'" }.joined(separator: ", ") + (ids.count > 5 ? ", …" : "")
            Output.line(
                "salvaged: model '\(model)': \(ids.count) objects made here whose pending create the damage took are logged again, to be pushed: \(shown)"
            )
        }
        for model in report.fullPullsScheduled {
            Output.line("salvaged: model '\(model)' pulls its whole collection at its next sync, to bring back what the server holds")
        }
        for problem in report.verification.problems { Output.line("problem: \(problem)") }
        let verification = report.verification
        Output.line(
            "repaired: \(verification.models) models, \(verification.objects) objects, \(verification.pendingChanges) pending changes; "
                + "\(report.indexesRebuilt) indexes rebuilt (\(report.indexEntriesBefore) entries before, \(report.indexEntriesAfter) after); "
                + (report.isHealthy ? "ok" : "\(verification.problemCount) problems remain"))
        // Written out before what was found is forgotten: killed before, the repair run again
        // reports it again (a black-box probe: it said ok).
        try Output.finish()
        Store.forgetRepairFindings(path: path)
        if !report.isHealthy { throw ExitCode.failure }
    }
}
