/// The records the sync engine keeps beside the data, and their stored forms (this file owns
/// their byte layouts). The core stores them and keeps their statistics; what they mean for sync
/// is `SatchelSync`'s business. They are public types (apps resolve a `RefusedChange`, and read
/// where their changes stand through the engine); the seam that reads and writes them is
/// `package` (docs/ARCHITECTURE.md draws it).

/// A change pushed to the server whose outcome is not known yet, stored under
/// `(out, model, objectId)` as `{"attrs":{…},"base":v?,"op":"update","sent":{…}?,"state":"sent","was":{…}?}`
/// (the state `sent`, `awaitingLink` or `awaitingPull`; `sent` and `was` as a pending change's).
public struct InFlightChange: Equatable, Sendable {
    public enum State: String, Sendable {
        /// Sent; its result has not arrived (or the push failed and it will be sent again).
        case awaitingResult = "sent"
        /// A create the server accepted whose server id will come later (RhoConnect's links);
        /// a delete it accepted, until the model's next complete pull (whose pages, one made
        /// before the delete and sent again, must not bring the object back).
        case awaitingLink
        /// Sent to a server whose results come in pull pages (RhoConnect), and no answer came:
        /// the server may have carried it out. It waits for the model's next complete pull: a
        /// create linked there is done; anything else it did not confirm goes back among the
        /// pending changes, to be sent again.
        case awaitingPull
    }

    public var kind: PendingChange.Kind
    /// What was pushed: all attributes for a create, the changed ones (null = removed) for an
    /// update, the last ones for a delete.
    public var attributes: JSONObject
    public var state: State
    /// The object's server version the change was based on, for backends that check it.
    public var baseVersion: JSONValue?
    /// For an update: the values its attributes had before they were changed here, where known
    /// (``PendingChange/baseValues``).
    public var baseValues: JSONObject
    /// What an earlier push, whose answer was lost, sent for attributes edited since
    /// (``PendingChange/sentValues``).
    public var sentValues: JSONObject

    public init(
        kind: PendingChange.Kind, attributes: JSONObject, state: State = .awaitingResult, baseVersion: JSONValue? = nil,
        baseValues: JSONObject = JSONObject(), sentValues: JSONObject = JSONObject()
    ) {
        self.kind = kind
        self.attributes = attributes
        self.state = state
        self.baseVersion = baseVersion
        self.baseValues = kind == .update ? baseValues : JSONObject()
        self.sentValues = sentValues
    }

    var json: JSONObject {
        // Members in name order, as the stored form has them.
        var members = [JSONObject.Member(name: "attrs", value: .object(attributes))]
        members.reserveCapacity(5)
        if let baseVersion { members.append(JSONObject.Member(name: "base", value: baseVersion)) }
        members.append(JSONObject.Member(name: "op", value: .string(kind.rawValue)))
        if !sentValues.isEmpty { members.append(JSONObject.Member(name: "sent", value: .object(sentValues))) }
        members.append(JSONObject.Member(name: "state", value: .string(state.rawValue)))
        if !baseValues.isEmpty { members.append(JSONObject.Member(name: "was", value: .object(baseValues))) }
        return JSONObject(sortedUniqueMembers: members)
    }

    init(json: JSONObject) throws(SatchelError) {
        guard let kind = json["op"]?.stringValue.flatMap(PendingChange.Kind.init(rawValue:)),
            let attributes = json["attrs"]?.objectValue,
            let state = json["state"]?.stringValue.flatMap(State.init(rawValue:))
        else { throw SatchelError(.corruption, "undecodable in-flight change") }
        self.init(
            kind: kind, attributes: attributes, state: state, baseVersion: json["base"], baseValues: json["was"]?.objectValue ?? JSONObject(),
            sentValues: json["sent"]?.objectValue ?? JSONObject())
    }

    /// The stored form `bytes`, decoded.
    init(decoding bytes: UnsafeRawBufferPointer) throws(SatchelError) {
        do { try self.init(json: try JSONObject(parsingRecord: bytes)) } catch {
            throw SatchelError(.corruption, "undecodable in-flight change")
        }
    }
}

/// A local change the server refused, kept until the app resolves it: what an adapter reports,
/// what the store keeps beside the object, and what the app reads (`store.refusedChanges()` and
/// `store.resolve(_:_:_:)` of `SatchelSync`).
///
/// Stored under `(err, model, objectId)` as
/// `{"attrs":{…},"code":c?,"gone":true?,"kind":"update","message":"…","server":{…}?}`.
public struct RefusedChange: Sendable, Hashable {
    public var model: String
    public var objectID: String
    /// What was refused: a create, an update or a delete.
    public var kind: PendingChange.Kind
    public var message: String
    /// The server's own code for the failure, when it gave one (an HTTP status, an error name).
    public var code: String?
    /// What was pushed. An adapter that reports an error without echoing the change leaves it
    /// empty: the engine fills in what it sent.
    public var attributes: JSONObject
    /// The server's copy of the object, when it sent one (an update's rollback values, a
    /// conflict's current record).
    public var serverCopy: JSONObject?
    /// The server deleted the object while it had local changes.
    public var serverDeleted: Bool

    public init(
        model: String, objectID: String, kind: PendingChange.Kind, message: String, code: String? = nil, attributes: JSONObject = JSONObject(),
        serverCopy: JSONObject? = nil, serverDeleted: Bool = false
    ) {
        self.model = model
        self.objectID = objectID
        self.kind = kind
        self.message = message
        self.code = code
        self.attributes = attributes
        self.serverCopy = serverCopy
        self.serverDeleted = serverDeleted
    }

    /// The stored form (the key holds the model and the id).
    var stored: JSONObject {
        var object: JSONObject = ["kind": .string(kind.rawValue), "message": .string(message), "attrs": .object(attributes)]
        if let code { object["code"] = .string(code) }
        if let serverCopy { object["server"] = .object(serverCopy) }
        if serverDeleted { object["gone"] = true }
        return object
    }

    init(model: String, objectID: String, stored json: JSONObject) throws(SatchelError) {
        guard let kind = json["kind"]?.stringValue.flatMap(PendingChange.Kind.init(rawValue:)),
            let message = json["message"]?.stringValue, let attributes = json["attrs"]?.objectValue
        else { throw SatchelError(.corruption, "undecodable refused change", model: model, objectID: objectID) }
        self.init(
            model: model, objectID: objectID, kind: kind, message: message, code: json["code"]?.stringValue, attributes: attributes,
            serverCopy: json["server"]?.objectValue, serverDeleted: json["gone"]?.boolValue ?? false)
    }
}

/// A model's sync state, stored under `(meta, "sync", model)` as
/// `{"blobs":true?,"cursor":…?,"full":true?,"initial":true?,"last":"2026-11-21T20:00:00Z"?,"metadata":…?}`.
public struct ModelSyncState: Equatable, Sendable {
    /// Where the next pull starts: opaque to everyone but the adapter that made it.
    public var cursor: JSONValue?
    /// Whether the next pull must be a full one (the server's record of this client was lost).
    public var fullPullPending: Bool
    /// Whether a first complete pull of the model has finished.
    public var initialSyncComplete: Bool
    /// When the last complete cycle ended (ISO 8601).
    public var lastSync: String?
    /// What the server last said about the model (RhoConnect's source metadata).
    public var metadata: JSONValue?
    /// How the app configured the model's sync (the engine's JSON form of it); kept when the
    /// model's synced data is wiped.
    public var configuration: JSONObject?
    /// Whether the first sync left blobs as their URLs (the app asked it to skip them), for a
    /// later sync to download.
    public var blobsDeferred = false

    public init(
        cursor: JSONValue? = nil, fullPullPending: Bool = false, initialSyncComplete: Bool = false, lastSync: String? = nil,
        metadata: JSONValue? = nil, configuration: JSONObject? = nil
    ) {
        self.cursor = cursor
        self.fullPullPending = fullPullPending
        self.initialSyncComplete = initialSyncComplete
        self.lastSync = lastSync
        self.metadata = metadata
        self.configuration = configuration
    }

    var json: JSONObject {
        var object = JSONObject()
        if blobsDeferred { object["blobs"] = true }
        if let cursor { object["cursor"] = cursor }
        if fullPullPending { object["full"] = true }
        if initialSyncComplete { object["initial"] = true }
        if let lastSync { object["last"] = .string(lastSync) }
        if let metadata { object["metadata"] = metadata }
        if let configuration { object["configuration"] = .object(configuration) }
        return object
    }

    init(json: JSONObject) {
        self.init(
            cursor: json["cursor"], fullPullPending: json["full"]?.boolValue ?? false, initialSyncComplete: json["initial"]?.boolValue ?? false,
            lastSync: json["last"]?.stringValue, metadata: json["metadata"], configuration: json["configuration"]?.objectValue)
        blobsDeferred = json["blobs"]?.boolValue ?? false
    }
}

/// An unfinished rewrite, stored under `(meta, "rewrite", model, stamp)` as
/// `{"renames":{"old id":"new id",…}}`: the renames of objects of `model` whose references in
/// another partition are still to be rewritten.
enum RewriteRecord {
    static func encode(_ renames: [String: String]) -> [UInt8] {
        let record: JSONObject = ["renames": .object(JSONObject(renames.map { ($0.key, JSONValue.string($0.value)) }))]
        return record.jsonBytes
    }

    /// The renames a record holds; nil when it does not decode.
    static func renames(_ bytes: UnsafeRawBufferPointer) -> [String: String]? {
        guard let renames = (try? JSONObject(parsing: bytes))?["renames"]?.objectValue else { return nil }
        var result: [String: String] = [:]
        for (old, new) in renames {
            guard let new = new.stringValue else { return nil }
            result[old] = new
        }
        return result
    }
}

/// The name ``RefusedChange`` had: it is not an `Error`, and "refused" is the one word for a
/// change the server did not take.
@available(*, deprecated, renamed: "RefusedChange")
public typealias RecordError = RefusedChange
