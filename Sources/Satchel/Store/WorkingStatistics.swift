import Synchronization

/// The statistics of the models a transaction writes, as its writes change them; written in its
/// batch and published to the catalog once the batch lands.
///
/// A bulk update usually writes one model many times: the statistics of the model last written
/// are kept apart, which spares a dictionary lookup and store per write.
struct WorkingStatistics {
    private var current: (name: String, statistics: StoredStatistics)?
    private var others: [NameKey: StoredStatistics] = [:]

    /// The working statistics of `model`, or nil when this transaction has not changed them.
    func statistics(of model: String) -> StoredStatistics? {
        if let current, UTF8Order.equal(current.name, model) { return current.statistics }
        return others[NameKey(model)]
    }

    /// Takes `model`'s working statistics out (nil when this transaction has not changed them),
    /// so that the caller holds the only copy and changes it in place; ``set(_:of:)`` puts them back.
    mutating func take(_ model: String) -> StoredStatistics? {
        if let current, UTF8Order.equal(current.name, model) {
            self.current = nil
            return current.statistics
        }
        return others.removeValue(forKey: NameKey(model))
    }

    mutating func set(_ statistics: StoredStatistics, of model: String) {
        if let current, !UTF8Order.equal(current.name, model) { others[NameKey(current.name)] = current.statistics }
        current = (model, statistics)
    }

    /// Every model's working statistics.
    var all: [NameKey: StoredStatistics] {
        var all = others
        if let current { all[NameKey(current.name)] = current.statistics }
        return all
    }
}

extension Transaction {
    /// The statistics of `model` as this transaction sees them.
    func workingStatistics(_ model: String) throws(SatchelError) -> StoredStatistics {
        if let statistics = statistics.statistics(of: model) { return statistics }
        return try store.entry(model).statistics
    }

    /// Runs `body` on the statistics of `model` as this transaction sees them, changed in place:
    /// no copy of their tables is made for a change (each write of an object changes them).
    func withWorkingStatistics<R>(_ model: String, _ body: (inout StoredStatistics) throws -> R) throws -> R {
        var working = try statistics.take(model) ?? store.entry(model).statistics
        defer { statistics.set(working, of: model) }
        return try body(&working)
    }

    /// Replaces the statistics of `model` when the transaction commits.
    func setStatistics(_ statistics: StoredStatistics, model: String) { self.statistics.set(statistics, of: model) }

    /// The model's catalog entry, cached while the catalog does not change. Its statistics are
    /// the committed ones (the writer's lock is held).
    func entry(of model: Model) throws(SatchelError) -> ModelEntry {
        let version = store.catalogVersion.load(ordering: .acquiring)
        if let cached = cachedEntry, cached.version == version, UTF8Order.equal(cached.name, model.name) { return cached.entry }
        let entry = try store.entry(model.name)
        cachedEntry = (model.name, version, entry)
        return entry
    }
}
