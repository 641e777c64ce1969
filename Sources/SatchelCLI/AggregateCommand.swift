import ArgumentParser
import Foundation
import Satchel

struct AggregateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "aggregate",
        abstract: "Count, sum, min, max and average over a model's objects, grouped by attributes.",
        discussion: """
            Prints one JSON line per group, keys sorted: the group's values under their attributes' names (null for \
            objects lacking the attribute, which form a group of their own; an array is one whole value), and the \
            results under count, sum(ATTR), min(ATTR), max(ATTR), avg(ATTR) (a --group-by attribute named as one of \
            them is refused). Groups come in ascending order of their \
            values (the order find sorts by); without --group-by, one line. Objects lacking a summed or averaged \
            attribute, or holding something other than a number there, are left out of that sum and average (null \
            when none is left); min and max compare every value in the order find sorts by. --where takes what find \
            takes. --explain prints how it runs: from the model's statistics, the ends of an index, one walk of an \
            index, or the query's plan.
            """
    )

    @OptionGroup var store: StoreOptions
    @Argument(help: "The model.") var model: String
    @Option(name: .customLong("where"), help: "A condition, as find takes it.") var conditions: [String] = []
    @Option(name: .customLong("group-by"), help: ArgumentHelp("Group by this attribute; repeat for more.", valueName: "attr")) var groupBy: [String] =
        []
    @Flag(help: "Count the objects of each group.") var count = false
    @Option(help: ArgumentHelp("Sum this attribute's numbers; repeatable.", valueName: "attr")) var sum: [String] = []
    @Option(help: ArgumentHelp("The least value of this attribute; repeatable.", valueName: "attr")) var min: [String] = []
    @Option(help: ArgumentHelp("The greatest value of this attribute; repeatable.", valueName: "attr")) var max: [String] = []
    @Option(help: ArgumentHelp("The mean of this attribute's numbers; repeatable.", valueName: "attr")) var avg: [String] = []
    @Flag(help: "Print how the aggregate runs instead of running it.") var explain = false

    /// The functions, in the order count, sum, min, max, avg (each in the order given).
    func functions() throws -> [AggregateFunction] {
        var functions: [AggregateFunction] = count ? [.count] : []
        for (names, make) in [(sum, AggregateFunction.sum), (min, AggregateFunction.min), (max, AggregateFunction.max), (avg, AggregateFunction.avg)]
            as [([String], (Field) -> AggregateFunction)]
        {
            for name in names {
                guard !name.isEmpty else { throw ValidationError("name the attribute of --sum, --min, --max or --avg") }
                functions.append(make(try Names.path(name)))
            }
        }
        guard !functions.isEmpty else { throw ValidationError("name at least one of --count, --sum ATTR, --min ATTR, --max ATTR, --avg ATTR") }
        return functions
    }

    func validate() throws {
        _ = try functions()
        _ = try WhereExpression.condition(conditions)
        if groupBy.contains(where: \.isEmpty) { throw ValidationError("--group-by takes an attribute name") }
        let fields = try groupBy.map { try Names.path($0) }
        // A line holds the group's attributes and the results under their names: one name for
        // both would print one value in place of the other (a black-box probe: --group-by count).
        let results = Set(try functions().map(\.description))
        if let clash = fields.first(where: { results.contains($0.description) }) {
            throw ValidationError("--group-by \(clash) has the name of a result on each line: rename the attribute, or aggregate without that result")
        }
        if Set(fields).count < fields.count { throw ValidationError("--group-by names an attribute twice") }
        // A name and a path written alike (`"a.b"` and a.b) would print under one name, one
        // value in place of the other (a black-box probe: a sum vanished).
        let clash = "would print under one name (an attribute named with a dot, and the path written alike): aggregate them one at a time"
        if Set(fields.map(\.description)).count < fields.count { throw ValidationError("two of --group-by's attributes \(clash)") }
        let distinct = Set(try functions())
        if Set(distinct.map(\.description)).count < distinct.count { throw ValidationError("two results \(clash)") }
    }

    func run() throws {
        let condition = try WhereExpression.condition(conditions)
        let fields = try groupBy.map { try Names.path($0) }
        let functions = try functions()
        try store.withStore { store in
            let model = try store.existingModel(named: self.model)
            if explain {
                Output.line(try model.explainAggregate(where: condition, groupBy: fields, functions))
                return
            }
            for group in try model.aggregate(where: condition, groupBy: fields, functions) {
                var line = JSONObject()
                for (field, value) in zip(fields, group.key) { line[field.description] = value ?? .null }
                for (function, value) in group.results { line[function.description] = value }
                Output.line(String(decoding: line.jsonBytes, as: UTF8.self))
            }
        }
    }
}
