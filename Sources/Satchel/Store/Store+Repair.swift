import Foundation
import Synchronization

/// What ``Store/repair(path:force:configuration:)`` did, and the verification of the result.
public struct RepairReport: Sendable {
    /// Partitions whose format marker was lost with a damaged block and written again: their
    /// keys are Satchel's.
    public var markersRewritten: [Partition] = []
    /// Models whose definition was lost: registered again as property bags in the partition
    /// that holds their records, so that every record of theirs is kept. A fixed schema,
    /// associations or choices they had are to be declared again.
    public var modelsRecreated: [String] = []
    /// Indexes whose definition was lost, as `model #id`: their entries are removed, and the
    /// index is to be declared again (`createIndex`).
    public var indexesLost: [String] = []
    /// Partitions whose log (the writes since its last table) was damaged, with LevelDB's
    /// account of the damage: the damaged record and the rest of its 32 KiB block were dropped,
    /// and so were the writes in them, whatever they were (a delete undone, an update back to
    /// the value before it), which no count of objects shows.
    public var logsDamaged: [(partition: Partition, damage: String)] = []
    /// Tables LevelDB could not read whole, set aside in the partition's `lost` directory (as
    /// `lost/NAME`): the records in their damaged blocks are lost, the rest kept.
    /// Where such a record had an older version in an older table, that version is what the
    /// store holds now, which no count of objects shows.
    public var filesSetAside: [(partition: Partition, file: String)] = []
    /// Partitions whose manifest named tables that were gone (deleted, or never written whole),
    /// with LevelDB's account (how many, and one of them): the writes they held are lost, and
    /// where an object had an older version in another table, that is what it holds now.
    public var tablesMissing: [(partition: Partition, damage: String)] = []
    /// Stored definitions and statistics that no longer decoded, removed (the statistics are
    /// counted again; a lost sync state means the model's next sync starts over).
    public var recordsDropped = 0
    /// Indexes rebuilt from their models' objects: after damage no index is trusted.
    public var indexesRebuilt = 0
    /// Index entries before the rebuild and after it: entries of objects the damage took are
    /// gone, entries the damage took are back.
    public var indexEntriesBefore = 0
    public var indexEntriesAfter = 0
    /// Models that hold fewer objects than they counted before the damage: the objects it
    /// took (from the store's own statistics, when they survived).
    public var objectsLost: [(model: String, counted: Int, salvaged: Int)] = []
    /// Pending creates and updates whose object the damage took: dropped, as there is nothing
    /// left to send (a create's object never reached the server: it is lost).
    public var changesDropped: [(model: String, objectID: String, kind: PendingChange.Kind)] = []
    /// Objects of models that never synced (every object of theirs made here) whose pending
    /// create the damage took: logged again, to be pushed at the next sync.
    public var createsRestored: [(model: String, objectID: String)] = []
    /// Models holding fewer local changes the server has not confirmed (pending, in flight or
    /// refused) than they counted before the damage, beyond those dropped with their objects
    /// (a create logged again counts as salvaged): the damage took the changes' records (their objects,
    /// where still here, keep the local values, which are not pushed).
    public var changesLost: [(model: String, counted: Int, lost: Int)] = []
    /// Models holding records whose statistics the damage took: what they lost, objects or
    /// changes, cannot be counted.
    public var countsLost: [String] = []
    /// Synced models that lost objects: their next sync pulls the whole collection, bringing
    /// back what the server holds.
    public var fullPullsScheduled: [String] = []
    /// The check of the repaired store (``Store/verify()``): its models, objects, problems.
    public var verification = VerificationReport()

    /// Whether the repaired store passed its check.
    public var isHealthy: Bool { verification.isHealthy }
}

extension Store {
    /// Repairs a damaged store, keeping every record that still decodes.
    ///
    /// 1. Each partition's LevelDB database is rebuilt from the table and log files that
    ///    survive (`leveldb_repair_db`), keeping every record whose block's checksum holds: a
    ///    damaged data block is skipped whole, never read as data, and a table whose only damage
    ///    is outside its data (an index block) is kept whole. Files LevelDB could not read whole
    ///    are set aside in the partition's `lost` directory, and the report names the tables.
    /// 2. What damage took from the store's own records is salvaged: a lost format marker is
    ///    written again when the partition's keys are Satchel's; a model whose definition was
    ///    lost is registered again (a property bag, in the partition holding its records);
    ///    definitions and statistics that no longer decode are removed.
    /// 3. Every index is rebuilt from its model's objects, and every model's statistics are
    ///    counted again; the objects and the unconfirmed changes they counted before the damage
    ///    are compared with those salvaged, and what is missing is reported (``RepairReport``'s
    ///    `objectsLost`, `changesLost`, `countsLost`).
    /// 4. The result is checked (``verify()``).
    ///
    /// Run it on a closed store, when opening fails with `.corruption` or `check` finds
    /// problems. Records in damaged blocks are lost; what remains is consistent, and every
    /// indexed query answers as a scan does.
    ///
    /// What the repair finds in the files (a damaged log, missing tables, tables set aside) is
    /// kept in each partition before anything is rewritten, so that a repair killed midway
    /// and run again still reports it; it is forgotten as the report is returned, or, with
    /// `keepingFindings`, when ``forgetRepairFindings(path:)`` says the report was seen (a
    /// repair run again before then reports it again).
    ///
    /// - Parameters:
    ///   - force: repair a directory that does not look like a store (none of the `user`,
    ///     `app` and `local` partitions, or keys that are not Satchel's) all the same.
    ///   - keepingFindings: keep what the repair found until ``forgetRepairFindings(path:)``.
    /// - Throws: ``SatchelError`` `.storeMissing` when there is no directory (or an empty one),
    ///   `.notAStore` for a directory that is not a store (unless `force`); `.locked` when the
    ///   store is open elsewhere.
    public static func repair(
        path: String, force: Bool = false, configuration: Configuration = Configuration(), keepingFindings: Bool = false
    ) throws -> RepairReport {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw SatchelError(.storeMissing, "no store at \(path)")
        }
        if !force { try checkIsStore(path, creating: false) }
        // Before the key is asked for, as every open: a killed decrypt's copy holds the data in
        // the clear (a black-box probe: a repair refused for the key left it).
        try removeConversionLeftovers(path)
        // An encrypted store is repaired through its key: LevelDB's repair reads and writes
        // every file through the same Env as the store.
        let encryption = try encryption(of: path, key: configuration.encryptionKey, creating: false)
        if encryption == nil, let file = encryptedFileWithoutKeyFile(in: path) { throw keyFileMissing(path, file) }
        var options = LevelDBOptions()
        options.createIfMissing = false
        // A log's damaged frame is dropped as a damaged block, the writes after it kept.
        options.environment = encryption?.salvagingEnvironment
        let partitions = Partition.allCases.filter { FileManager.default.fileExists(atPath: directory(of: $0, in: path)) }
        // Refused while any partition is open elsewhere, before one is touched.
        for partition in partitions { try LevelDB.checkNotOpen(path: directory(of: partition, in: path)) }
        var report = RepairReport()
        for partition in partitions {
            let outcome = try LevelDB.repair(path: directory(of: partition, in: path), options: options)
            if let damage = outcome.logDamage { report.logsDamaged.append((partition, damage)) }
            for file in outcome.setAside { report.filesSetAside.append((partition, file)) }
            if let missing = outcome.tablesMissing { report.tablesMissing.append((partition, missing)) }
        }
        try salvage(path, partitions: partitions, force: force, encryption: encryption, report: &report)

        var configuration = configuration
        configuration.createIfMissing = true
        if force {
            // A directory that held no partition gets `user`: the store opens there.
            restrictToOwner(directory(of: .user, in: path), creating: true)
        }
        let store = try Store(path: path, configuration: configuration)
        defer { try? store.close() }
        // What each model counted before the damage (its statistics, when they survived).
        let statistics = try store.survivingStatistics()
        let counted = statistics.mapValues(\.objects)
        try store.rebuildIndexes(&report)
        report.changesDropped = try store.dropChangesOfLostObjects()
        report.createsRestored = try store.restoreLostCreates()
        try store.recount()
        try store.scheduleFullPulls(counted: counted, &report)
        store.compareChanges(with: statistics, &report)
        report.verification = try store.verify()
        // Reported now: a repair killed before this point, run again, reports what it found.
        if !keepingFindings { forgetRepairFindings(path: path) }
        return report
    }

    /// Forgets what the repairs of the store at `path` found in its files, once their report
    /// is where its reader sees it (``repair(path:force:configuration:keepingFindings:)``):
    /// the `satchel repair` command calls it after writing its report (a black-box probe: a
    /// repair killed after forgetting, before its report was out, and run again, said ok).
    public static func forgetRepairFindings(path: String) {
        for partition in Partition.allCases { RepairFindings.remove(in: directory(of: partition, in: path)) }
    }

    /// The catalog's models in the order of their names' bytes: each repair step reports them so.
    private func modelsByName() -> [(key: NameKey, value: ModelEntry)] {
        catalog.withLock { $0.models }.sorted { UTF8Order.less($0.key.name, $1.key.name) }
    }

    /// Step 3b of ``repair(path:force:configuration:)``: the pending creates and updates whose
    /// object is gone, removed (they would push nothing), and returned.
    private func dropChangesOfLostObjects() throws -> [(model: String, objectID: String, kind: PendingChange.Kind)] {
        var dropped: [(model: String, objectID: String, kind: PendingChange.Kind)] = []
        try writer.withLock {
            let models = modelsByName()
            for (name, entry) in models where entry.definition.recordsChanges {
                let db = try database(entry.definition.partition)
                var batch = LevelDBWriteBatch()
                for change in try Model(store: self, name: name.name).pendingChanges() where change.kind != .delete {
                    guard try db.get(Keys.object(name.name, change.objectID)) == nil else { continue }
                    batch.delete(Keys.change(name.name, change.objectID))
                    dropped.append((name.name, change.objectID, change.kind))
                }
                if batch.count > 0 { try db.write(batch, sync: true) }
            }
        }
        return dropped
    }

    /// Step 3b': in a model that syncs but never did (no cursor, no first sync done), every object
    /// is one made here; one left with no record of the engine's (no pending change, none in
    /// flight or refused, no version) lost its pending create with the damage, and gets it again
    /// (a black-box probe: such objects never reached the server, and a full sync then deleted
    /// them here).
    private func restoreLostCreates() throws -> [(model: String, objectID: String)] {
        var restored: [(model: String, objectID: String)] = []
        try writer.withLock {
            for (name, entry) in modelsByName() where entry.definition.recordsChanges {
                let model = Model(store: self, name: name.name)
                let state = try read { try $0.syncState(model) }
                guard state.cursor == nil, !state.initialSyncComplete else { continue }
                let db = try database(entry.definition.partition)
                let prefix = Keys.objectPrefix(name.name)
                let iterator = try db.makeIterator()
                var batch = LevelDBWriteBatch()
                iterator.seek(prefix)
                while iterator.isValid, iterator.keyHasPrefix(prefix) {
                    defer { iterator.next() }
                    // A record carrying a version is one the server sent.
                    if iterator.withValue({ $0.first }) == StoredObject.versionMark { continue }
                    let id = try iterator.withKey { try Keys.objectID(fromKey: $0, prefixLength: prefix.count) }
                    let records: [KeyFamily] = [.change, .inFlight, .error, .version]
                    if try records.contains(where: { try db.get(Keys.objectRecord($0, name.name, id)) != nil }) { continue }
                    batch.put(Keys.change(name.name, id), StoredChange(kind: .create, attributes: JSONObject()).encoded)
                    restored.append((name.name, id))
                }
                try iterator.checkError()
                if batch.count > 0 { try db.write(batch, sync: true) }
            }
        }
        return restored
    }

    /// Each model's statistics as the damage left them; a model whose record is gone, though
    /// it holds records (every write of a model writes its statistics), is reported in
    /// `countsLost` by ``compareChanges(with:_:)``, and left out.
    private func survivingStatistics() throws -> [NameKey: StoredStatistics] {
        var surviving: [NameKey: StoredStatistics] = [:]
        for (name, entry) in modelsByName() where try database(entry.definition.partition).get(Keys.modelStatistics(name.name)) != nil {
            surviving[name] = entry.statistics
        }
        return surviving
    }

    /// Step 3d: the models holding fewer unconfirmed changes than their statistics counted
    /// before the damage (less the changes dropped with their objects; the creates logged again
    /// count as salvaged), and the models with records whose statistics were lost, are reported.
    private func compareChanges(with before: [NameKey: StoredStatistics], _ report: inout RepairReport) {
        for (name, entry) in modelsByName() {
            let now = entry.statistics
            let unconfirmed = { (s: StoredStatistics) in s.pendingTotal + s.inFlight + s.errors }
            guard let counted = before[name] else {
                if now.objects > 0 || unconfirmed(now) > 0 { report.countsLost.append(name.name) }
                continue
            }
            // The creates logged again are among those counted now, in place of those lost.
            let expected = unconfirmed(counted) - report.changesDropped.count { UTF8Order.equal($0.model, name.name) }
            if unconfirmed(now) < expected { report.changesLost.append((name.name, unconfirmed(counted), expected - unconfirmed(now))) }
        }
    }

    /// Step 3c: the models holding fewer objects than they `counted` are reported; those that
    /// synced before pull their whole collection at their next sync.
    private func scheduleFullPulls(counted: [NameKey: Int], _ report: inout RepairReport) throws {
        let models = modelsByName()
        for (name, entry) in models {
            guard let before = counted[name], entry.statistics.objects < before else { continue }
            report.objectsLost.append((name.name, before, entry.statistics.objects))
            guard entry.definition.syncType != .none, entry.definition.partition != .local else { continue }
            let model = Model(store: self, name: name.name)
            if try bulkUpdate({ tx in try tx.oweFullPullIfSynced(model) }) { report.fullPullsScheduled.append(name.name) }
        }
    }

    private static func directory(of partition: Partition, in path: String) -> String {
        URL(fileURLWithPath: path).appendingPathComponent(partition.rawValue).path
    }

    /// What one partition holds, read key by key after LevelDB's repair.
    private struct Census {
        var keys = 0
        /// Keys that decode as Satchel's (a family byte, then tuple elements, a name first).
        var satchelKeys = 0
        var hasMarker = false
        /// Models whose definition decodes here.
        var defined: Set<String> = []
        /// Records per model name (objects, changes, index entries and definitions, states…).
        var records: [String: Int] = [:]
        /// Definitions and statistics that no longer decode.
        var broken: [[UInt8]] = []
        /// `model #id` of each index defined here, and of each index that has entries here.
        var indexes: Set<String> = []
        var indexesWithEntries: Set<String> = []
    }

    /// Step 2 of ``repair(path:force:configuration:)``: the format marker, lost definitions,
    /// undecodable records; on each partition's raw database, before the store opens (which
    /// refuses a partition without its marker, or with an undecodable definition).
    private static func salvage(
        _ path: String, partitions: [Partition], force: Bool, encryption: EncryptedEnvironment?, report: inout RepairReport
    ) throws {
        var options = LevelDBOptions()
        options.createIfMissing = false
        options.environment = encryption
        var censuses: [Partition: Census] = [:]
        var databases: [Partition: LevelDB] = [:]
        defer { for db in databases.values { try? db.close() } }
        for partition in partitions {
            let db = try LevelDB(path: directory(of: partition, in: path), options: options)
            databases[partition] = db
            censuses[partition] = try census(of: db)
        }
        let defined = censuses.values.reduce(into: Set<String>()) { $0.formUnion($1.defined) }
        // A model defined nowhere is defined again where most of its records are.
        var homes: [String: Partition] = [:]
        for partition in partitions {
            for (name, count) in censuses[partition]?.records ?? [:] where !name.isEmpty && !defined.contains(name) {
                if let home = homes[name], (censuses[home]?.records[name] ?? 0) >= count { continue }
                homes[name] = partition
            }
        }
        for partition in partitions {
            guard let census = censuses[partition], let db = databases[partition] else { continue }
            var batch = LevelDBWriteBatch()
            if census.keys > 0 && !census.hasMarker {
                guard census.satchelKeys * 2 >= census.keys || force else {
                    throw SatchelError(
                        .notAStore,
                        "\(path) is not a Satchel store: its \(partition.rawValue) partition holds keys that are not Satchel's (\(census.satchelKeys) of \(census.keys) decode)"
                    )
                }
                batch.put(Keys.format, JSONValue.int(Keys.formatVersion).jsonBytes)
                report.markersRewritten.append(partition)
            }
            for key in census.broken { batch.delete(key) }
            // Entries of an index whose definition is gone are removed with the rebuild.
            report.indexesLost += census.indexesWithEntries.subtracting(census.indexes).sorted(by: UTF8Order.less)
            report.recordsDropped += census.broken.count
            for name in homes.filter({ $0.value == partition }).keys.sorted(by: UTF8Order.less) {
                let definition = ModelDefinition(name: name, partition: partition, syncType: partition == .local ? .none : .incremental)
                batch.put(Keys.modelDefinition(name), definition.json.jsonBytes)
                report.modelsRecreated.append(name)
            }
            try db.write(batch, sync: true)
        }
    }

    private static func census(of db: LevelDB) throws -> Census {
        var census = Census()
        let iterator = try db.makeIterator(fillCache: false)
        iterator.seekToFirst()
        while iterator.isValid {
            census.keys += 1
            let key = iterator.key
            if let (family, elements) = try? Keys.decode(key), let first = elements.first?.stringValue {
                census.satchelKeys += 1
                let name = elements.count > 1 ? elements[1].stringValue : nil
                switch (family, first, name) {
                case (.meta, "format", _):
                    census.hasMarker = (try? JSONValue(parsing: iterator.value))?.intValue != nil
                    if !census.hasMarker { census.broken.append(key) }
                case (.meta, "model", let name?):
                    census.records[name, default: 0] += 1
                    let definition = try? ModelDefinition(json: JSONObject(parsing: iterator.value))
                    if let definition, UTF8Order.equal(definition.name, name) {
                        census.defined.insert(name)
                    } else {
                        census.broken.append(key)
                    }
                case (.meta, "index", let name?):
                    census.records[name, default: 0] += 1
                    if (try? StoredIndex(json: JSONObject(parsing: iterator.value), model: name)) == nil {
                        census.broken.append(key)
                    } else if let id = elements.last?.stringValue {
                        census.indexes.insert("\(name) #\(id)")
                    }
                case (.meta, "stats", let name?):
                    census.records[name, default: 0] += 1
                    if (try? iterator.withValue { try StoredStatistics(decoding: $0) }) == nil { census.broken.append(key) }
                case (.meta, "sync", let name?), (.meta, "rewrite", let name?):
                    census.records[name, default: 0] += 1
                case (.meta, _, _):
                    break  // the session, and records of no model
                case (.index, _, let id?):
                    census.records[first, default: 0] += 1
                    census.indexesWithEntries.insert("\(first) #\(id)")
                default:
                    census.records[first, default: 0] += 1
                }
            }
            iterator.next()
        }
        try iterator.checkError()
        return census
    }

    /// Step 3 of ``repair(path:force:configuration:)``: every index of every model, rebuilt
    /// from the objects; index entries of indexes whose definition was lost go.
    private func rebuildIndexes(_ report: inout RepairReport) throws {
        let models = modelsByName()
        for (name, entry) in models {
            let partition = entry.definition.partition
            let prefix = Keys.indexModelPrefix(name.name)
            let before = try database(partition).countKeys(withPrefix: prefix)
            guard before > 0 || !entry.indexes.isEmpty else { continue }
            report.indexEntriesBefore += before
            // Not used by queries from here until rebuilt.
            try bulkUpdate { tx in
                for index in entry.indexes {
                    var building = index
                    building.state = .building
                    try tx.rawWrite(Keys.indexDefinition(name.name, index.id), building.json.jsonBytes, partition: partition, model: name.name)
                }
                tx.onCommit { catalog in
                    for i in catalog.models[name]?.indexes.indices ?? 0..<0 { catalog.models[name]?.indexes[i].state = .building }
                }
            }
            try deleteKeys(withPrefix: prefix, of: name.name, in: partition)
            let model = Model(store: self, name: name.name)
            for index in entry.indexes {
                try model.createIndex(index.definition)
                report.indexesRebuilt += 1
            }
            report.indexEntriesAfter += try database(partition).countKeys(withPrefix: prefix)
        }
    }

    /// Counts the arrays of the models whose statistics an earlier version wrote without them
    /// (once: the statistics written then say they are counted).
    func countArrays() throws {
        let uncounted = catalog.withLock { $0.models.filter { $0.value.statistics.arraysUncounted } }
        guard !uncounted.isEmpty else { return }
        try writer.withLock {
            for (name, entry) in uncounted {
                var statistics = entry.statistics
                statistics.arrays = [:]
                statistics.nestedArrays = [:]
                statistics.arraysUncounted = false
                try Model(store: self, name: name.name).scanObjects { object in
                    statistics.adjustArrays(old: nil, new: object.attributes)
                    return true
                }
                var batch = LevelDBWriteBatch()
                batch.put(Keys.modelStatistics(name.name), statistics.encoded)
                try database(entry.definition.partition).write(batch, sync: true)
                catalog.withLock { $0.models[name]?.statistics = statistics }
            }
        }
    }

    /// Marks `model`'s stored statistics for a recount (`due`), or writes them unmarked, exact
    /// from memory: the two ends of an import (``StoredStatistics/recountDue``).
    func markRecount(_ model: String, due: Bool) throws {
        try writer.withLock {
            guard var entry = catalog.withLock({ $0.models[NameKey(model)] }), entry.statistics.recountDue != due else { return }
            entry.statistics.recountDue = due
            var batch = LevelDBWriteBatch()
            batch.put(Keys.modelStatistics(model), entry.statistics.encoded)
            try database(entry.definition.partition).write(batch, sync: configuration.durableWrites)
            catalog.withLock { $0.models[NameKey(model)]?.statistics.recountDue = due }
        }
    }

    /// Recounts, when the store opens, the models whose statistics an import marked and did not
    /// write again (the process died during it).
    func recountInterruptedImports() throws {
        let marked = catalog.withLock { Set($0.models.filter { $0.value.statistics.recountDue }.keys) }
        if !marked.isEmpty { try recount(only: marked) }
    }

    /// Recomputes the statistics of every model (or of `only` those) from its data and stores
    /// them.
    func recount(only: Set<NameKey>? = nil) throws {
        try writer.withLock {
            let entries = catalog.withLock { $0.models }
            for (name, entry) in entries where only?.contains(name) ?? true {
                var statistics = StoredStatistics()
                let model = Model(store: self, name: name.name)
                try model.scanObjects { object in
                    statistics.objects += 1
                    statistics.adjustArrays(old: nil, new: object.attributes)
                    return true
                }
                for change in try model.pendingChanges() { statistics.adjustPending(change.kind, by: 1) }
                statistics.inFlight = try database(entry.definition.partition).countKeys(withPrefix: Keys.objectRecordPrefix(.inFlight, name.name))
                statistics.errors = try database(entry.definition.partition).countKeys(withPrefix: Keys.objectRecordPrefix(.error, name.name))
                for index in entry.indexes { try statistics.recount(index, in: database(entry.definition.partition)) }
                if statistics != entry.statistics {
                    var batch = LevelDBWriteBatch()
                    batch.put(Keys.modelStatistics(name.name), statistics.encoded)
                    try database(entry.definition.partition).write(batch, sync: true)
                    catalog.withLock { $0.models[name]?.statistics = statistics }
                }
            }
        }
    }
}
