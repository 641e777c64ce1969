import Foundation
import LoopbackSupport

/// sObject Collections, `/composite/sobjects`: `POST` creates, `PATCH` updates (each record
/// carries its `id`), `DELETE ?ids=a,b&allOrNone=false` deletes — at most 200 records, mixed
/// objects allowed, HTTP 200 whatever the records' fates, one result per record in request
/// order: `{"id":…,"success":true,"errors":[]}` or
/// `{"success":false,"errors":[{"statusCode":…,"message":…,"fields":[…]}]}`.
///
/// With `allOrNone` true, one failure rolls every record back: the failing records keep their
/// errors, the others report `ALL_OR_NONE_OPERATION_ROLLED_BACK`. A body the deserializer
/// refuses (an unknown object or field, a value of the wrong type) fails the whole call.
extension SalesforceState {
    static let collectionLimit = 200

    mutating func composite(_ call: Call) throws(APIError) -> Answer {
        switch call.method {
        case "POST", "PATCH":
            let body = try Self.body(call)
            guard let records = body["records"]?.array else { throw .jsonParser("records: an array of sObjects is required") }
            guard records.count <= Self.collectionLimit else { throw Self.tooMany }
            let allOrNone = body["allOrNone"]?.bool ?? false
            let creating = call.method == "POST"
            var writes: [(schema: Schema, id: String?, changes: Changes)] = []
            for record in records {
                guard let fields = record.object else { throw .jsonParser("Cannot deserialize instance of SObject") }
                guard let type = fields["attributes"]?["type"]?.string else { throw .invalidType("Must send a concrete entity type.") }
                guard let schema = store.schema(type) else { throw .unsupportedType(type) }
                let id = creating ? nil : fields.members.first { $0.key.lowercased() == "id" }?.value.string
                let skipping: Set<String> = creating ? ["attributes"] : ["attributes", "id"]
                writes.append((schema, id, try Changes(fields, schema, skipping: skipping)))
            }
            return run(allOrNone: allOrNone) { state in
                writes.map { write -> Result<String, RefusedChange> in
                    if creating { return state.store.create(write.schema, write.changes, rules: state.rules) }
                    guard let given = write.id else {
                        return .failure(RefusedChange(statusCode: "MISSING_ARGUMENT", message: "Id not specified in an update call"))
                    }
                    guard let id = SalesforceID.canonical(given), SalesforceID.prefix(id) == write.schema.keyPrefix else {
                        return .failure(
                            RefusedChange(
                                statusCode: "MALFORMED_ID", message: "\(write.schema.label) ID: id value of incorrect type: \(given)", fields: ["Id"])
                        )
                    }
                    if let error = state.store.update(write.schema, id, write.changes, rules: state.rules) { return .failure(error) }
                    return .success(id)
                }
            }
        case "DELETE":
            guard let list = call.request.query["ids"], !list.isEmpty else { throw APIError(400, "MISSING_ARGUMENT", "ids not specified") }
            let ids = list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            guard ids.count <= Self.collectionLimit else { throw Self.tooMany }
            let allOrNone = call.request.query["allOrNone"]?.lowercased() == "true"
            return run(allOrNone: allOrNone) { state in
                ids.map { given -> Result<String, RefusedChange> in
                    guard let id = SalesforceID.canonical(given) else { return .failure(.malformedID(given)) }
                    if let error = state.store.delete(id, rules: state.rules) { return .failure(error) }
                    return .success(id)
                }
            }
        default:
            throw .methodNotAllowed(call.method, allowed: ["DELETE", "PATCH", "POST"])
        }
    }

    private static let tooMany = APIError(
        400, "EXCEEDED_ID_LIMIT", "record limit reached. cannot submit more than \(collectionLimit) records into this call")

    /// Runs the writes and answers their results; with `allOrNone`, a failure undoes them all.
    private mutating func run(allOrNone: Bool, _ writes: (inout SalesforceState) -> [Result<String, RefusedChange>]) -> Answer {
        // Only an all-or-nothing call keeps a copy to roll back to (a copy costs the whole store).
        let before = allOrNone ? store : nil
        var results = writes(&self)
        let failed = results.contains { if case .failure = $0 { true } else { false } }
        if let before, failed {
            store = before
            results = results.map { result in
                if case .success = result { return .failure(.rolledBack) }
                return result
            }
        }
        return .json(
            .array(
                results.map { result in
                    switch result {
                    case .success(let id): .object(["id": .string(id), "success": .bool(true), "errors": .array([])])
                    case .failure(let error): .object(["success": .bool(false), "errors": .array([error.json])])
                    }
                }))
    }
}
