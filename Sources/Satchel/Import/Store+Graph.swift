public import Foundation

/// What ``Store/importGraph(_:)`` wrote.
public struct ImportGraphSummary: Sendable, Hashable {
    /// The number of top-level objects (``ObjectGraph/roots``).
    public var roots: Int
    /// model → the number of its objects written: created, or merged into the stored object. A
    /// reference that carries no attribute writes nothing and is not counted.
    public var objects: [String: Int]

    /// A summary.
    public init(roots: Int = 0, objects: [String: Int] = [:]) {
        self.roots = roots
        self.objects = objects
    }
}

extension Store {
    /// Stores an object graph (see ``ObjectGraph``).
    ///
    /// First, with nothing written yet, it checks the whole graph: each model's associations
    /// against the stored ones (the same attribute pointing to another model is a conflict) and
    /// each object against its model's fixed schema, when the model has one. Then it registers
    /// the models the graph names that the store lacks (property bags, the default definition)
    /// and adds the associations found to the definitions (associations already declared stay).
    /// Last, it writes every object, merging it by id with what the store holds: each attribute
    /// given replaces the stored value, a null removes it (as ``Model/update(_:with:)`` does);
    /// an object new to the store is created (a reference that carries no attribute creates
    /// nothing). Pending changes are recorded for synced models, as for every write.
    ///
    /// The objects of each partition's models are written in one transaction: all of them land,
    /// or none. (A graph whose models live in two partitions is written in two transactions; the
    /// registrations stay when a write fails.)
    ///
    /// - Returns: the number of top-level objects and of objects written per model.
    /// - Throws: ``SatchelError`` `.modelConflict` for an association that conflicts with a
    ///   declared one, `.schemaViolation`, `.invalidName`, or what a write throws.
    @discardableResult
    public func importGraph(_ graph: ObjectGraph) throws -> ImportGraphSummary {
        // Every model the graph names, with the definition it will have.
        var names = Set(graph.objects.keys)
        for (model, associations) in graph.associations {
            names.insert(model)
            names.formUnion(associations.values)
        }
        var definitions: [(definition: ModelDefinition, changed: Bool)] = []
        for name in names.sorted(by: UTF8Order.less) {
            let existing = try? entry(name).definition
            var definition = existing ?? ModelDefinition(name: name)
            for (attribute, target) in graph.associations[name] ?? [:] {
                if let declared = definition.associations[attribute] {
                    guard UTF8Order.equal(declared, target) else {
                        throw SatchelError(
                            .modelConflict,
                            "attribute '\(attribute)' of model '\(name)' is an association to '\(declared)'; the graph points it to '\(target)'",
                            model: name)
                    }
                } else {
                    definition.associations[attribute] = target
                }
            }
            for (id, attributes) in graph.objects[name] ?? [:] {
                try definition.validate(attributes, objectID: id)
            }
            definitions.append((definition, existing != definition))
        }
        for (definition, changed) in definitions where changed { try register(definition) }

        // The objects, one transaction per partition.
        var summary = ImportGraphSummary(roots: graph.roots.count)
        for partition in Partition.allCases {
            let models = definitions.map(\.definition).filter { $0.partition == partition && graph.objects[$0.name] != nil }
            if models.isEmpty { continue }
            let written = try bulkUpdate { tx in
                var written: [String: Int] = [:]
                for definition in models {
                    let model = Model(store: self, name: definition.name)
                    let objects = graph.objects[definition.name] ?? [:]
                    var count = 0
                    for id in objects.keys.sorted(by: UTF8Order.less) {
                        if try Self.merge(objects[id] ?? JSONObject(), into: id, of: model, in: tx) { count += 1 }
                    }
                    if count > 0 { written[definition.name] = count }
                }
                return written
            }
            summary.objects.merge(written) { $1 }
        }
        return summary
    }

    /// Decomposes `value` (``ObjectGraph/decompose(_:model:makeID:)``) and stores the graph
    /// (``importGraph(_:)``): a nested JSON answer, such as a Parse cloud
    /// function's, stored as flat objects of several models.
    ///
    /// ```swift
    /// try store.importGraph(["id": "o1", "customer": ["class": "Customer", "id": "c1", "name": "Ann"]], model: "Order")
    /// let order = try store.model("Order").find("o1", including: ["customer"])
    /// ```
    @discardableResult
    public func importGraph(_ value: JSONValue, model: String) throws -> ImportGraphSummary {
        try importGraph(ObjectGraph.decompose(value, model: model))
    }

    /// Reads a JSON array or JSON-lines file of objects, decomposes each as a top-level object of
    /// the graph (see ``ObjectGraph``) and stores the graph (``importGraph(_:)``).
    /// The whole file is read and checked before anything is written, so a bad file changes
    /// nothing; errors name the line and the item.
    @discardableResult
    public func importGraph(from url: URL, model: String) throws -> ImportGraphSummary {
        var graph = ObjectGraph()
        var reader = try JSONItemReader(url: url)
        while let item = try reader.next() {
            let object = try Self.object(from: item)
            try ObjectGraph.within("line \(item.line) (item \(item.index + 1))") { () throws(SatchelError) in
                try graph.add(object, model: model, makeID: ObjectID.generate)
            }
        }
        return try importGraph(graph)
    }

    /// Merges `attributes` into object `id` (created when missing); returns whether it wrote.
    private static func merge(_ attributes: JSONObject, into id: String, of model: Model, in tx: Transaction) throws -> Bool {
        if try tx.find(id, in: model) != nil {
            if attributes.isEmpty { return false }
            try tx.update(id, with: attributes, in: model)
            return true
        }
        var new = attributes.removingNulls()
        if new.isEmpty { return false }
        new[Object.idAttribute] = .string(id)
        try tx.create(new, in: model)
        return true
    }
}
