import Foundation
package import Satchel
public import SatchelSync

extension SalesforceBackend {
    public func push(_ request: PushRequest) async throws -> [PushResult] {
        let object = request.model.name
        let describe = try await describeForPush(request)
        let createable = Set(describe.fields.filter(\.createable).map(\.name))
        let updateable = Set(describe.fields.filter(\.updateable).map(\.name))
        let clientField = createable.contains(configuration.clientIDField) ? configuration.clientIDField : nil
        var results: [PushResult] = []

        // Creates, after looking for records that earlier creates made (their answer lost).
        let creates = request.changes.filter { $0.kind == .create }
        let made = try await madeBefore(creates.map(\.id), field: clientField, request: request)
        let fresh = creates.filter { made[$0.id] == nil }
        let again = creates.filter { made[$0.id] != nil }
        if !fresh.isEmpty {
            let records: [JSONValue] = fresh.map { change in
                var record = Self.record(object, change.attributes.filter { name, value in createable.contains(name) && !value.isNull })
                if let clientField { record[clientField] = .string(change.id) }
                return .object(record)
            }
            let answers = try await collection("POST", records, count: fresh.count, request: request)
            for (change, answer) in zip(fresh, answers) { results.append(PushResult(id: change.id, outcome: try await outcome(of: change, answer, request: request))) }
        }
        // Updates (and creates made already, now updated with what they carry).
        let updates = request.changes.filter { $0.kind == .update } + again
        if !updates.isEmpty {
            let records: [JSONValue] = updates.map { change in
                var record = Self.record(object, change.attributes.filter { name, _ in updateable.contains(name) })
                record["id"] = .string(made[change.id] ?? change.id)
                return .object(record)
            }
            let answers = try await collection("PATCH", records, count: updates.count, request: request)
            for (change, answer) in zip(updates, answers) {
                var outcome = try await outcome(of: change, answer, request: request)
                if change.kind == .create, case .accepted = outcome { outcome = .accepted(serverID: made[change.id]) }
                results.append(PushResult(id: change.id, outcome: outcome))
            }
        }
        // Deletes.
        let deletes = request.changes.filter { $0.kind == .delete }
        if !deletes.isEmpty {
            let ids = deletes.map(\.id).joined(separator: ",")
            let answers = try await collection("DELETE", nil, query: [("ids", ids), ("allOrNone", "false")], count: deletes.count, request: request)
            for (change, answer) in zip(deletes, answers) { results.append(PushResult(id: change.id, outcome: try await outcome(of: change, answer, request: request))) }
        }
        return results
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
        let answer = try await send(method, try await api("composite/sobjects", query, session: request.session), body: body, session: request.session, what: what)
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
        let outcome = try Self.outcome(of: change, result, what: "push to \(request.model.name)")
        if case .rejected(let message, let code, nil) = outcome, change.kind == .update {
            return .rejected(message: message, code: code, serverCopy: try await serverCopy(change.id, request: request))
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
            guard let id = result["id"]?.stringValue, !id.isEmpty else { throw SyncError(.protocolViolation, "\(what): a create's result has no `id`") }
            return .accepted(serverID: id)
        }
        let error = result["errors"]?.arrayValue?.first
        let code = error?["statusCode"]?.stringValue ?? "UNKNOWN_EXCEPTION"
        var message = error?["message"]?.stringValue ?? "refused by the server"
        if let fields = error?["fields"]?.arrayValue?.compactMap(\.stringValue), !fields.isEmpty { message += " (fields: \(fields.joined(separator: ", ")))" }
        switch code {
        case "ENTITY_IS_DELETED" where change.kind != .create: return .notFound
        case "REQUEST_LIMIT_EXCEEDED", "UNABLE_TO_LOCK_ROW", "SERVER_UNAVAILABLE": return .retryLater(message: "\(code): \(message)")
        default:
            return .rejected(message: message, code: code)
        }
    }

    /// The records earlier creates of `ids` made (local id → Id), by the client-id field.
    func madeBefore(_ ids: [String], field: String?, request: PushRequest) async throws -> [String: String] {
        guard let field, !ids.isEmpty else { return [:] }
        let list = ids.map { "'" + Self.escape($0) + "'" }.joined(separator: ", ")
        let soql = "SELECT Id, \(field) FROM \(request.model.name) WHERE \(field) IN (\(list))"
        let what = "looking for earlier creates in \(request.model.name)"
        let answer = try await send("GET", try await api("query", [("q", soql)], session: request.session), session: request.session, what: what)
        try check(answer, what)
        guard let records = try answer.json(what)["records"]?.arrayValue else {
            throw SyncError(.protocolViolation, "\(what): the answer has no `records` list")
        }
        var made: [String: String] = [:]
        for record in records {
            if let id = record["Id"]?.stringValue, let local = record[field]?.stringValue { made[local] = id }
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
        return fields.filter { name, value in !value.isNull && name != configuration.clientIDField }
    }

    /// `text` inside a SOQL string literal.
    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'")
    }
}
