import Satchel

/// What a change from the server does to a local object, given what this device holds of it:
/// the rules of `docs/SYNC.md` ("Local changes win…"), as pure functions of (server change, local
/// records), each outcome named. The engine reads the local state, asks the policy, and writes
/// what it answers; nothing here reads or writes the store.
enum MergePolicy {
    /// What the device holds of one object.
    struct Local: Equatable, Sendable {
        var model: String
        var id: String
        /// The object's attributes; nil when there is no object here.
        var attributes: JSONObject?
        var records: ObjectSyncState

        init(model: String, id: String, attributes: JSONObject?, records: ObjectSyncState = ObjectSyncState()) {
            self.model = model
            self.id = id
            self.attributes = attributes
            self.records = records
        }
    }

    /// What happens to the object.
    enum Write: Equatable, Sendable {
        /// Left as it is.
        case keep
        /// Given exactly these attributes (none: deleted).
        case replace(JSONObject)
        /// Deleted.
        case delete
    }

    /// The rule that applied, by name (the words of `docs/SYNC.md`).
    enum Rule: String, Sendable, CaseIterable {
        // A pulled object (whole, or some attributes)
        /// No local change: the server's values are taken; device-only attributes stay.
        case taken
        /// Attributes changed here and not yet acknowledged keep their local values; the others
        /// follow the server.
        case localChangesWin
        /// Created here and not yet acknowledged (or refused): the server's object is not
        /// applied over it.
        case createdHere
        /// Deleted here (pending, in flight, or refused): not brought back. The version is kept,
        /// and a refused update's copy of the server's object refreshed.
        case deletedHere
        // A server delete
        /// No local change: the object is deleted.
        case deleted
        /// Deleted here too: the pending or in-flight delete is done.
        case deletedHereToo
        /// A refused delete: what it asked for happened.
        case refusedDeleteDone
        /// A refused create: the server never had the object; it stays. (Refused because the
        /// server held another under its id, now deleted: the refusal says so.)
        case refusedCreateKept
        /// Created here and never pushed: not the server's object; it stays.
        case neverPushed
        /// A create in flight whose server id was to come later (a link): the server did not keep
        /// the object under this id, and will send the real one.
        case createNotKept
        /// Changed here (pending or in flight) and deleted on the server: kept, as a refused change
        /// whose `retry` creates it again.
        case deletedWhileChanged
        /// A refused update, and now the server deleted the object: the error says so.
        case refusedUpdateMeetsDelete
        // Attributes removed on the server
        /// The listed attributes go, but those changed here.
        case removed
        /// There is no object here: nothing to remove from.
        case absent
    }

    struct Outcome: Equatable, Sendable {
        var rule: Rule
        var write: Write
        var records: ObjectSyncState
    }

    // MARK: - The rules

    /// Attributes the server must not overwrite: those with local changes it has not
    /// acknowledged (every one, for an object created here), and device-only ones.
    static func protected(
        _ records: ObjectSyncState, configuration: ModelSyncConfiguration
    ) -> (all: Bool, names: Set<String>, changedHere: Bool, deletedHere: Bool) {
        let deviceOnly = Set(configuration.deviceOnlyAttributes)
        guard records.hasLocalChange else { return (false, deviceOnly, false, false) }
        var names = deviceOnly
        var all = false
        var changed = false
        var deleted = false
        func note(_ kind: PendingChange.Kind, _ attributes: JSONObject) {
            switch kind {
            case .create: all = true
            case .update:
                names.formUnion(attributes.keys)
                changed = changed || attributes.contains { !deviceOnly.contains($0.key) }
            case .delete: deleted = true
            }
        }
        if let error = records.refusal { note(error.kind, error.attributes) }
        if let pending = records.pending { note(pending.kind, pending.attributes) }
        if let inFlight = records.inFlight { note(inFlight.kind, inFlight.attributes) }
        return (all, names, changed, deleted)
    }

    /// The last attributes of an object deleted here, as its delete (refused, pending or in
    /// flight) keeps them.
    static func lastAttributes(deletedIn records: ObjectSyncState) -> JSONObject? {
        if let error = records.refusal, error.kind == .delete { return error.attributes }
        if let pending = records.pending, pending.kind == .delete { return pending.attributes }
        if let inFlight = records.inFlight, inFlight.kind == .delete { return inFlight.attributes }
        return nil
    }

    /// The attributes local updates added to the object, which the server never had: those
    /// whose base value is null (absent before the change), and those a refused update holds
    /// that the server's copy lacks.
    static func addedHere(_ records: ObjectSyncState) -> Set<String> {
        var added = Set<String>()
        for (kind, base) in [(records.pending?.kind, records.pending?.baseValues), (records.inFlight?.kind, records.inFlight?.baseValues)] {
            guard kind == .update, let base else { continue }
            for (name, value) in base where value.isNull { added.insert(name) }
        }
        if let error = records.refusal, error.kind == .update, let server = error.serverCopy {
            for name in error.attributes.keys where server[name] == nil { added.insert(name) }
        }
        return added
    }

    /// Whether the object exists only here: created here, not (yet) on the server.
    static func isLocalOnly(_ records: ObjectSyncState) -> Bool {
        records.pending?.kind == .create || records.inFlight?.kind == .create || records.refusal?.kind == .create
    }

    /// A pulled object: whole, or some attributes (RhoConnect's `insert`). `blobs` are the
    /// references of blob attributes downloaded for it (attribute → reference).
    static func upsert(
        _ object: ServerObject, local: Local, configuration: ModelSyncConfiguration, blobs: [String: String] = [:]
    ) -> Outcome {
        var records = local.records
        let protected = protected(records, configuration: configuration)
        if protected.all {
            if var error = records.refusal, error.kind == .create, error.serverCopy != nil || error.serverDeleted {
                // A create refused because the server holds an object under its id (Kinto's
                // 412): that object's copy is kept current, for a `delete` that takes it (the
                // pull's cursor passes it).
                var copy = object.isWhole ? JSONObject() : (error.serverCopy ?? JSONObject())
                for (name, value) in configuration.syncing(object.attributes) { copy[name] = value.isNull ? nil : value }
                error.serverCopy = copy
                error.serverDeleted = false
                records.refusal = error
                if let version = object.version { records.version = version }
            }
            return Outcome(rule: .createdHere, write: .keep, records: records)
        }
        // The server's version is the base of the next push of a change to the object.
        if let version = object.version { records.version = version }
        var incoming = configuration.syncing(object.attributes)
        // A blob downloaded is its reference here, in the refusal's copy too (what a rollback
        // writes).
        for (name, reference) in blobs { incoming[name] = .string(reference) }
        if var error = records.refusal, error.kind == .update {
            // Keep the error's copy of the server's object current, for a rollback.
            var copy = object.isWhole ? JSONObject() : (error.serverCopy ?? JSONObject())
            for (name, value) in incoming { copy[name] = value.isNull ? nil : value }
            error.serverCopy = copy
            error.serverDeleted = false
            records.refusal = error
        }
        if protected.deletedHere { return Outcome(rule: .deletedHere, write: .keep, records: records) }
        let old = local.attributes
        var new: JSONObject
        if object.isWhole {
            new = incoming
            for (name, value) in old ?? JSONObject() where !configuration.syncs(name) || protected.names.contains(name) { new[name] = value }
            for name in protected.names where old?[name] == nil { new[name] = nil }
        } else {
            new = old ?? JSONObject()
            for (name, value) in incoming where !protected.names.contains(name) { new[name] = value.isNull ? nil : value }
        }
        return Outcome(rule: protected.changedHere ? .localChangesWin : .taken, write: .replace(new), records: records)
    }

    /// A server delete.
    static func delete(local: Local) -> Outcome {
        var records = local.records
        if let error = records.refusal {
            switch error.kind {
            case .create:
                if error.serverCopy != nil {
                    // The server's object under its id is gone: a `delete` leaves nothing here,
                    // a `recreate` finds the id free.
                    var error = error
                    error.serverCopy = nil
                    error.serverDeleted = true
                    records.refusal = error
                    records.version = nil
                }
                return Outcome(rule: .refusedCreateKept, write: .keep, records: records)
            case .update:
                var error = error
                error.serverDeleted = true
                error.serverCopy = nil
                records.refusal = error
                records.version = nil
                return Outcome(rule: .refusedUpdateMeetsDelete, write: .keep, records: records)
            case .delete:
                // What the refused delete wanted happened; the rules below still apply.
                records.refusal = nil
            }
        }
        if records.pending?.kind == .delete || records.inFlight?.kind == .delete {
            records.pending = nil
            records.inFlight = nil
            records.version = nil
            return Outcome(rule: .deletedHereToo, write: .keep, records: records)
        }
        if let inFlight = records.inFlight, inFlight.kind == .create, inFlight.state != .awaitingResult {
            // The server carried the create out and gave no id (RhoConnect deletes the temporary
            // object): the real one comes in a later page.
            records.inFlight = nil
            records.version = nil
            return Outcome(rule: .createNotKept, write: .delete, records: records)
        }
        if records.pending?.kind == .create { return Outcome(rule: .neverPushed, write: .keep, records: records) }
        if let changed = records.pending?.attributes ?? records.inFlight?.attributes {
            records.inFlight = nil
            records.refusal = RefusedChange(
                model: local.model, objectID: local.id, kind: .update, message: "deleted on the server while changed here", code: "deleted",
                attributes: changed, serverDeleted: true)
            return Outcome(rule: .deletedWhileChanged, write: .keep, records: records)
        }
        records.version = nil
        return Outcome(rule: local.records.refusal?.kind == .delete ? .refusedDeleteDone : .deleted, write: .delete, records: records)
    }

    /// Attributes the server removed (`names`). Every attribute the server could know of removed
    /// is the object deleted.
    static func remove(_ names: [String], local given: Local, configuration: ModelSyncConfiguration) -> Outcome {
        // A refused update's copy of the server's object follows it, for a rollback (a black-box
        // probe: removed attributes stayed in it, and a rollback brought them back); all gone
        // is the object deleted there.
        var records = given.records
        if var error = records.refusal, error.kind == .update, var copy = error.serverCopy {
            for name in names { copy[name] = nil }
            if copy.contains(where: { $0.key != Object.idAttribute && configuration.syncs($0.key) }) {
                error.serverCopy = copy
            } else {
                error.serverCopy = nil
                error.serverDeleted = true
            }
            records.refusal = error
        }
        let local = Local(model: given.model, id: given.id, attributes: given.attributes, records: records)
        // An object deleted here (the delete refused, pending or in flight) is gone from the
        // store, but its delete keeps its last attributes: a removal listing them all is the
        // server's delete of it (a refused delete's error goes).
        let deletedHere = local.attributes == nil ? lastAttributes(deletedIn: local.records) : nil
        // An object made again here after its delete was refused: the server's object is the one
        // the refused delete held (a black-box probe: the listing was read against the new
        // object, and the refusal never went).
        let remade = local.attributes != nil && local.records.refusal?.kind == .delete ? local.records.refusal?.attributes : nil
        guard let attributes = remade ?? local.attributes ?? deletedHere else { return Outcome(rule: .absent, write: .keep, records: local.records) }
        let listed = Set(names)
        let keys = attributes.keys
        // What the server could know of the object: not device-only attributes, nor those a
        // local change added (an object the server deletes lists neither).
        let added = addedHere(given.records)
        if keys.contains(where: listed.contains), keys.allSatisfy({ listed.contains($0) || !configuration.syncs($0) || added.contains($0) }) {
            return delete(local: local)
        }
        if deletedHere != nil { return Outcome(rule: .deletedHere, write: .keep, records: local.records) }
        let protected = protected(local.records, configuration: configuration)
        if protected.all { return Outcome(rule: .createdHere, write: .keep, records: local.records) }
        var remaining = attributes
        for name in names where configuration.syncs(name) && !protected.names.contains(name) { remaining[name] = nil }
        return Outcome(rule: .removed, write: .replace(remaining), records: local.records)
    }

    /// After a full pull that sent the object in parts: attributes of it the server did not send
    /// (`sent` are those it did) are gone from the server, but those changed here.
    static func keepOnly(_ sent: Set<String>, local: Local, configuration: ModelSyncConfiguration) -> Outcome {
        guard let attributes = local.attributes else { return Outcome(rule: .absent, write: .keep, records: local.records) }
        let protected = protected(local.records, configuration: configuration)
        if protected.all { return Outcome(rule: .createdHere, write: .keep, records: local.records) }
        if protected.deletedHere { return Outcome(rule: .deletedHere, write: .keep, records: local.records) }
        let kept = attributes.filter { name, _ in sent.contains(name) || !configuration.syncs(name) || protected.names.contains(name) }
        return Outcome(rule: .removed, write: .replace(kept), records: local.records)
    }
}
