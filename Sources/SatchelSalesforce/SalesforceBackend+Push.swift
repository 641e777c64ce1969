import Foundation
package import Satchel
public import SatchelSync

extension SalesforceBackend {
    public func push(_ request: PushRequest) async throws -> [PushResult] {
        let object = request.model.name
        let describe = try await describeForPush(request)
        let createable = Set(describe.fields.filter(\.createable).map(\.name))
        let updateable = Set(describe.fields.filter(\.updateable).map(\.name))
        let blobFields = Set(describe.blobFields)
        let clientField = configuration.clientIDField.flatMap { createable.contains($0) ? $0 : nil }
        var results: [PushResult] = []

        /// A change's record, or its outcome when it cannot go (a blob that cannot be sent).
        func prepare(_ change: OutgoingChange, _ fields: JSONObject) async throws -> Outgoing? {
            switch Self.withBlobs(fields, of: change, blobFields: blobFields, model: request.model, limit: configuration.maximumBase64PerRequest) {
            case .send(let fields, let base64):
                return Outgoing(change: change, record: Self.record(object, fields), base64: base64)
            case .answer(let outcome):
                results.append(PushResult(objectID: change.objectID, outcome: try await self.withServerCopy(outcome, of: change, request: request)))
                return nil
            }
        }

        // Creates, after looking for records that earlier creates made (their answer lost); and
        // deletes of objects whose create's answer was lost (no version: never pulled), which
        // go to the record so made, if any (a black-box probe: the local id went as the record's).
        let creates = request.changes.filter { $0.kind == .create }
        let lostCreates = request.changes.filter(\.deletesALostCreate)
        // The client-id field's value: the object's own, else its local id.
        let clientValues = Dictionary(
            uniqueKeysWithValues: creates.map { change in
                (change.objectID, clientField.flatMap { change.attributes[$0]?.stringValue } ?? change.objectID)
            }
                + lostCreates.map { change in (change.objectID, clientField.flatMap { change.sentValues[$0]?.stringValue } ?? change.objectID) })
        // Only a create that may have been sent (its answer lost, or the app stopped after
        // sending it: then it carries what it sent) can have made a record: one never sent is
        // made anew, whatever earlier record holds its value (a black-box probe: a copy of a
        // pulled record, client-id value and all, and a create under a local id an earlier
        // create had, each overwrote that earlier record).
        let mayHaveBeenSent = Set(creates.filter(\.mayHaveBeenSent).map(\.objectID)).union(lostCreates.map(\.objectID))
        let made = try await madeBefore(clientValues.filter { mayHaveBeenSent.contains($0.key) }, field: clientField, request: request)
        var posts: [Outgoing] = []
        for change in creates where made[change.objectID] == nil {
            guard var outgoing = try await prepare(change, change.attributes.filter { name, value in createable.contains(name) && !value.isNull })
            else { continue }
            if let clientField { outgoing.record[clientField] = .string(clientValues[change.objectID]!) }
            posts.append(outgoing)
        }
        // Updates (and creates made already, now updated with what they carry).
        var patches: [Outgoing] = []
        for change in request.changes.filter({ $0.kind == .update }) + creates.filter({ made[$0.objectID] != nil }) {
            var fields = change.attributes.filter { name, _ in updateable.contains(name) }
            // A create made already: what its lost push sent that was removed here since goes
            // as null (a black-box probe: the org kept it, and the next pull brought it back).
            for name in change.removedSinceSent where updateable.contains(name) { fields[name] = .null }
            if change.kind == .update && fields.isEmpty {
                // Nothing the org lets an update change (formula, audit or create-only fields, or
                // fields it no longer has): an empty PATCH would only move LastModifiedDate, and
                // the next pull would undo the edit unseen. Refused, as the org refuses such
                // fields, for the app to resolve.
                let names = change.attributes.keys.sorted()
                let notFields = names.filter { name in !describe.fields.contains { $0.name == name } }
                // A relationship an extra-query field arrives under (`Owner` for `Owner.Name`).
                let related = notFields.filter { name in request.configuration.extraAttributes.contains { $0.hasPrefix(name + ".") } }
                let gone = notFields.filter { !related.contains($0) }
                let message =
                    "\(names.joined(separator: ", ")): not updateable on \(object) (describe)"
                    + (related.isEmpty
                        ? "" : "; \(related.joined(separator: ", ")) \(related.count == 1 ? "comes" : "come") with extra-query (read only)")
                    + (gone.isEmpty ? "" : "; \(gone.joined(separator: ", ")) \(gone.count == 1 ? "is no field" : "are no fields") of it any more")
                    + ", so the update has nothing to send"
                let refusal = PushOutcome.refused(message: message, code: "INVALID_FIELD_FOR_INSERT_UPDATE")
                results.append(PushResult(objectID: change.objectID, outcome: try await withServerCopy(refusal, of: change, request: request)))
                continue
            }
            guard var outgoing = try await prepare(change, fields) else { continue }
            outgoing.record["id"] = .string(made[change.objectID] ?? change.objectID)
            patches.append(outgoing)
        }
        // The calls: creates, updates (each in as many calls as the base64 bound takes), deletes.
        var calls: [Call] = []
        for group in Self.groups(posts, limit: configuration.maximumBase64PerRequest) {
            calls.append(Call(method: "POST", changes: group.map(\.change), records: group.map { .object($0.record) }))
        }
        for group in Self.groups(patches, limit: configuration.maximumBase64PerRequest) {
            calls.append(Call(method: "PATCH", changes: group.map(\.change), records: group.map { .object($0.record) }))
        }
        var deletes = request.changes.filter { $0.kind == .delete }
        if clientField != nil {
            // A lost create that made no record: nothing there to delete.
            for change in lostCreates where made[change.objectID] == nil {
                results.append(PushResult(objectID: change.objectID, outcome: .accepted()))
                deletes.removeAll { $0.objectID == change.objectID }
            }
        }
        if !deletes.isEmpty {
            let ids = deletes.map { made[$0.objectID] ?? $0.objectID }
            calls.append(Call(method: "DELETE", changes: deletes, query: [("ids", ids.joined(separator: ",")), ("allOrNone", "false")]))
        }
        for (index, call) in calls.enumerated() {
            do {
                let answers = try await collection(call.method, call.records, query: call.query, count: call.changes.count, request: request)
                var answered: [PushResult] = []
                for (change, answer) in zip(call.changes, answers) {
                    var outcome = try await outcome(of: change, answer, request: request)
                    if call.method == "PATCH", change.kind == .create, case .accepted = outcome {
                        outcome = .accepted(serverID: made[change.objectID])
                    }
                    answered.append(PushResult(objectID: change.objectID, outcome: outcome))
                }
                results += answered
            } catch let error as SyncError where index > 0 {
                // Earlier calls went through: failing the push would send their records again
                // (the engine retries a push whole). This call's records may have landed: they
                // stay in flight, and the engine fails the sync with the error once the earlier
                // results are applied (unless the server refused the call whole, before applying
                // any of it: pending again). The later calls' records were never sent: pending.
                for change in call.changes {
                    let outcome: PushOutcome =
                        error.refusedBeforeApplying
                        ? .retryLater(message: "\(call.method) /composite/sobjects: \(error.message)") : .unanswered(error)
                    results.append(PushResult(objectID: change.objectID, outcome: outcome))
                }
                for change in calls[(index + 1)...].flatMap(\.changes) {
                    results.append(
                        PushResult(
                            objectID: change.objectID,
                            outcome: .retryLater(message: "not sent: an earlier call of the push failed (\(error.message))")))
                }
                break
            }
        }
        return results
    }

    /// One `/composite/sobjects` call of a push: its method, the changes it carries, and their
    /// records (`DELETE`: the ids in the query instead).
    struct Call {
        var method: String
        var changes: [OutgoingChange]
        var records: [JSONValue]? = nil
        var query: [(String, String)] = []
    }

    /// A record on its way in a collection call, and how much base64 text it carries.
    struct Outgoing {
        var change: OutgoingChange
        var record: JSONObject
        var base64: Int
    }

    /// What becomes of a change's fields before they are sent.
    enum Prepared {
        /// The fields to send, blobs as base64 text, and how many characters of base64 they hold.
        case send(JSONObject, base64: Int)
        /// The change is not sent: this is its outcome.
        case answer(PushOutcome)
    }

    /// The fields of `change` with the blobs of its `base64` fields as base64 text: the bytes the
    /// engine attached (``OutgoingChange/blobs``) for a blob reference, never the reference
    /// itself. A reference without bytes waits for the next sync while the model does not declare
    /// the field a blob attribute yet (describe makes it one with the pull that follows), and is
    /// refused when it does (`BLOB_MISSING`: its file is gone). The org's own URL of bytes it
    /// holds (a blob not downloaded here) is left out; base64 text the app wrote goes as it is;
    /// anything else in a `base64` field is refused (`INVALID_BLOB`), and so is a record whose
    /// base64 alone passes `limit` (`BLOB_TOO_LARGE`): Salesforce would refuse the whole call.
    static func withBlobs(_ fields: JSONObject, of change: OutgoingChange, blobFields: Set<String>, model: ModelDefinition, limit: Int) -> Prepared {
        var fields = fields
        var base64 = 0
        for name in blobFields.sorted() {
            guard let value = fields[name], !value.isNull else { continue }
            if let bytes = change.blobs[name] {
                let text = bytes.base64EncodedString()
                base64 += text.utf8.count
                fields[name] = .string(text)
            } else if BlobStore.isReference(value) {
                guard model.blobAttributes.contains(name) else {
                    return .answer(
                        .retryLater(message: "\(name) holds a blob and goes with the next sync, once describe has made it a blob attribute"))
                }
                return .answer(.refused(message: "\(name): the blob's file (\(value.stringValue ?? "")) is not in the store", code: "BLOB_MISSING"))
            } else if let text = value.stringValue, text.hasPrefix("/services/data/") {
                fields[name] = nil  // the org's URL of bytes it holds already
            } else if let text = value.stringValue, Data(base64Encoded: text) != nil {
                base64 += text.utf8.count
            } else {
                return .answer(.refused(message: "\(name) holds neither a blob nor base64 text", code: "INVALID_BLOB"))
            }
        }
        if base64 > limit {
            return .answer(
                .refused(
                    message:
                        "\(blobFields.sorted().filter { fields[$0] != nil }.joined(separator: ", ")): \(base64) characters of base64, more than the \(limit) a request may carry",
                    code: "BLOB_TOO_LARGE"))
        }
        return .send(fields, base64: base64)
    }

    /// `records` in groups of consecutive records whose base64 stays within `limit` (each
    /// record's own is within it).
    static func groups(_ records: [Outgoing], limit: Int) -> [[Outgoing]] {
        var groups: [[Outgoing]] = []
        var current: [Outgoing] = []
        var size = 0
        for record in records {
            if !current.isEmpty && size + record.base64 > limit {
                groups.append(current)
                current = []
                size = 0
            }
            current.append(record)
            size += record.base64
        }
        if !current.isEmpty { groups.append(current) }
        return groups
    }

    /// A record of a collection call: its `attributes.type` and fields.
    static func record(_ object: String, _ fields: JSONObject) -> JSONObject {
        var record: JSONObject = ["attributes": ["type": .string(object)]]
        for (name, value) in fields { record[name] = value }
        return record
    }

    /// One `/composite/sobjects` call; its answer, one result per record, checked.
    func collection(
        _ method: String, _ records: [JSONValue]?, query: [(String, String)] = [], count: Int, request: PushRequest
    ) async throws -> [JSONValue] {
        let what = "push to \(request.model.name)"
        let body: Data? = records.map { Data(JSONObject(["allOrNone": false, "records": .array($0)]).jsonBytes) }
        let answer = try await send(
            method, try await api("composite/sobjects", query, session: request.session), body: body, session: request.session, what: what)
        try check(answer, what)
        return try Self.compositeResults(answer, count: count, what: what)
    }

    /// The results of a composite answer, checked to be `count`, one per record sent.
    /// Package-visible so that the fuzz targets read answers through the code a push runs.
    ///
    /// - Throws: ``SyncError`` `.protocolViolation` for an answer that is not a list of `count`.
    package static func compositeResults(_ answer: SyncHTTPClient.Response, count: Int, what: String) throws(SyncError) -> [JSONValue] {
        guard let results = try answer.json(what).arrayValue, results.count == count else {
            throw SyncError(.protocolViolation, "\(what): the composite answer does not hold one result per record")
        }
        return results
    }

    /// What one record's result says of `change`, with the server's copy of an update it
    /// refused (for a rollback).
    func outcome(of change: OutgoingChange, _ result: JSONValue, request: PushRequest) async throws -> PushOutcome {
        try await withServerCopy(try Self.outcome(of: change, result, what: "push to \(request.model.name)"), of: change, request: request)
    }

    /// `outcome`, with the server's copy when it refuses an update (for a rollback).
    func withServerCopy(_ outcome: PushOutcome, of change: OutgoingChange, request: PushRequest) async throws -> PushOutcome {
        if case .refused(let message, let code, nil) = outcome, change.kind == .update {
            return .refused(message: message, code: code, serverCopy: try await serverCopy(change.objectID, request: request))
        }
        return outcome
    }

    /// What one record's result says of `change` (a refusal without the server's copy).
    /// Package-visible so that the fuzz targets read answers through the code a push runs.
    ///
    /// - Throws: ``SyncError`` `.protocolViolation` for a result without `success`, or a create's
    ///   without an `id`.
    package static func outcome(of change: OutgoingChange, _ result: JSONValue, what: String) throws(SyncError) -> PushOutcome {
        guard let success = result["success"]?.boolValue else { throw SyncError(.protocolViolation, "\(what): a result without `success`") }
        if success {
            guard change.kind == .create else { return .accepted() }
            guard let id = result["id"]?.stringValue, !id.isEmpty else {
                throw SyncError(.protocolViolation, "\(what): a create's result has no `id`")
            }
            return .accepted(serverID: id)
        }
        let error = result["errors"]?.arrayValue?.first
        let code = error?["statusCode"]?.stringValue ?? "UNKNOWN_EXCEPTION"
        var message = error?["message"]?.stringValue ?? "refused by the server"
        if let fields = error?["fields"]?.arrayValue?.compactMap(\.stringValue), !fields.isEmpty {
            message += " (fields: \(fields.joined(separator: ", ")))"
        }
        switch code {
        case "ENTITY_IS_DELETED" where change.kind != .create: return .notFound(message: message, code: code)
        case "REQUEST_LIMIT_EXCEEDED", "UNABLE_TO_LOCK_ROW", "SERVER_UNAVAILABLE": return .retryLater(message: "\(code): \(message)")
        default:
            return .refused(message: message, code: code)
        }
    }

    /// The records earlier creates made (local id → Id), found by the client-id field: `values`
    /// holds each create's value of it, by local id.
    func madeBefore(_ values: [String: String], field: String?, request: PushRequest) async throws -> [String: String] {
        guard let field, !values.isEmpty else { return [:] }
        let owners = Dictionary(values.map { ($0.value, $0.key) }, uniquingKeysWith: { first, _ in first })
        let list = owners.keys.sorted().map { "'" + Self.escape($0) + "'" }.joined(separator: ", ")
        let soql = "SELECT Id, \(field) FROM \(request.model.name) WHERE \(field) IN (\(list))"
        // Every page of the answer (a black-box probe: an org of short pages had the creates
        // past the first made twice).
        var made: [String: String] = [:]
        try await eachRecord(ofQuery: soql, session: request.session, what: "looking for earlier creates in \(request.model.name)") { record in
            if let id = record["Id"]?.stringValue, let value = record[field]?.stringValue, let local = owners[value] { made[local] = id }
        }
        return made
    }

    /// Record `id` as the server has it now, in Satchel's terms (nil when it is gone).
    func serverCopy(_ id: String, request: PushRequest) async throws -> JSONObject? {
        let what = "reading \(request.model.name) \(id)"
        let answer = try await send(
            "GET", try await api("sobjects/\(SyncHTTPClient.escape(request.model.name))/\(SyncHTTPClient.escape(id))", session: request.session),
            session: request.session, what: what)
        if answer.status == 404 { return nil }
        try check(answer, what)
        guard var fields = try answer.json(what).objectValue else { return nil }
        fields.removeValue(forKey: "attributes")
        fields.removeValue(forKey: "Id")
        return fields.filter { _, value in !value.isNull }
    }

    /// `text` inside a SOQL string literal.
    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'")
    }
}
