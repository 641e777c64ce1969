extension Model {
    /// The results of `query`, read lazily from one snapshot.
    public func cursor(_ query: Query) throws -> ObjectCursor { try cursor(query, storeScanGuard: true) }

    /// The cursor of `query`; a transaction's reads leave out the store's scan guard
    /// (``Store/Configuration/refusesFullScans``), not the query's own.
    func cursor(_ query: Query, storeScanGuard: Bool) throws -> ObjectCursor {
        let entry = try store.entry(name)
        try query.condition.refuseArrayCrossings(entry.statistics, model: name)
        let plan = Planner.plan(query, model: name, entry: entry, objectPrefix: objectPrefix)
        try Planner.guardScan(plan, query, model: self, storeOption: storeScanGuard)
        return try ObjectCursor(model: self, query: query, plan: plan, partition: entry.definition.partition)
    }

    /// How `query` would run: the index or scan chosen, the conditions checked on each
    /// object, and whether a sort is needed.
    public func explain(_ query: Query) throws -> QueryPlan {
        Planner.plan(query, model: name, entry: try store.entry(name), objectPrefix: objectPrefix).explain()
    }

    /// Every object `query` selects, in its order.
    public func findAll(_ query: Query) throws -> [Object] { try cursor(query).all() }

    /// Objects matching `condition`, in `order`, at most `limit` after skipping `offset`,
    /// reduced to the `select`ed attributes.
    ///
    /// ```swift
    /// let page = try products.findAll(where: "brand" == "Acme" && "price" < 100,
    ///                                 order: [.descending("price")], limit: 20)
    /// ```
    public func findAll(
        where condition: Condition, order: [SortKey] = [], limit: Int? = nil, offset: Int = 0, select: [Field]? = nil
    ) throws -> [Object] {
        try findAll(Query(where: condition, order: order, limit: limit, offset: offset, select: select))
    }

    /// The first object matching `condition` in `order` (any match without an order).
    /// On an indexed field this reads a handful of keys, not the model.
    public func findFirst(where condition: Condition, order: [SortKey] = []) throws -> Object? {
        try cursor(Query(where: condition, order: order, limit: 1)).next()
    }

    /// The number of objects matching `condition`.
    public func count(where condition: Condition) throws -> Int {
        if case .always = condition.node { return try count() }
        return try cursor(Query(where: condition)).countMatches()
    }

    /// Deletes, in one transaction, every object matching `condition`; returns how many.
    @discardableResult
    public func delete(where condition: Condition) throws -> Int {
        try store.write { try $0.delete(where: condition, in: self) }
    }
}
