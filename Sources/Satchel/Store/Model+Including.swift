extension Model {
    /// The object `id` with the associations named by `paths` resolved into nested objects, or
    /// nil when there is no such object: the read side of ``Store/importGraph(_:)``.
    ///
    /// An association attribute (see ``ModelDefinition/associations``) that holds an id becomes
    /// that object's attributes, with its id under `object`; one that holds an array of ids
    /// becomes the array of those objects. An id whose object is missing stays an id. A path
    /// such as `customer.address` resolves `customer`, then `address` of the customer's model.
    ///
    /// ```swift
    /// let order = try orders.find("o1", including: ["customer.address", "items"])
    /// // order?["customer"]?["address"]?["city"], order?["items"]?.arrayValue?.first?["name"]
    /// ```
    ///
    /// Everything is read from one consistent snapshot (``Store/read(_:)``).
    ///
    /// - Throws: ``SatchelError`` `.invalidArgument` for a path whose attribute is not an
    ///   association of its model (the message names the model's associations).
    public func find(_ id: String, including paths: [String]) throws -> Object? {
        try store.read { try $0.find(id, in: self, including: paths) }
    }
}

extension Snapshot {
    /// The object `id` of `model` with the associations named by `paths` resolved into nested
    /// objects, or nil; see ``Model/find(_:including:)``.
    public func find(_ id: String, in model: Model, including paths: [String]) throws -> Object? {
        let include = try Include(paths, model: model.name, catalog: catalog)
        guard let object = try find(id, in: model) else { return nil }
        return Object(id: id, storedAttributes: try resolve(object.attributes, include))
    }

    /// `attributes` with the associations of `include` resolved.
    private func resolve(_ attributes: JSONObject, _ include: Include) throws -> JSONObject {
        var result = attributes
        for (attribute, next) in include.associations {
            switch attributes[attribute] {
            case .string(let id)?:
                if let target = try load(id, next) { result[attribute] = .object(target) }
            case .array(let elements)?:
                result[attribute] = .array(
                    try elements.map { element in
                        guard let id = element.stringValue, let target = try load(id, next) else { return element }
                        return .object(target)
                    })
            default:
                continue
            }
        }
        return result
    }

    /// Object `id` of `include`'s model as JSON (its id under `object`), its own associations
    /// resolved; nil when it is missing.
    private func load(_ id: String, _ include: Include) throws -> JSONObject? {
        guard catalog.models[NameKey(include.model)] != nil,
            let object = try find(id, in: Model(store: store, name: include.model))
        else { return nil }
        var json = try resolve(object.attributes, include)
        json[Object.idAttribute] = .string(id)
        return json
    }
}

/// The association paths of one `find(_:including:)`, as a tree: a model, and for each of its
/// association attributes named, the tree of the model it points to.
private struct Include {
    var model: String
    var associations: [(attribute: String, include: Include)] = []

    init(model: String) { self.model = model }

    /// The tree of `paths` from `model`, each attribute checked against its model's associations.
    init(_ paths: [String], model: String, catalog: Catalog) throws(SatchelError) {
        self.init(model: model)
        for path in paths {
            let components = path.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard !components.contains(where: \.isEmpty) else {
                throw SatchelError(
                    .invalidArgument, "'\(path)' is not an association path: name attributes joined by dots, e.g. customer.address",
                    model: model)
            }
            try add(components[...], catalog: catalog)
        }
    }

    private mutating func add(_ components: ArraySlice<String>, catalog: Catalog) throws(SatchelError) {
        guard let attribute = components.first else { return }
        let declared = catalog.models[NameKey(model)]?.definition.associations ?? [:]
        guard let target = declared[attribute] else {
            let names = declared.keys.sorted(by: UTF8Order.less).joined(separator: ", ")
            throw SatchelError(
                .invalidArgument,
                "'\(attribute)' is not an association of \(model) (\(names.isEmpty ? "it has none" : "its associations: \(names)"))",
                model: model)
        }
        if let index = associations.firstIndex(where: { UTF8Order.equal($0.attribute, attribute) }) {
            try associations[index].include.add(components.dropFirst(), catalog: catalog)
        } else {
            var next = Include(model: target)
            try next.add(components.dropFirst(), catalog: catalog)
            associations.append((attribute, next))
        }
    }
}
