public import Satchel

/// A local change the server refused, kept until the app resolves it.
public struct RecordError: Sendable, Hashable {
    public var model: String
    public var objectID: String
    /// What was refused: a create, an update or a delete.
    public var kind: PendingChange.Kind
    public var message: String
    /// The server's code, when it gave one.
    public var code: String?
    /// What was pushed.
    public var attributes: JSONObject
    /// The server's copy of the object, when it sent one (an update's rollback values, a
    /// conflict's current record).
    public var serverCopy: JSONObject?
    /// The server deleted the object while it had local changes.
    public var serverDeleted: Bool

    /// The actions that resolve this error. An update error can be rolled back only when the
    /// server sent its copy of the object (or deleted it).
    public var actions: [RecordErrorAction] {
        switch kind {
        case .create: [.delete, .recreate]
        case .update: serverCopy != nil || serverDeleted ? [.retry, .rollback] : [.retry]
        case .delete: [.retry]
        }
    }

    /// One line of JSON as `satchel errors` prints it: `{"kind","message","model","object","server"}`.
    public var json: JSONObject {
        var object: JSONObject = [
            "model": .string(model), "object": .string(objectID), "kind": .string(kind.rawValue), "message": .string(message),
            "server": .object(serverCopy ?? JSONObject()),
        ]
        if let code { object["code"] = .string(code) }
        if serverDeleted { object["serverDeleted"] = true }
        return object
    }
}

/// How the app resolves a record error (RhoConnect's actions).
public enum RecordErrorAction: String, Sendable, Hashable, CaseIterable {
    /// Create error: delete the object here (the server never had it).
    case delete
    /// Create error: push the create again, with the object as it is now.
    case recreate
    /// Update error: push the change again (over the server's copy). Delete error: push the
    /// delete again. For an object the server deleted, `retry` creates it again there.
    case retry
    /// Update error: take the server's copy (or, when the server deleted the object, delete it
    /// here); the local change is dropped.
    case rollback
}

/// Where a local change stands.
public enum ChangeFate: Sendable, Hashable {
    /// Not pushed yet.
    case pending(PendingChange.Kind)
    /// Pushed; its outcome is not known yet (or, for a create, its server id is awaited).
    case inFlight(PendingChange.Kind, awaitingLink: Bool)
    /// Refused by the server: see the record error.
    case rejected(RecordError)
}

extension Store {
    /// The stored record errors of `model` (every syncing model when nil), by model, then id.
    public func recordErrors(model name: String? = nil) throws -> [RecordError] {
        let names = name.map { [$0] } ?? models.map(\.name)
        var result: [RecordError] = []
        for name in names {
            guard let model = existingModel(name) else { continue }
            let records = try bulkUpdate { try $0.recordErrors(of: model) }
            result += records.map { id, record in Self.recordError(name, id, record) }
        }
        return result
    }

    static func recordError(_ model: String, _ id: String, _ record: RecordErrorRecord) -> RecordError {
        RecordError(
            model: model, objectID: id, kind: record.kind, message: record.message, code: record.code, attributes: record.attributes,
            serverCopy: record.server, serverDeleted: record.serverDeleted)
    }

    /// Where every local change of `model` stands, by object id: pending, in flight, or refused.
    /// (Accepted changes are gone: the server has them.)
    public func changeFates(model name: String) throws -> [String: ChangeFate] {
        guard let model = existingModel(name) else { return [:] }
        return try bulkUpdate { tx in
            var fates: [String: ChangeFate] = [:]
            for change in try tx.pendingChanges(of: model) { fates[change.objectID] = .pending(change.kind) }
            for (id, record) in try tx.inFlightChanges(of: model) {
                fates[id] = .inFlight(record.kind, awaitingLink: record.state == .awaitingLink)
            }
            for (id, record) in try tx.recordErrors(of: model) { fates[id] = .rejected(Self.recordError(name, id, record)) }
            return fates
        }
    }

    /// Resolves the record error of object `id` of `model`; the next sync acts on it.
    ///
    /// - Throws: ``SatchelError`` `.notFound` when there is no such error, `.invalidArgument`
    ///   when the action does not fit its kind (see ``RecordError/actions``).
    public func resolve(_ name: String, _ id: String, _ action: RecordErrorAction) throws {
        guard let model = existingModel(name) else { throw SatchelError(.notFound, "no model named '\(name)'", model: name) }
        try bulkUpdate { tx in
            guard let error = try tx.recordError(model, id) else {
                throw SatchelError(.notFound, "model '\(name)' has no record error for '\(id)'", model: name, objectID: id)
            }
            let record = Self.recordError(name, id, error)
            guard record.actions.contains(action) else {
                throw SatchelError(
                    .invalidArgument,
                    "\(error.kind == .update ? "an" : "a") \(error.kind.rawValue) error is resolved by "
                        + "\(record.actions.map(\.rawValue).joined(separator: " or ")), not \(action.rawValue)"
                        + (action == .rollback && error.kind == .update ? " (the server sent no copy to roll back to)" : ""),
                    model: name, objectID: id)
            }
            try tx.setRecordError(model, id, nil)
            let pending = try tx.pendingChange(model, id)
            switch (error.kind, action) {
            case (.create, .delete):
                try tx.setPendingChange(model, id, kind: nil)
                try tx.writeServerObject(model, id, nil)
            case (.create, .recreate):
                // Unless the object was deleted here meanwhile (then nothing is left to create).
                if try tx.find(id, in: model) != nil {
                    try tx.setPendingChange(model, id, kind: .create)
                } else {
                    try tx.setPendingChange(model, id, kind: nil)
                }
            case (.update, .retry) where error.serverDeleted:
                if try tx.find(id, in: model) != nil { try tx.setPendingChange(model, id, kind: .create) }
            case (.update, .retry):
                // The refused attributes again, under any newer local change to them.
                var attributes = error.attributes
                if pending?.kind == .update { for (name, value) in pending!.attributes { attributes[name] = value } }
                if pending?.kind != .delete { try tx.setPendingChange(model, id, kind: .update, attributes: attributes) }
            case (.update, .rollback):
                try tx.setPendingChange(model, id, kind: nil)
                if error.serverDeleted {
                    try tx.writeServerObject(model, id, nil)
                } else if let server = error.server {
                    // The server's copy, whole: the refused values go, device-only ones stay
                    // only if the server's copy lacks them, which it does.
                    var attributes = try tx.find(id, in: model)?.attributes ?? JSONObject()
                    for name in error.attributes.keys where server[name] == nil { attributes[name] = nil }
                    for (name, value) in server where name != Object.idAttribute { attributes[name] = value.isNull ? nil : value }
                    try tx.writeServerObject(model, id, attributes)
                }
            case (.delete, .retry):
                try tx.setPendingChange(model, id, kind: .delete, attributes: error.attributes)
            default:
                break
            }
        }
    }
}
