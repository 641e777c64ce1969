import Satchel
import Testing

@testable import SatchelSync

/// The merge rules of `docs/SYNC.md`, one row per case: what the server sends, what the device
/// holds, and what must come of it. Pure: no store, no server.
@Suite("Merge policy")
struct MergePolicyTests {
    enum ServerChange: Sendable {
        case upsert(ServerObject)
        case delete
        case remove([String])
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var rule: MergePolicy.Rule
        var situation: String
        var server: ServerChange
        var attributes: JSONObject?
        var records = ObjectSyncState()
        var configuration = ModelSyncConfiguration()
        var write: MergePolicy.Write
        /// What the records must be afterwards (nil: as they were).
        var after: ObjectSyncState?

        var testDescription: String { "\(rule.rawValue): \(situation)" }
    }

    static let local: JSONObject = ["name": "a", "price": 1]
    static func pending(_ kind: PendingChange.Kind, _ attributes: JSONObject = [:]) -> ObjectSyncState {
        ObjectSyncState(pending: PendingChange(model: "Product", objectID: "p1", kind: kind, attributes: attributes), version: "v1")
    }
    static func inFlight(_ kind: PendingChange.Kind, _ attributes: JSONObject = [:], state: InFlightChange.State = .awaitingResult) -> ObjectSyncState
    {
        ObjectSyncState(inFlight: InFlightChange(kind: kind, attributes: attributes, state: state), version: "v1")
    }
    static func refused(_ kind: PendingChange.Kind, _ attributes: JSONObject = [:], serverCopy: JSONObject? = nil) -> ObjectSyncState {
        ObjectSyncState(
            refusal: RefusedChange(model: "Product", objectID: "p1", kind: kind, message: "no", attributes: attributes, serverCopy: serverCopy),
            version: "v1")
    }
    static func whole(_ attributes: JSONObject) -> ServerChange { .upsert(ServerObject(id: "p1", attributes: attributes, version: "v2")) }

    static let rows: [Row] = [
        // A pulled object
        Row(
            rule: .taken, situation: "a whole object replaces one with no local change", server: whole(["name": "b"]),
            attributes: local, records: ObjectSyncState(version: "v1"), write: .replace(["name": "b"]), after: ObjectSyncState(version: "v2")),
        Row(
            rule: .taken, situation: "a new object", server: whole(["name": "b"]),
            attributes: nil, write: .replace(["name": "b"]), after: ObjectSyncState(version: "v2")),
        Row(
            rule: .taken, situation: "device-only attributes stay", server: whole(["name": "b", "draft": "server"]),
            attributes: ["name": "a", "draft": "mine"], configuration: ModelSyncConfiguration(deviceOnlyAttributes: ["draft"]),
            write: .replace(["name": "b", "draft": "mine"]), after: ObjectSyncState(version: "v2")),
        Row(
            rule: .taken, situation: "a partial object adds and overwrites; its nulls remove",
            server: .upsert(ServerObject(id: "p1", attributes: ["name": "b", "price": .null, "size": 3], isWhole: false)),
            attributes: local, write: .replace(["name": "b", "size": 3])),
        Row(
            rule: .localChangesWin, situation: "a pending update keeps its attributes", server: whole(["name": "b", "price": 2]),
            attributes: ["name": "a", "price": 5], records: pending(.update, ["price": 5]),
            write: .replace(["name": "b", "price": 5]), after: ObjectSyncState(pending: pending(.update, ["price": 5]).pending, version: "v2")),
        Row(
            rule: .localChangesWin, situation: "an update in flight keeps its attributes", server: whole(["name": "b", "price": 2]),
            attributes: ["name": "a", "price": 5], records: inFlight(.update, ["price": 5]),
            write: .replace(["name": "b", "price": 5]), after: ObjectSyncState(inFlight: inFlight(.update, ["price": 5]).inFlight, version: "v2")),
        Row(
            rule: .localChangesWin, situation: "a refused update keeps its attributes; its server copy follows the server",
            server: whole(["name": "b", "price": 2]), attributes: ["name": "a", "price": 5],
            records: refused(.update, ["price": 5], serverCopy: ["name": "a", "price": 1]), write: .replace(["name": "b", "price": 5]),
            after: ObjectSyncState(refusal: refused(.update, ["price": 5], serverCopy: ["name": "b", "price": 2]).refusal, version: "v2")),
        Row(
            rule: .createdHere, situation: "a pending create is not overwritten", server: whole(["name": "b"]),
            attributes: local, records: pending(.create), write: .keep),
        Row(
            rule: .createdHere, situation: "a refused create is not overwritten", server: whole(["name": "b"]),
            attributes: local, records: refused(.create, local), write: .keep),
        Row(
            rule: .deletedHere, situation: "a pending delete is not undone; the version follows", server: whole(["name": "b"]),
            attributes: nil, records: pending(.delete), write: .keep, after: ObjectSyncState(pending: pending(.delete).pending, version: "v2")),
        // A server delete
        Row(
            rule: .deleted, situation: "no local change", server: .delete,
            attributes: local, records: ObjectSyncState(version: "v1"), write: .delete, after: ObjectSyncState()),
        Row(
            rule: .deletedHereToo, situation: "a pending delete is done", server: .delete,
            attributes: nil, records: pending(.delete), write: .keep, after: ObjectSyncState()),
        Row(
            rule: .deletedHereToo, situation: "a delete in flight is done", server: .delete,
            attributes: nil, records: inFlight(.delete), write: .keep, after: ObjectSyncState()),
        Row(
            rule: .refusedDeleteDone, situation: "what a refused delete asked for happened", server: .delete,
            attributes: local, records: refused(.delete), write: .delete, after: ObjectSyncState()),
        Row(
            rule: .refusedCreateKept, situation: "the server never had it", server: .delete,
            attributes: local, records: refused(.create, local), write: .keep),
        Row(
            rule: .neverPushed, situation: "a pending create is not the server's object", server: .delete,
            attributes: local, records: pending(.create), write: .keep),
        Row(
            rule: .createNotKept, situation: "a create awaiting its link", server: .delete,
            attributes: local, records: inFlight(.create, local, state: .awaitingLink), write: .delete, after: ObjectSyncState()),
        Row(
            rule: .deletedWhileChanged, situation: "a pending update becomes a refused change", server: .delete,
            attributes: local, records: pending(.update, ["price": 1]), write: .keep,
            after: ObjectSyncState(
                pending: pending(.update, ["price": 1]).pending,
                refusal: RefusedChange(
                    model: "Product", objectID: "p1", kind: .update, message: "deleted on the server while changed here", code: "deleted",
                    attributes: ["price": 1], serverDeleted: true), version: "v1")),
        Row(
            rule: .refusedUpdateMeetsDelete, situation: "the error says the server deleted it", server: .delete,
            attributes: local, records: refused(.update, ["price": 1], serverCopy: ["name": "a"]), write: .keep,
            after: ObjectSyncState(
                refusal: {
                    var error = refused(.update, ["price": 1]).refusal!
                    error.serverDeleted = true
                    return error
                }())),
        // Attributes removed on the server
        Row(
            rule: .removed, situation: "listed attributes go", server: .remove(["price"]),
            attributes: local, write: .replace(["name": "a"])),
        Row(
            rule: .removed, situation: "but those changed here", server: .remove(["price"]),
            attributes: local, records: pending(.update, ["price": 1]), write: .replace(local)),
        Row(
            rule: .deleted, situation: "every attribute removed is the object deleted", server: .remove(["name", "price"]),
            attributes: local, records: ObjectSyncState(version: "v1"), write: .delete, after: ObjectSyncState()),
        Row(rule: .absent, situation: "no object here", server: .remove(["price"]), attributes: nil, write: .keep),
        // Found by a black-box probe: a refused delete kept its error after the server deleted the object.
        Row(
            rule: .refusedDeleteDone, situation: "every attribute a refused delete held removed: the error goes", server: .remove(["name", "price"]),
            attributes: nil, records: refused(.delete, local), write: .delete, after: ObjectSyncState()),
        // Found by a black-box probe: the object made again here kept the refusal, and its create could never go.
        Row(
            rule: .neverPushed,
            situation: "every attribute a refused delete held removed, the object made again here: the create stays, the error goes",
            server: .remove(["name", "price"]), attributes: ["name": "back", "size": 2],
            records: ObjectSyncState(
                pending: PendingChange(model: "Product", objectID: "p1", kind: .create, attributes: [:]),
                refusal: RefusedChange(model: "Product", objectID: "p1", kind: .delete, message: "no", attributes: local), version: "v1"),
            write: .keep,
            after: ObjectSyncState(pending: PendingChange(model: "Product", objectID: "p1", kind: .create, attributes: [:]), version: "v1")),
        Row(
            rule: .deletedHereToo, situation: "every attribute a pending delete held removed: it is done", server: .remove(["name", "price"]),
            attributes: nil, records: pending(.delete, local), write: .keep, after: ObjectSyncState()),
        Row(
            rule: .deletedHere, situation: "some attributes of an object deleted here removed: it stays deleted", server: .remove(["price"]),
            attributes: nil, records: pending(.delete, local), write: .keep),
        // Found by a black-box probe: the object was cut down to what was added here, and pushed back as a fragment.
        Row(
            rule: .deletedWhileChanged, situation: "every attribute the server had removed, with one added here: a delete",
            server: .remove(["name", "price"]),
            attributes: ["name": "a", "price": 1, "extra": "x"],
            records: ObjectSyncState(
                pending: PendingChange(model: "Product", objectID: "p1", kind: .update, attributes: ["extra": "x"], baseValues: ["extra": .null]),
                version: "v1"),
            write: .keep,
            after: ObjectSyncState(
                pending: PendingChange(model: "Product", objectID: "p1", kind: .update, attributes: ["extra": "x"], baseValues: ["extra": .null]),
                refusal: RefusedChange(
                    model: "Product", objectID: "p1", kind: .update, message: "deleted on the server while changed here", code: "deleted",
                    attributes: ["extra": "x"], serverDeleted: true), version: "v1")),
        Row(
            rule: .refusedUpdateMeetsDelete, situation: "every attribute of the server's copy removed, with one a refused update added",
            server: .remove(["name", "price"]), attributes: ["name": "a", "price": 1, "extra": "x"],
            records: refused(.update, ["extra": "x"], serverCopy: ["name": "a", "price": 1]), write: .keep,
            after: ObjectSyncState(
                refusal: {
                    var error = refused(.update, ["extra": "x"]).refusal!
                    error.serverDeleted = true
                    return error
                }())),
    ]

    @Test("the rule and its outcome", arguments: rows)
    func rule(_ row: Row) {
        let local = MergePolicy.Local(model: "Product", id: "p1", attributes: row.attributes, records: row.records)
        let outcome =
            switch row.server {
            case .upsert(let object): MergePolicy.upsert(object, local: local, configuration: row.configuration)
            case .delete: MergePolicy.delete(local: local)
            case .remove(let names): MergePolicy.remove(names, local: local, configuration: row.configuration)
            }
        #expect(outcome.rule == row.rule)
        #expect(outcome.write == row.write)
        #expect(outcome.records == (row.after ?? row.records))
    }

    @Test("every rule has a row")
    func everyRuleHasARow() {
        let covered = Set(Self.rows.map(\.rule.rawValue))
        #expect(MergePolicy.Rule.allCases.filter { !covered.contains($0.rawValue) } == [])
    }
    // MARK: - Conflicts: an update the server refused because its object changed meanwhile

    struct ConflictRow: Sendable, CustomTestStringConvertible {
        var rule: MergePolicy.ConflictRule
        var situation: String
        /// The server's object (version v2).
        var server: JSONObject
        /// The object here, and its change in flight (base values `base`), and a later edit.
        var attributes: JSONObject
        var change: JSONObject
        var base: JSONObject
        var later: PendingChange? = nil
        var answer: SyncConflict.Answer? = nil
        var configuration = ModelSyncConfiguration()
        var write: MergePolicy.Write
        /// The change pending afterwards (nil: none), its base values the server's.
        var pending: JSONObject?
        var conflicting: [String] = []

        var testDescription: String { "\(rule.rawValue): \(situation)" }
    }

    static let conflictRows: [ConflictRow] = [
        ConflictRow(
            rule: .merged, situation: "the server changed another attribute: both kept, the local change sent again",
            server: ["name": "Server", "price": 1], attributes: ["name": "a", "price": 5], change: ["price": 5], base: ["price": 1],
            write: .replace(["name": "Server", "price": 5]), pending: ["price": 5]),
        ConflictRow(
            rule: .merged, situation: "both sides made the same change", server: ["name": "a", "price": 5], attributes: ["name": "a", "price": 5],
            change: ["price": 5], base: ["price": 1], write: .replace(["name": "a", "price": 5]), pending: ["price": 5]),
        ConflictRow(
            rule: .merged, situation: "a removal here, a change of another attribute there",
            server: ["name": "Server", "brand": "Acme"], attributes: ["name": "a"], change: ["brand": .null], base: ["brand": "Acme"],
            write: .replace(["name": "Server"]), pending: ["brand": .null]),
        ConflictRow(
            rule: .merged, situation: "a later edit goes with the change; device-only attributes stay",
            server: ["name": "Server", "price": 1], attributes: ["name": "a", "price": 5, "size": 3, "draft": "x"], change: ["price": 5],
            base: ["price": 1],
            later: PendingChange(model: "Product", objectID: "p1", kind: .update, attributes: ["size": 3], baseValues: ["size": .null]),
            configuration: ModelSyncConfiguration(deviceOnlyAttributes: ["draft"]),
            write: .replace(["name": "Server", "price": 5, "size": 3, "draft": "x"]), pending: ["price": 5, "size": 3]),
        ConflictRow(
            rule: .refused, situation: "the same attribute changed on both sides, no resolver: a refused change with the server's copy",
            server: ["name": "a", "price": 7], attributes: ["name": "a", "price": 5], change: ["price": 5], base: ["price": 1],
            write: .keep, pending: nil),
        ConflictRow(
            rule: .refused, situation: "an unknown base counts as changed there", server: ["name": "a", "price": 1],
            attributes: ["name": "a", "price": 5], change: ["price": 5], base: [:], write: .keep, pending: nil),
        ConflictRow(
            rule: .keptLocal, situation: "the resolver keeps the local change: sent again, the server's other changes taken",
            server: ["name": "Server", "price": 7], attributes: ["name": "a", "price": 5], change: ["price": 5], base: ["price": 1],
            answer: .keepLocal, write: .replace(["name": "Server", "price": 5]), pending: ["price": 5], conflicting: ["price"]),
        ConflictRow(
            rule: .tookServer, situation: "the resolver takes the server's object: the local change goes",
            server: ["name": "Server", "price": 7], attributes: ["name": "a", "price": 5, "draft": "x"], change: ["price": 5], base: ["price": 1],
            answer: .takeServer, configuration: ModelSyncConfiguration(deviceOnlyAttributes: ["draft"]),
            write: .replace(["name": "Server", "price": 7, "draft": "x"]), pending: nil, conflicting: ["price"]),
        ConflictRow(
            rule: .tookServer,
            situation: "the resolver takes the server's values where both changed; another attribute's change stays, sent (a probe: dropped)",
            server: ["name": "Server", "price": 7], attributes: ["name": "a", "price": 5, "size": 3], change: ["price": 5, "size": 3],
            base: ["price": 1, "size": .null], answer: .takeServer, write: .replace(["name": "Server", "price": 7, "size": 3]), pending: ["size": 3],
            conflicting: ["price"]),
        ConflictRow(
            rule: .resolvedByMerge, situation: "the resolver's attributes become the object; what differs from the server's is sent",
            server: ["name": "Server", "price": 7, "brand": "Acme"], attributes: ["name": "a", "price": 5], change: ["price": 5, "name": "a"],
            base: ["price": 1, "name": "a0"], answer: .merge(["name": "Server", "price": 6]),
            write: .replace(["name": "Server", "price": 6]), pending: ["price": 6, "brand": .null], conflicting: ["name", "price"]),
    ]

    @Test("a conflict's rule and its outcome", arguments: conflictRows)
    func conflict(_ row: ConflictRow) {
        let records = ObjectSyncState(
            pending: row.later, inFlight: InFlightChange(kind: .update, attributes: row.change, baseVersion: "v1", baseValues: row.base),
            version: "v1")
        let local = MergePolicy.Local(model: "Product", id: "p1", attributes: row.attributes, records: records)
        var resolver: ConflictResolver?
        if let answer = row.answer { resolver = { _ in answer } }
        let outcome = MergePolicy.conflict(
            server: row.server, serverVersion: "v2", message: "modified meanwhile", code: "412", local: local, configuration: row.configuration,
            resolver: resolver)
        #expect(outcome.rule == row.rule)
        #expect(outcome.write == row.write)
        #expect(outcome.records.inFlight == nil)
        #expect(outcome.records.pending?.attributes == row.pending)
        #expect(outcome.resend == (row.pending != nil))
        #expect((outcome.conflict?.conflicting ?? []) == row.conflicting)
        if let pending = outcome.records.pending {
            // Sent again over the server's version, whose values are now the change's base.
            #expect(outcome.records.version == "v2")
            #expect(pending.baseValues == JSONObject(pending.attributes.map { ($0.key, row.server[$0.key] ?? .null) }))
        }
        if row.rule == .refused {
            #expect(outcome.records.refusal?.serverCopy == row.server && outcome.records.refusal?.code == "412")
            #expect(outcome.records.refusal?.attributes == row.change && outcome.records.version == "v1")
        } else {
            #expect(outcome.records.refusal == nil)
        }
    }

    @Test("every conflict rule has a row")
    func everyConflictRuleHasARow() {
        let covered = Set(Self.conflictRows.map(\.rule.rawValue))
        #expect(MergePolicy.ConflictRule.allCases.filter { !covered.contains($0.rawValue) } == [])
    }

    @Test(
        "a refused update's copy of the server's object loses the attributes the server removes; all of them gone, the object is deleted there (a black-box probe: a rollback brought them back)"
    )
    func refusedCopyFollowsRemovals() {
        let refusal = RefusedChange(
            model: "Product", objectID: "p1", kind: .update, message: "no", attributes: ["a": "mine"], serverCopy: ["a": "1", "b": "2"])
        var local = MergePolicy.Local(model: "Product", id: "p1", attributes: ["a": "mine", "b": "2"], records: ObjectSyncState(refusal: refusal))
        let removed = MergePolicy.remove(["b"], local: local, configuration: ModelSyncConfiguration())
        #expect(removed.records.refusal?.serverCopy == ["a": "1"] && removed.records.refusal?.serverDeleted == false)
        #expect(removed.write == .replace(["a": "mine"]))
        // Removed here and added another; the server removes the rest: deleted there.
        local = MergePolicy.Local(model: "Product", id: "p1", attributes: ["c": "3"], records: removed.records)
        let gone = MergePolicy.remove(["a"], local: local, configuration: ModelSyncConfiguration())
        #expect(gone.records.refusal?.serverCopy == nil && gone.records.refusal?.serverDeleted == true, "\(gone)")
    }
}
