/// The records the sync engine keeps beside the data, and their stored forms. The core stores
/// them and keeps their statistics; what they mean for sync is the `SatchelSync` target's business.
/// All are `package`: apps see them through `SatchelSync`'s public API.

/// A change pushed to the server whose outcome is not known yet, stored under
/// `(out, model, objectId)` as `{"attrs":{…},"base":v?,"op":"update","state":"sent"}`.
package struct InFlightChange: Equatable, Sendable {
    package enum State: String, Sendable {
        /// Sent; its result has not arrived (or the push failed and it will be sent again).
        case awaitingResult = "sent"
        /// A create the server accepted whose server id will come later (RhoConnect's links).
        case awaitingLink
    }

    package var kind: PendingChange.Kind
    /// What was pushed: all attributes for a create, the changed ones (null = removed) for an
    /// update, the last ones for a delete.
    package var attributes: JSONObject
    package var state: State
    /// The object's server version the change was based on, for backends that check it.
    package var baseVersion: JSONValue?

    package init(kind: PendingChange.Kind, attributes: JSONObject, state: State = .awaitingResult, baseVersion: JSONValue? = nil) {
        self.kind = kind
        self.attributes = attributes
        self.state = state
        self.baseVersion = baseVersion
    }

    var json: JSONObject {
        var object: JSONObject = ["op": .string(kind.rawValue), "attrs": .object(attributes), "state": .string(state.rawValue)]
        if let baseVersion { object["base"] = baseVersion }
        return object
    }

    init(json: JSONObject) throws(SatchelError) {
        guard let kind = json["op"]?.stringValue.flatMap(PendingChange.Kind.init(rawValue:)),
            let attributes = json["attrs"]?.objectValue,
            let state = json["state"]?.stringValue.flatMap(State.init(rawValue:))
        else { throw SatchelError(.corruption, "undecodable in-flight change") }
        self.init(kind: kind, attributes: attributes, state: state, baseVersion: json["base"])
    }
}

/// A change the server rejected, stored under `(err, model, objectId)` as
/// `{"attrs":{…},"code":c?,"gone":true?,"kind":"update","message":"…","server":{…}?}`.
package struct RecordErrorRecord: Equatable, Sendable {
    package var kind: PendingChange.Kind
    package var message: String
    /// The server's own code for the failure, when it gave one (an HTTP status, an error name).
    package var code: String?
    /// What was pushed.
    package var attributes: JSONObject
    /// The server's copy of the object, when it sent one (an update's rollback, a conflict).
    package var server: JSONObject?
    /// The server deleted the object while it had local changes.
    package var serverDeleted: Bool

    package init(
        kind: PendingChange.Kind, message: String, code: String? = nil, attributes: JSONObject, server: JSONObject? = nil,
        serverDeleted: Bool = false
    ) {
        self.kind = kind
        self.message = message
        self.code = code
        self.attributes = attributes
        self.server = server
        self.serverDeleted = serverDeleted
    }

    var json: JSONObject {
        var object: JSONObject = ["kind": .string(kind.rawValue), "message": .string(message), "attrs": .object(attributes)]
        if let code { object["code"] = .string(code) }
        if let server { object["server"] = .object(server) }
        if serverDeleted { object["gone"] = true }
        return object
    }

    init(json: JSONObject) throws(SatchelError) {
        guard let kind = json["kind"]?.stringValue.flatMap(PendingChange.Kind.init(rawValue:)),
            let message = json["message"]?.stringValue, let attributes = json["attrs"]?.objectValue
        else { throw SatchelError(.corruption, "undecodable record error") }
        self.init(
            kind: kind, message: message, code: json["code"]?.stringValue, attributes: attributes,
            server: json["server"]?.objectValue, serverDeleted: json["gone"]?.boolValue ?? false)
    }
}

/// A model's sync state, stored under `(meta, "sync", model)` as
/// `{"cursor":…?,"full":true?,"initial":true?,"last":"2026-11-21T20:00:00Z"?,"metadata":…?}`.
package struct SyncStateRecord: Equatable, Sendable {
    /// Where the next pull starts: opaque to everyone but the adapter that made it.
    package var cursor: JSONValue?
    /// Whether the next pull must be a full one (the server's record of this client was lost).
    package var fullPullPending: Bool
    /// Whether a first complete pull of the model has finished.
    package var initialSyncComplete: Bool
    /// When the last complete cycle ended (ISO 8601).
    package var lastSync: String?
    /// What the server last said about the model (RhoConnect's source metadata).
    package var metadata: JSONValue?

    package init(
        cursor: JSONValue? = nil, fullPullPending: Bool = false, initialSyncComplete: Bool = false, lastSync: String? = nil,
        metadata: JSONValue? = nil
    ) {
        self.cursor = cursor
        self.fullPullPending = fullPullPending
        self.initialSyncComplete = initialSyncComplete
        self.lastSync = lastSync
        self.metadata = metadata
    }

    var json: JSONObject {
        var object = JSONObject()
        if let cursor { object["cursor"] = cursor }
        if fullPullPending { object["full"] = true }
        if initialSyncComplete { object["initial"] = true }
        if let lastSync { object["last"] = .string(lastSync) }
        if let metadata { object["metadata"] = metadata }
        return object
    }

    init(json: JSONObject) {
        self.init(
            cursor: json["cursor"], fullPullPending: json["full"]?.boolValue ?? false, initialSyncComplete: json["initial"]?.boolValue ?? false,
            lastSync: json["last"]?.stringValue, metadata: json["metadata"])
    }
}
