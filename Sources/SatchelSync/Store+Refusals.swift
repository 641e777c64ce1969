public import Satchel

extension RefusedChange {
    /// The actions that resolve this error. An update error can be rolled back only when the
    /// server sent its copy of the object (or deleted it), a delete error when it sent its copy.
    public var actions: [Resolution] {
        switch kind {
        case .create: [.delete, .recreate]
        case .update: serverCopy != nil || serverDeleted ? [.retry, .rollback] : [.retry]
        case .delete: serverCopy != nil ? [.retry, .rollback] : [.retry]
        }
    }

    /// One line of JSON as `satchel errors` prints it: `{"kind","message","model","object","server"}`,
    /// and `code` when the server sent one, in its own type: a number where the server's codes
    /// are numbers (Parse's `142`, Kinto's `errno`), else a string (Salesforce's `statusCode`).
    public var json: JSONObject {
        var object: JSONObject = [
            "model": .string(model), "object": .string(objectID), "kind": .string(kind.rawValue), "message": .string(message),
            "server": .object(serverCopy ?? JSONObject()),
        ]
        if let code { object["code"] = Int64(code).flatMap { String($0) == code ? .int($0) : nil } ?? .string(code) }
        if serverDeleted { object["serverDeleted"] = true }
        return object
    }
}

/// How the app resolves a refused change (RhoConnect's actions).
public enum Resolution: String, Sendable, Hashable, CaseIterable {
    /// Create error: delete the object here (the server never had it).
    case delete
    /// Create error: push the create again, with the object as it is now.
    case recreate
    /// Update error: push the change again (over the server's copy). Delete error: push the
    /// delete again (an object made here again since: what it now is). For an object the
    /// server deleted, `retry` creates it again there.
    case retry
    /// Update error: take the server's copy (or, when the server deleted the object, delete it
    /// here); the local change is dropped. Delete error: the server's copy comes back here; the
    /// delete (and anything made here under the id since) is dropped.
    case rollback
}

/// Where a local change stands.
public enum ChangeFate: Sendable, Hashable {
    /// Not pushed yet.
    case pending(PendingChange.Kind)
    /// Pushed; its outcome is not known yet (or, for a create, its server id is awaited).
    case inFlight(PendingChange.Kind, awaitingLink: Bool)
    /// Refused by the server: see the refused change.
    case refused(RefusedChange)
}

extension Store {
    /// The stored refused changes of `model` (every syncing model when nil), by model, then id.
    public func refusedChanges(model name: String? = nil) throws -> [RefusedChange] {
        let names = name.map { [$0] } ?? models.map(\.name)
        return try read { snapshot in
            try names.compactMap(existingModel).flatMap { model in try snapshot.objectSyncStates(of: model).compactMap(\.records.refusal) }
        }
    }

    /// Where every local change of `model` stands, by object id: pending, in flight, or refused.
    /// (Accepted changes are gone: the server has them.)
    public func changeFates(model name: String) throws -> [String: ChangeFate] {
        guard let model = existingModel(name) else { return [:] }
        return try read { snapshot in
            var fates: [String: ChangeFate] = [:]
            for (id, records) in try snapshot.objectSyncStates(of: model) {
                if let error = records.refusal {
                    fates[id] = .refused(error)
                } else if let inFlight = records.inFlight {
                    fates[id] = .inFlight(inFlight.kind, awaitingLink: inFlight.state == .awaitingLink)
                } else if let pending = records.pending {
                    fates[id] = .pending(pending.kind)
                }
            }
            return fates
        }
    }

    /// Resolves the refused change of object `id` of `model`; the next sync acts on it.
    ///
    /// - Throws: ``SatchelError`` `.notFound` when there is no such error, `.invalidArgument`
    ///   when the action does not fit its kind (see ``RefusedChange/actions``).
    public func resolve(_ name: String, _ id: String, _ action: Resolution) throws {
        guard let model = existingModel(name) else { throw SatchelError(.notFound, "no model named '\(name)'", model: name) }
        try bulkUpdate { tx in
            let before = try tx.objectSyncState(model, id)
            guard let error = before.refusal else {
                throw SatchelError(.notFound, "model '\(name)' has no refused change for '\(id)'", model: name, objectID: id)
            }
            guard error.actions.contains(action) else {
                throw SatchelError(
                    .invalidArgument,
                    "\(error.kind == .update ? "an" : "a") \(error.kind.rawValue) error is resolved by "
                        + "\(error.actions.map(\.rawValue).joined(separator: " or ")), not \(action.rawValue)"
                        + (action == .rollback && error.kind != .create ? " (the server sent no copy to roll back to)" : ""),
                    model: name, objectID: id)
            }
            var records = before
            records.refusal = nil
            let pending = before.pending
            func change(_ kind: PendingChange.Kind, _ attributes: JSONObject = JSONObject(), base: JSONObject = JSONObject()) -> PendingChange {
                PendingChange(model: name, objectID: id, kind: kind, attributes: attributes, baseValues: base)
            }
            var write: JSONObject?? = .none  // .none: the object stays as it is
            // The server's object the refusal kept, as this store holds one (nil: none).
            let serversObject = error.serverCopy.flatMap { copy in
                let object = JSONObject(copy.filter { !$0.value.isNull && $0.key != Object.idAttribute }.map { ($0.key, $0.value) })
                return object.isEmpty ? nil : object
            }
            switch (error.kind, action) {
            case (.create, .delete):
                // The create is dropped. A server that refused it because it holds an object
                // under this id (Kinto's 412) sent that object: it takes the local one's place, as
                // a pull would have brought it (the pull's cursor has passed it).
                records.pending = nil
                write = .some(serversObject)
            case (.create, .recreate):
                // Unless the object was deleted here meanwhile: then nothing is left to create,
                // and the server's object under this id (its reason to refuse, when it sent one)
                // takes its place, as a delete of the refusal has it (a black-box probe: it never
                // arrived, the pull's cursor past it).
                if try tx.find(id, in: model) != nil {
                    records.pending = change(.create)
                } else {
                    records.pending = nil
                    if error.serverCopy != nil { write = .some(serversObject) }
                }
            case (.update, .retry) where error.serverDeleted:
                if try tx.find(id, in: model) != nil { records.pending = change(.create) }
            case (.update, .retry):
                // The refused attributes again, under any newer local change to them. Their base
                // is the server's copy the app retried over (kept current by the pulls since),
                // where the server sent one: a later conflict is then told true or not as ever.
                var attributes = error.attributes
                if pending?.kind == .update { for (name, value) in pending!.attributes { attributes[name] = value } }
                var base = JSONObject()
                if let copy = error.serverCopy { for (name, _) in attributes { base[name] = copy[name] ?? .null } }
                if pending?.kind != .delete { records.pending = change(.update, attributes, base: base) }
            case (.update, .rollback) where pending?.kind == .delete:
                // Deleted here since the refusal: the delete stands, pushed next, unless the
                // server deleted the object too (a black-box probe: the rollback brought the
                // object back and dropped the delete, which never reached the server).
                if error.serverDeleted { records.pending = nil }
            case (.update, .rollback):
                // A later edit of other attributes stays pending (the refused ones take the
                // server's values, whatever was written to them since).
                let refused = Set(error.attributes.keys)
                var later = JSONObject(), laterBase = JSONObject()
                if let pending, pending.kind == .update {
                    for (name, value) in pending.attributes where !refused.contains(name) {
                        later[name] = value
                        if let was = pending.baseValues[name] { laterBase[name] = was }
                    }
                }
                records.pending = later.isEmpty || error.serverDeleted ? nil : change(.update, later, base: laterBase)
                if error.serverDeleted {
                    write = .some(nil)
                } else if let server = error.serverCopy {
                    // The server's copy: the refused values go, device-only ones stay only if
                    // the server's copy lacks them, which it does; the later edit stays.
                    var attributes = try tx.find(id, in: model)?.attributes ?? JSONObject()
                    for name in refused where server[name] == nil { attributes[name] = nil }
                    for (name, value) in server where name != Object.idAttribute && later[name] == nil {
                        attributes[name] = value.isNull ? nil : value
                    }
                    write = .some(attributes)
                }
            case (.delete, .rollback):
                // The server kept the object (a black-box probe: Kinto's 403, which only `retry`
                // answered, for ever): its copy comes back, the delete goes.
                records.pending = nil
                write = .some(serversObject)
            case (.delete, .retry):
                if pending?.kind == .create, let now = try tx.find(id, in: model)?.attributes {
                    // Made again here since: the server still has the object the delete held,
                    // which takes the new attributes and loses those the new one lacks, as a
                    // delete followed by a create is pushed (a black-box probe: the delete went,
                    // the create was dropped, and the object stayed here alone).
                    var update = now
                    for name in error.attributes.keys where name != Object.idAttribute && update[name] == nil { update[name] = .null }
                    records.pending = change(.update, update)
                } else {
                    records.pending = change(.delete, error.attributes)
                }
            default:
                break
            }
            try tx.setObjectSyncState(model, id, records, replacing: before)
            if case .some(let attributes) = write {
                // The server's copy the refusal kept may not fit what a migration made of the
                // model since: written, the object could not be edited (nor pass `check`).
                do {
                    try tx.writeServerObject(model, id, attributes, checkingSchema: true)
                } catch let error as SatchelError where error.code == .schemaViolation {
                    throw SatchelError(
                        error.code,
                        "\(action.rawValue) would write the server's copy, which the model's schema refuses (\(error.message)): resolve otherwise, or migrate the model",
                        model: name, objectID: id)
                }
            }
        }
    }
}

// MARK: - Earlier names

@available(*, deprecated, renamed: "Resolution")
public typealias RecordErrorAction = Resolution

extension Store {
    @available(*, deprecated, renamed: "refusedChanges(model:)")
    public func recordErrors(model name: String? = nil) throws -> [RefusedChange] { try refusedChanges(model: name) }
}

extension SyncReport {
    @available(*, deprecated, renamed: "refused")
    public var rejected: Int { refused }
}
