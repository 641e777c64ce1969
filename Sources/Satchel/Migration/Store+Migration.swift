import Foundation
import Synchronization

/// How far a migration has got, for ``Store/migrate(_:dryRun:progress:changes:)``.
public struct MigrationProgress: Sendable {
    public enum Phase: Sendable, Hashable {
        /// Every object is checked before anything is written.
        case checking
        /// The objects are rewritten, a batch at a time.
        case writing
    }

    /// The migration's name and model.
    public var migration: String
    public var model: String
    public var phase: Phase
    /// Objects done in this phase, and the model's objects when it began.
    public var processed: Int
    public var total: Int
}

/// What one migration did (or, in a dry run, would do).
public struct MigrationReport: Sendable, Hashable {
    public var migration: String
    public var model: String
    /// Whether the store had applied it before: it did nothing.
    public var alreadyApplied = false
    /// Objects examined, rewritten, and deleted (left without attributes).
    public var objects = 0
    public var changed = 0
    public var deleted = 0
}

/// One object a dry run would change.
public struct MigrationChange: Sendable, Hashable {
    public var objectID: String
    public var before: JSONObject
    /// Nil when the object would be deleted (no attribute left).
    public var after: JSONObject?
}

extension Model {
    /// The names of the migrations applied to this model, in the order they were applied: the
    /// model's version.
    public var appliedMigrations: [String] {
        get throws {
            let db = try store.database(definition.partition)
            let prefix = Keys.migrationPrefix(name)
            var applied: [(order: Int64, name: String)] = []
            let iterator = try db.makeIterator()
            iterator.seek(prefix)
            while iterator.isValid && iterator.keyHasPrefix(prefix) {
                let (_, elements) = try Keys.decode(iterator.key)
                let record = try Store.AppliedMigration(json: JSONObject(parsing: iterator.value))
                if let name = elements.last?.stringValue { applied.append((Int64(record.order), name)) }
                iterator.next()
            }
            try iterator.checkError()
            return applied.sorted { $0.order < $1.order }.map(\.name)
        }
    }
}

extension Store {
    /// Objects per batch of a migration's writes.
    static let migrationBatchSize = 1000

    /// Applies each migration the store has not applied yet, in order; a migration applied
    /// before is skipped (reported `alreadyApplied`), and one a kill interrupted resumes where
    /// it stopped.
    ///
    /// For each migration, with the store's writes held back meanwhile (reads go on):
    /// 1. every object is checked: the data steps applied, the result fitted to the model's
    ///    schema after the migration. One object that does not migrate refuses the migration,
    ///    naming how many and the first; nothing is written. A dry run stops here.
    /// 2. indexes are dropped, the objects rewritten in batches (each batch one transaction
    ///    that records how far the migration got), indexes created;
    /// 3. one batch sets the model's new definition and records the migration applied.
    ///
    /// ```swift
    /// try store.migrate([
    ///     Migration("notes v2", model: "Note", steps: [.rename("title", to: "name"), .add("archived", default: false)]),
    /// ]) { progress in print("\(progress.migration): \(progress.processed)/\(progress.total)") }
    /// ```
    ///
    /// - Parameters:
    ///   - dryRun: check only, write nothing; `changes` hears each object that would change.
    ///   - progress: called as objects are checked and written.
    ///   - changes: in a dry run, called for each object the migration would change.
    /// - Returns: one report per migration.
    /// - Throws: ``SatchelError`` `.invalidObject` or `.schemaViolation` for objects that do not
    ///   migrate (nothing of that migration written; the ones before it in the list stay
    ///   applied, as the message says), `.invalidArgument` for a list naming a migration twice,
    ///   `.busy` when another migration of the model is unfinished and not in the list.
    @discardableResult
    public func migrate(
        _ migrations: [Migration], dryRun: Bool = false, progress: ((MigrationProgress) -> Void)? = nil,
        changes: ((MigrationChange) -> Void)? = nil
    ) throws -> [MigrationReport] {
        var seen = Set<String>()
        for migration in migrations where !seen.insert(migration.model + "\u{0}" + migration.name).inserted {
            throw SatchelError(.invalidArgument, "migration '\(migration.name)' of '\(migration.model)' is listed twice", model: migration.model)
        }
        var reports: [MigrationReport] = []
        for migration in migrations {
            do {
                reports.append(try run(migration, dryRun: dryRun, progress: progress, changes: changes))
            } catch let error as SatchelError where !dryRun && !reports.isEmpty {
                // Each migration is its own whole: those before it in the list stay applied.
                let before = reports.map { "'\($0.migration)'" }.joined(separator: ", ")
                throw SatchelError(
                    error.code, "\(error.message) (the migrations before it in the list, \(before), stay applied)", model: error.model,
                    objectID: error.objectID)
            }
        }
        return reports
    }

    /// The record of a migration applied (`(meta, "migration", model, name)`): its place in the
    /// model's order, when, and what it changed.
    struct AppliedMigration: Equatable {
        var order: Int
        var applied: String
        var changed: Int
        var deleted: Int
        /// The steps' JSON form (``Migration/stepsJSON``), nil when a step is a closure (or the
        /// record is an earlier build's): what a later migration of the same name is held to.
        var steps: JSONValue?

        var json: JSONObject {
            var json: JSONObject = [
                "applied": .string(applied), "changed": .int(Int64(changed)), "deleted": .int(Int64(deleted)), "order": .int(Int64(order)),
            ]
            if let steps { json["steps"] = steps }
            return json
        }

        init(order: Int, applied: String, changed: Int, deleted: Int, steps: JSONValue?) {
            (self.order, self.applied, self.changed, self.deleted, self.steps) = (order, applied, changed, deleted, steps)
        }

        init(json: JSONObject) throws(SatchelError) {
            guard let order = json["order"]?.intValue else { throw SatchelError(.corruption, "a migration applied without its order") }
            self.order = Int(order)
            applied = json["applied"]?.stringValue ?? ""
            changed = Int(json["changed"]?.intValue ?? 0)
            deleted = Int(json["deleted"]?.intValue ?? 0)
            steps = json["steps"]
        }
    }

    /// The record of a migration under way (`(meta, "migrating", model)`).
    struct MigrationState: Equatable {
        var name: String
        var cursor: String?
        var done = false
        var changed = 0
        var deleted = 0
        var push = false
        var steps: JSONValue?

        var json: JSONObject {
            var object: JSONObject = [
                "name": .string(name), "done": .bool(done), "changed": .int(Int64(changed)), "deleted": .int(Int64(deleted)), "push": .bool(push),
            ]
            if let cursor { object["cursor"] = .string(cursor) }
            if let steps { object["steps"] = steps }
            return object
        }

        init(name: String, push: Bool, steps: JSONValue?) {
            self.name = name
            self.push = push
            self.steps = steps
        }

        init(json: JSONObject) throws(SatchelError) {
            guard let name = json["name"]?.stringValue else { throw SatchelError(.corruption, "a migration record without a name") }
            self.name = name
            cursor = json["cursor"]?.stringValue
            done = json["done"]?.boolValue ?? false
            changed = Int(json["changed"]?.intValue ?? 0)
            deleted = Int(json["deleted"]?.intValue ?? 0)
            push = json["push"]?.boolValue ?? false
            steps = json["steps"]
        }
    }

    func migrationState(_ model: String, partition: Partition) throws -> MigrationState? {
        try database(partition).get(Keys.migrating(model)).map { try MigrationState(json: try JSONObject(parsing: $0)) }
    }

    private func run(
        _ migration: Migration, dryRun: Bool, progress: ((MigrationProgress) -> Void)?, changes: ((MigrationChange) -> Void)?
    ) throws -> MigrationReport {
        let model = try self.model(migration.model)
        var report = MigrationReport(migration: migration.name, model: model.name)
        for (index, step) in migration.steps.enumerated() {
            do throws(SatchelError) {
                try step.validate()
            } catch {
                throw SatchelError(.invalidArgument, "migration '\(migration.name)', step \(index + 1): \(error.message)", model: model.name)
            }
            switch step {
            case .createIndex(let definition), .dropIndex(let definition): try definition.validate(model: model.name)
            case .setKind(.fixedSchema(let schema)) where schema.keys.contains(Object.idAttribute):
                throw SatchelError(.invalidName, "'object' is the object id, not a schema attribute", model: model.name)
            default: break
            }
        }
        return try writer.withLock { () throws -> MigrationReport in
            let entry = try entry(model.name)
            let partition = entry.definition.partition
            if let bytes = try database(partition).get(Keys.migration(model.name, migration.name)) {
                // The same name with other steps would never run them: refused, not skipped.
                let record: JSONObject
                do { record = try JSONObject(parsing: bytes) } catch { throw SatchelError(.corruption, "undecodable applied migration: \(error)") }
                let applied = try AppliedMigration(json: record)
                if let steps = applied.steps, let given = migration.stepsJSON, steps != given {
                    throw SatchelError(
                        .invalidArgument,
                        "migration '\(migration.name)' of model '\(model.name)' was applied with other steps: give the new steps a new name",
                        model: model.name)
                }
                report.alreadyApplied = true
                return report
            }
            let resumed = try migrationState(model.name, partition: partition)
            if let resumed, resumed.name != migration.name {
                throw SatchelError(
                    .busy, "migration '\(resumed.name)' of model '\(model.name)' is unfinished: run it before '\(migration.name)'", model: model.name)
            }
            if resumed == nil {
                // A drop of an index the model does not have is a mistake in the file (a
                // resumed run may have dropped it already).
                for (index, step) in migration.steps.enumerated() {
                    guard case .dropIndex(let definition) = step, !entry.indexes.contains(where: { $0.definition.sameKeys(as: definition) })
                    else { continue }
                    throw SatchelError(
                        .invalidArgument,
                        "migration '\(migration.name)', step \(index + 1): model '\(model.name)' has no index \(definition) to drop; nothing was changed",
                        model: model.name)
                }
                // An index a step cannot build beside the model's others (after the drops, and
                // the builds of the steps before it) refuses the migration before any object is
                // rewritten (a black-box probe: it failed after the rewrite, the migration left
                // unfinished).
                var indexes = entry.indexes.filter { index in
                    !migration.steps.contains { step in
                        if case .dropIndex(let dropped) = step { dropped.sameKeys(as: index.definition) } else { false }
                    }
                }
                for (index, step) in migration.steps.enumerated() {
                    guard case .createIndex(let definition) = step else { continue }
                    if let refusal = Model.refusal(creating: definition, beside: indexes, model: model.name) {
                        throw SatchelError(
                            refusal.code, "migration '\(migration.name)', step \(index + 1): \(refusal.message); nothing was changed",
                            model: model.name)
                    }
                    indexes.append(StoredIndex(id: 0, definition: definition, state: .building, model: model.name))
                }
            }
            var target = entry.definition
            for case .setKind(let kind) in migration.steps { target.kind = kind }
            let dataSteps = migration.steps.filter(\.isDataStep)
            let total = entry.statistics.objects

            // 1. Check every object not yet rewritten.
            if !(resumed?.done ?? false) {
                var checker = target
                checker.choices = [:]  // values the server sent need not be among a picklist's
                var failures = 0
                var first: SatchelError?
                var processed = 0
                try forEachObject(of: model, partition: partition, after: resumed?.cursor) { id, before in
                    processed += 1
                    report.objects += 1
                    do throws(SatchelError) {
                        var after = before
                        for step in dataSteps { try step.apply(to: &after, id: id, model: model.name) }
                        if !after.isEmpty { try checker.validate(after, objectID: id) }
                        if !after.isIdentical(to: before) {
                            report.changed += 1
                            if after.isEmpty { report.deleted += 1 }
                            if dryRun { changes?(MigrationChange(objectID: id, before: before, after: after.isEmpty ? nil : after)) }
                        }
                    } catch {
                        failures += 1
                        if first == nil { first = error }
                    }
                    if processed % Self.migrationBatchSize == 0 {
                        progress?(
                            MigrationProgress(migration: migration.name, model: model.name, phase: .checking, processed: processed, total: total))
                    }
                }
                if let first {
                    throw SatchelError(
                        first.code,
                        "migration '\(migration.name)' of '\(model.name)' cannot run: \(failures) of \(report.objects) objects do not migrate, e.g. \(first.message); nothing was changed",
                        model: model.name, objectID: first.objectID)
                }
                progress?(MigrationProgress(migration: migration.name, model: model.name, phase: .checking, processed: processed, total: total))
            }
            if dryRun { return report }

            // 2. The record of the migration under way, then the index drops, the objects and
            // the index builds.
            var state = resumed ?? MigrationState(name: migration.name, push: migration.pushesChanges, steps: migration.stepsJSON)
            if resumed == nil {
                let record = state.json.jsonBytes
                try transaction(allowingReentry: true) { tx in
                    try tx.rawWrite(Keys.migrating(model.name), record, partition: partition, model: model.name)
                }
            }
            for case .dropIndex(let definition) in migration.steps {
                if let index = try self.entry(model.name).indexes.first(where: { $0.definition.sameKeys(as: definition) }) {
                    try drop(index, of: model.name, allowingReentry: true)
                }
            }
            var written = 0
            while !state.done {
                state = try rewriteBatch(model, partition: partition, steps: dataSteps, state: state, logChanges: migration.pushesChanges)
                written += 1
                #if DEBUG
                if let hook = faultHooks.withLock({ $0.afterMigrationBatch }) { try hook() }
                #endif
                progress?(
                    MigrationProgress(
                        migration: migration.name, model: model.name, phase: .writing, processed: min(written * Self.migrationBatchSize, total),
                        total: total))
            }
            let statistics = try self.entry(model.name).statistics
            if !migration.pushesChanges && (statistics.pendingDeletes > 0 || statistics.inFlight > 0 || statistics.errors > 0) {
                try rewritePendingDeletes(model, partition: partition, steps: dataSteps)
            }
            for case .createIndex(let definition) in migration.steps {
                try model.buildIndex(definition, batchSize: 1000, allowingReentry: true, progress: nil)
            }

            // 3. The new definition and the migration applied, in one batch.
            let order = try model.appliedMigrations.count + 1
            let applied = AppliedMigration(
                order: order, applied: Self.timestamp(), changed: state.changed, deleted: state.deleted, steps: migration.stepsJSON
            ).json
            let changedDefinition = try target != self.entry(model.name).definition ? target : nil
            try transaction(allowingReentry: true) { tx in
                try tx.rawWrite(Keys.migration(model.name, migration.name), applied.jsonBytes, partition: partition, model: model.name)
                try tx.rawWrite(Keys.migrating(model.name), nil, partition: partition, model: model.name)
                if let changedDefinition {
                    try tx.rawWrite(Keys.modelDefinition(model.name), changedDefinition.json.jsonBytes, partition: partition, model: model.name)
                    let key = NameKey(model.name)
                    tx.onCommit { catalog in catalog.models[key]?.definition = changedDefinition }
                }
            }
            if resumed != nil { report.objects = total }
            report.changed = state.changed
            report.deleted = state.deleted
            return report
        }
    }

    /// Calls `body` with each object of `model` after id `cursor` (all when nil), in key order,
    /// reading the store as it is (the caller holds the writer lock).
    func forEachObject(of model: Model, partition: Partition, after cursor: String?, _ body: (String, JSONObject) throws -> Void) throws {
        let prefix = model.objectPrefix
        let iterator = try objectIterator(model, partition: partition, after: cursor)
        while iterator.isValid && iterator.keyHasPrefix(prefix) {
            let id = try iterator.withKey { try Keys.objectID(fromKey: $0, prefixLength: prefix.count) }
            let attributes = try iterator.withValue { try StoredObject.decode($0, model: model.name, id: id) }
            try body(id, attributes)
            iterator.next()
        }
        try iterator.checkError()
    }

    /// An iterator at the first object of `model` after id `cursor` (the first of all when nil).
    private func objectIterator(_ model: Model, partition: Partition, after cursor: String?) throws -> LevelDBIterator {
        let iterator = try database(partition).makeIterator(fillCache: false)
        guard let cursor else {
            iterator.seek(model.objectPrefix)
            return iterator
        }
        let key = Keys.object(prefix: model.objectPrefix, cursor)
        iterator.seek(key)
        if iterator.isValid && iterator.withKey({ $0.elementsEqual(key) }) { iterator.next() }
        return iterator
    }

    /// Rewrites the next batch of objects after the state's cursor, and the state with them, in
    /// one transaction; returns the new state (`done` once no object is left).
    private func rewriteBatch(_ model: Model, partition: Partition, steps: [MigrationStep], state: MigrationState, logChanges: Bool) throws
        -> MigrationState
    {
        try transaction(allowingReentry: true) { tx in
            var next = state
            let entry = try tx.entry(of: model)
            let statistics = entry.statistics
            let rewritesChanges =
                !logChanges && entry.definition.recordsChanges && (statistics.pendingTotal > 0 || statistics.inFlight > 0 || statistics.errors > 0)
            let prefix = model.objectPrefix
            let iterator = try objectIterator(model, partition: partition, after: state.cursor)
            var n = 0
            while n < Self.migrationBatchSize && iterator.isValid && iterator.keyHasPrefix(prefix) {
                let id = try iterator.withKey { try Keys.objectID(fromKey: $0, prefixLength: prefix.count) }
                let before = try iterator.withValue { try StoredObject.decode($0, model: model.name, id: id) }
                var after = before
                for step in steps { try step.apply(to: &after, id: id, model: model.name) }
                if !after.isIdentical(to: before) {
                    try tx.apply(entry, model, id: id, old: before, new: after.isEmpty ? nil : after, recordChange: logChanges)
                    next.changed += 1
                    if after.isEmpty { next.deleted += 1 }
                }
                if rewritesChanges { try rewriteChanges(tx, model, id, steps: steps, objectGone: after.isEmpty) }
                next.cursor = id
                n += 1
                iterator.next()
            }
            try iterator.checkError()
            if n < Self.migrationBatchSize || !(iterator.isValid && iterator.keyHasPrefix(prefix)) { next.done = true }
            try tx.rawWrite(Keys.migrating(model.name), next.json.jsonBytes, partition: partition, model: model.name)
            return next
        }
    }

    /// Gives object `id`'s local changes the migration's renames, removals and conversions, so
    /// that what is sent later has the new shape: a pending update or delete (a pending create
    /// pushes the object as it is) and an update's base values, so that they still name and
    /// hold what the changed attributes were; a change in flight, which may be sent again; a
    /// refused change and the server's copy it keeps, which a `retry` sends and a `rollback`
    /// writes here. A conversion that fails on a value of the server's copy leaves that copy.
    /// When the migration left the object without attributes (`objectGone`, deleted here and not
    /// pushed), its pending create or update goes: a create and a delete are nothing, and the
    /// server, migrated alike, deletes its copy itself.
    private func rewriteChanges(_ tx: Transaction, _ model: Model, _ id: String, steps: [MigrationStep], objectGone: Bool) throws {
        let records = try tx.objectSyncState(model, id)
        guard records.pending != nil || records.inFlight != nil || records.refusal != nil else { return }
        func asChange(_ attributes: JSONObject) -> JSONObject {
            var attributes = attributes
            for step in steps { step.apply(toChange: &attributes) }
            return attributes
        }
        func asObject(_ attributes: JSONObject) -> JSONObject {
            var migrated = attributes
            do { for step in steps { try step.apply(to: &migrated, id: id, model: model.name) } } catch { return attributes }
            return migrated
        }
        var next = records
        if objectGone, records.pending?.kind != .delete {
            next.pending = nil
        } else if let pending = records.pending, pending.kind != .create {
            next.pending = PendingChange(
                model: model.name, objectID: id, kind: pending.kind, attributes: asChange(pending.attributes),
                baseValues: asChange(pending.baseValues), sentValues: asChange(pending.sentValues))
        }
        if var inFlight = records.inFlight {
            if inFlight.kind == .create {
                inFlight.attributes = asObject(inFlight.attributes)
            } else {
                inFlight.attributes = asChange(inFlight.attributes)
                inFlight.baseValues = asChange(inFlight.baseValues)
                inFlight.sentValues = asChange(inFlight.sentValues)
            }
            next.inFlight = inFlight
        }
        if var refusal = records.refusal {
            refusal.attributes = refusal.kind == .create ? asObject(refusal.attributes) : asChange(refusal.attributes)
            refusal.serverCopy = refusal.serverCopy.map(asObject)
            next.refusal = refusal
        }
        guard next != records else { return }
        try tx.setObjectSyncState(model, id, next, replacing: records)
    }

    /// The deletes of objects no longer stored (pending, in flight or refused) carry their last
    /// attributes: those get the migration's renames, removals and conversions too (each
    /// idempotent for the named conversions, so a resumed migration may run it again).
    private func rewritePendingDeletes(_ model: Model, partition: Partition, steps: [MigrationStep]) throws {
        var ids: [String] = []
        var seen = Set<[UInt8]>()
        for family in [KeyFamily.change, .inFlight, .error] {
            let prefix = Keys.objectRecordPrefix(family, model.name)
            let iterator = try database(partition).makeIterator(fillCache: false)
            iterator.seek(prefix)
            while iterator.isValid && iterator.keyHasPrefix(prefix) {
                let id = try iterator.withKey { try Keys.objectID(fromKey: $0, prefixLength: prefix.count) }
                if try database(partition).get(Keys.object(prefix: model.objectPrefix, id)) == nil, seen.insert(Array(id.utf8)).inserted {
                    ids.append(id)
                }
                iterator.next()
            }
            try iterator.checkError()
        }
        for chunk in stride(from: 0, to: ids.count, by: Self.migrationBatchSize) {
            try transaction(allowingReentry: true) { tx in
                for id in ids[chunk..<min(chunk + Self.migrationBatchSize, ids.count)] {
                    try rewriteChanges(tx, model, id, steps: steps, objectGone: false)
                }
            }
        }
    }

    /// How many objects of `model` (in `partition`) do not fit the fixed schema of `definition`
    /// (its types; not its choices, which values the server sent need not be among), and the
    /// first one's error.
    func objectsMisfitting(_ definition: ModelDefinition, partition: Partition) throws -> (count: Int, first: SatchelError?) {
        guard case .fixedSchema = definition.kind else { return (0, nil) }
        var checker = definition
        checker.choices = [:]
        var count = 0
        var first: SatchelError?
        try forEachObject(of: Model(store: self, name: definition.name), partition: partition, after: nil) { id, attributes in
            do throws(SatchelError) {
                try checker.validate(attributes, objectID: id)
            } catch {
                count += 1
                if first == nil { first = error }
            }
        }
        return (count, first)
    }

    /// Finishes, as the store opens, each migration a kill interrupted whose steps have a JSON
    /// form. One that fails stays unfinished (``verify()`` reports it): the store still opens.
    func resumeMigrations() {
        for (_, db) in openPartitions {
            var found: [(model: String, state: MigrationState)] = []
            guard let entries = try? db.entries(withPrefix: Keys.migratingPrefix) else { continue }
            for entry in entries {
                if let (_, elements) = try? Keys.decode(entry.key), let model = elements.last?.stringValue,
                    let state = try? MigrationState(json: JSONObject(parsing: entry.value))
                {
                    found.append((model, state))
                }
            }
            for (model, state) in found {
                guard let steps = state.steps else { continue }
                let json: JSONObject = ["name": .string(state.name), "steps": steps, "push": .bool(state.push)]
                guard let migration = try? Migration(model: model, json: json) else { continue }
                _ = try? migrate([migration])
            }
        }
    }

    /// Unfinished migrations, for ``verify()``: `(model, name, objects rewritten)`.
    func unfinishedMigrations() throws -> [(model: String, name: String, changed: Int)] {
        var found: [(String, String, Int)] = []
        for (_, db) in openPartitions {
            let iterator = try db.makeIterator()
            let prefix = Keys.migratingPrefix
            iterator.seek(prefix)
            while iterator.isValid && iterator.keyHasPrefix(prefix) {
                let (_, elements) = try Keys.decode(iterator.key)
                let state = try MigrationState(json: JSONObject(parsing: iterator.value))
                found.append((elements.last?.stringValue ?? "?", state.name, state.changed))
                iterator.next()
            }
            try iterator.checkError()
        }
        return found
    }

    private static func timestamp() -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: Date())
    }
}
