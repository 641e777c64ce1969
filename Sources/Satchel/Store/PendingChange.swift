/// A local change not yet acknowledged by the server: one per object, coalesced.
///
/// Every local create, update and delete of a model that syncs records its change in the same
/// write batch as the data, merged with the change already pending for that object:
///
/// | pending | then | becomes |
/// | --- | --- | --- |
/// | create | update | create (the object's current attributes are pushed) |
/// | create | delete | nothing: the server never hears of the object |
/// | update | update | update with the attributes merged, the later value winning |
/// | update | delete | delete |
/// | delete | create (same id) | update setting the new attributes and removing the old ones (those the server has) |
///
/// `PendingChange` is a `Sendable` value type.
public struct PendingChange: Sendable, Hashable, CustomStringConvertible {
    /// What the server will be asked to do.
    public enum Kind: String, Sendable, CaseIterable, Hashable {
        case create, update, delete
    }

    /// The model of the changed object.
    public let model: String
    /// The id of the changed object.
    public let objectID: String
    /// Create, update or delete.
    public let kind: Kind
    /// For an update: the changed attributes, with `null` for removed ones. For a delete: the
    /// object's last attributes (RhoConnect sends them along), with the changes of an update
    /// pending before it undone by their base values: the object as the server has it, as far
    /// as known. For a create: empty; the
    /// object's current attributes are pushed.
    public let attributes: JSONObject
    /// For an update: the values its attributes had before this device changed them — the
    /// server's, as last applied here (null: the attribute was absent). Empty where the store
    /// does not know them (a change recorded before the store kept them). For a delete followed
    /// by a create: the delete's attributes. The sync engine tells a true conflict (the same attribute changed on the
    /// server) from changes to different attributes by them.
    public let baseValues: JSONObject
    /// For a change sent again after a push whose answer was lost (or that failed): the values
    /// that push sent (an update edited here since: for the attributes edited since; a delete
    /// made after it: what it sent). For a
    /// create sent again, edited or not: the whole object the lost push sent (it may have made
    /// the object on the server). The server may hold them (the lost push may have gone
    /// through): a server value equal to one is this device's own, not a change made elsewhere.
    /// Empty otherwise.
    public let sentValues: JSONObject

    public init(
        model: String, objectID: String, kind: Kind, attributes: JSONObject, baseValues: JSONObject = JSONObject(),
        sentValues: JSONObject = JSONObject()
    ) {
        self.model = model
        self.objectID = objectID
        self.kind = kind
        self.attributes = attributes
        self.baseValues = kind == .update ? baseValues : JSONObject()
        self.sentValues = sentValues
    }

    public var description: String { "\(kind.rawValue) \(model)/\(objectID) \(attributes)" }
}

/// The stored form of a pending change (the value under `(chg, model, objectId)`) and the
/// coalescing rules. The value is compact JSON: `{"op":"create"}`,
/// `{"op":"update","attrs":{…},"sent":{…},"was":{…}}` (`was`: the base values, when known;
/// `sent`: what a push whose answer was lost sent, when the change was edited since) or
/// `{"op":"delete","attrs":{…},"sent":{…}}` (`sent` as for an update, when the delete followed
/// such a push; a create edited after such a push has it too: `{"op":"create","sent":{…}}`).
struct StoredChange: Equatable {
    var kind: PendingChange.Kind
    var attributes: JSONObject
    /// An update's base values (``PendingChange/baseValues``).
    var base: JSONObject
    /// An update's or a delete's values sent by a push whose answer was lost
    /// (``PendingChange/sentValues``).
    var sent: JSONObject

    var encoded: [UInt8] {
        // Members in name order: `attrs`, `op`, `sent`, `was`.
        var members: [JSONObject.Member] = []
        members.reserveCapacity(4)
        if kind != .create { members.append(JSONObject.Member(name: "attrs", value: .object(attributes))) }
        members.append(JSONObject.Member(name: "op", value: .string(kind.rawValue)))
        if !sent.isEmpty { members.append(JSONObject.Member(name: "sent", value: .object(sent))) }
        if kind == .update && !base.isEmpty { members.append(JSONObject.Member(name: "was", value: .object(base))) }
        return JSONObject(sortedUniqueMembers: members).jsonBytes
    }

    init(kind: PendingChange.Kind, attributes: JSONObject, base: JSONObject = JSONObject(), sent: JSONObject = JSONObject()) {
        self.kind = kind
        self.attributes = attributes
        self.base = kind == .update ? base : JSONObject()
        self.sent = sent
    }

    /// The stored form of `change` (a create keeps no attributes).
    init(_ change: PendingChange) {
        self.init(
            kind: change.kind, attributes: change.kind == .create ? JSONObject() : change.attributes, base: change.baseValues,
            sent: change.sentValues)
    }

    /// The change as the API gives it.
    func pendingChange(model: String, objectID: String) -> PendingChange {
        PendingChange(model: model, objectID: objectID, kind: kind, attributes: attributes, baseValues: base, sentValues: sent)
    }

    /// A pending create's whole stored form (it keeps no attributes): the most common record,
    /// recognised without parsing.
    private static let createForm = Array(#"{"op":"create"}"#.utf8)

    init(decoding bytes: UnsafeRawBufferPointer) throws(SatchelError) {
        if bytes.elementsEqual(Self.createForm) {
            self.init(kind: .create, attributes: JSONObject())
            return
        }
        let object: JSONObject
        do {
            object = try JSONObject(parsingRecord: bytes)
        } catch {
            throw SatchelError(.corruption, "undecodable pending change: \(error)")
        }
        try self.init(json: object)
    }

    init(json object: JSONObject) throws(SatchelError) {
        guard let op = object["op"]?.stringValue, let kind = PendingChange.Kind(rawValue: op) else {
            throw SatchelError(.corruption, "pending change without a valid op")
        }
        self.kind = kind
        self.attributes = object["attrs"]?.objectValue ?? JSONObject()
        self.base = kind == .update ? object["was"]?.objectValue ?? JSONObject() : JSONObject()
        self.sent = object["sent"]?.objectValue ?? JSONObject()
    }

    /// Merges the change already pending for an object (`existing`) with a new one.
    ///
    /// `incoming` for a create carries the new object's attributes (needed when it follows a
    /// delete); they are dropped from the stored create. Returns nil when nothing remains to push.
    static func coalesce(_ existing: StoredChange?, _ incoming: StoredChange) -> StoredChange? {
        guard let existing else {
            return incoming.kind == .create ? StoredChange(kind: .create, attributes: JSONObject()) : incoming
        }
        switch (existing.kind, incoming.kind) {
        case (.create, .delete):
            return nil
        case (.create, _):
            return existing
        case (.update, .delete):
            // What a lost push sent stays possible on the server: the delete tells it from
            // changes made elsewhere. Its attributes are the object as the server has it, as
            // far as the update's base values tell: an attribute the update removed is there, one
            // it added is not, so that a create following it removes what the server holds (a
            // black-box probe: the server kept them, and the next pull brought them back).
            var attributes = incoming.attributes
            for (name, _) in existing.attributes {
                guard let was = existing.base[name] else { continue }
                attributes[name] = was.isNull ? nil : was
            }
            return StoredChange(kind: .delete, attributes: attributes, sent: existing.sent)
        case (.update, _):
            var merged = existing.attributes
            var base = existing.base
            for (name, value) in incoming.attributes {
                // An attribute changed here before keeps the base it had then; an unknown base
                // stays unknown (the incoming one is a local value, not the server's).
                if !merged.contains(name), let was = incoming.base[name] { base[name] = was }
                merged[name] = value
            }
            // What a lost push sent stays possible on the server, whatever is edited after it.
            return StoredChange(kind: .update, attributes: merged, base: base, sent: existing.sent)
        case (.delete, .create), (.delete, .update):
            // The server still has the object as it was: set the new attributes and remove the
            // ones the new object lacks. The server's values (the delete's attributes) are the
            // update's base.
            var update = incoming.attributes
            for (name, _) in existing.attributes where !update.contains(name) { update[name] = .null }
            var base = JSONObject()
            for (name, _) in update { base[name] = existing.attributes[name] ?? .null }
            return StoredChange(kind: .update, attributes: update, base: base)
        case (.delete, .delete):
            return existing
        }
    }
}
