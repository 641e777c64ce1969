import Foundation
import Satchel
public import SatchelSync

extension ParseBackend {
    /// How the adapter keeps a create whose answer was lost from making a second object when it
    /// is sent again. Parse has no idempotent create of its own: each protection relies on
    /// something the server must be set up for. None adds a field the app did not write, except
    /// ``clientIDField(_:)``, which the app names.
    ///
    /// | protection | the server needs | a lost create answer, sent again |
    /// | --- | --- | --- |
    /// | ``requestIDs`` (default) | `idempotencyOptions` with a path matching `classes/.*` | answered `159`: the object the first request made is found by its attributes and linked; an object edited here in between asks again with what it sent, and its edits go to the object so made |
    /// | ``customObjectIDs`` | `allowCustomObjectId` | the object is created under the local id, so a second create is refused (`137`) and becomes an update of the object the first one made, edits included |
    /// | ``clientIDField(_:)`` | the field in the class's schema (or `addField` allowed) | the object holding the field's value is found before sending again, and updated instead, edits included (a create never sent is made anew) |
    /// | ``none`` | nothing | makes a second object |
    public enum CreateProtection: Sendable, Hashable {
        /// Every write request carries an `X-Parse-Request-Id` derived from the change (the same
        /// on every retry of the same change, after a restart too), and each create is its own
        /// `POST /classes/C` — Parse Server deduplicates requests by that id (for the paths its
        /// `idempotencyOptions` names, for `ttl` seconds: 300 by default), but not the
        /// sub-requests of a `/batch`, which carry no headers of their own. A repeat is
        /// answered `159` (duplicate request): the adapter looks for the object the first
        /// request made (the newest one holding every attribute sent) and links the local
        /// object to it; when none does (the first request failed after Parse recorded its
        /// id), the create is sent again in a later sync, once the server has forgotten the id.
        case requestIDs
        /// Creates carry the local id as `objectId` (Parse Server's `allowCustomObjectId`), so
        /// the server never renames an object. A create refused with `137` (duplicate value)
        /// whose id the server holds was made by an earlier push: its attributes are sent again
        /// as an update. Creates go in `/batch`. The ids must be unique across devices, as the
        /// ones Satchel generates are.
        case customObjectIDs
        /// Creates carry this field, holding the object's own value of it when it has one,
        /// else its local id; before creates are sent, objects holding those values are looked
        /// for (`$in`), and one found is updated instead of created. The field is an ordinary
        /// attribute: on the server, and pulled into the store like any other. Creates go in
        /// `/batch`.
        case clientIDField(String)
        /// Nothing: creates go in `/batch`; a lost answer makes a second object.
        case none
    }

    // MARK: - Push

    /// What every part of one push needs.
    struct PushContext: Sendable {
        let request: PushRequest
        let types: ParseMapping.WireTypes
        /// `/parse/classes/C`: a batch's sub-request paths include the mount.
        let classPath: String
        let what: String

        init(_ request: PushRequest, mount: URL) {
            self.request = request
            types = ParseMapping.WireTypes(metadata: request.metadata)
            classPath = mount.path + "/classes/" + SyncHTTPClient.escape(request.model.name)
            what = "push to \(request.model.name)"
        }
    }

    /// Updates and deletes go through `POST /batch` (with creates, unless each create is its own
    /// request: ``CreateProtection/requestIDs``).
    public func push(_ request: PushRequest) async throws -> [PushResult] {
        let context = PushContext(request, mount: configuration.url)
        let singly = configuration.createProtection == .requestIDs
        var outcomes: [String: PushOutcome] = [:]
        // A value that cannot travel in the type the server gave its attribute is refused here,
        // and so is an update of nothing but the fields Parse keeps itself (an empty `PUT` would
        // only move `updatedAt`, and the next pull would undo the edit unseen).
        for change in request.changes where change.kind != .delete {
            var refusal: (message: String, code: String)?
            if let message = ParseMapping.reserved(change.attributes) {
                refusal = (message, ParseMapping.reservedCode)
            } else if let message = ParseMapping.mistyped(change.attributes, blobs: change.blobs, model: request.model, types: context.types) {
                refusal = (message, ParseMapping.mistypedCode)
            } else if let id = change.attributes["objectId"], change.kind == .create || !id.isNull {
                // The object's id on Parse, never an attribute a create or an update can carry:
                // left out, its value would be lost with the next pull (black-box probes).
                refusal = ("objectId: Parse's id of the object, not an attribute; rename it", ParseMapping.readOnlyCode)
            } else if change.kind == .update, change.attributes.keys.allSatisfy(ParseMapping.serverFields.contains) {
                let names = change.attributes.keys.sorted().joined(separator: ", ")
                refusal = ("\(names): kept by Parse, never written by a client, so the update has nothing to send", ParseMapping.readOnlyCode)
            }
            guard let refusal else { continue }
            // An update's error carries the server's copy, for a rollback.
            let copy = change.kind == .update ? try await serverCopy(change.objectID, context) : nil
            outcomes[change.objectID] = .refused(message: refusal.message, code: refusal.code, serverCopy: copy)
        }
        // A delete of an object a lost create may have made goes to that object. Each object is
        // found for one change only (a black-box probe: two lost creates of the same values were
        // both linked to one object, and one's edits were lost).
        var claimed: Set<String> = []
        var deletedAs: [String: String] = [:]
        for change in request.changes where singly && change.deletesALostCreate {
            switch try await madeByLostCreate(change, context, excluding: claimed) {
            case .made(let id):
                deletedAs[change.objectID] = id
                claimed.insert(id)
            case .none: outcomes[change.objectID] = .accepted()
            case .unanswered(let error): outcomes[change.objectID] = .unanswered(error)
            }
        }
        // A create sent before (its answer lost) and edited here since is another request: what
        // it sent is asked again under its own request id, and the object that made (then or
        // now) takes the edits as an update (a black-box probe: a second object was made).
        var madeAs: [String: String] = [:]
        for change in request.changes where singly && outcomes[change.objectID] == nil && Self.editedLostCreate(change) {
            switch try await madeByLostCreate(change, context, excluding: claimed) {
            case .made(let id):
                madeAs[change.objectID] = id
                claimed.insert(id)
            case .none: break  // nothing made: it goes as a create
            case .unanswered(let error): outcomes[change.objectID] = .unanswered(error)
            }
        }
        let refusedHere = outcomes.count
        let sendable = (outcomes.isEmpty ? request.changes : request.changes.filter { outcomes[$0.objectID] == nil }).map { change in
            guard let id = deletedAs[change.objectID] else { return change }
            var renamed = change
            renamed.objectID = id
            return renamed
        }
        let batched = singly ? sendable.filter { $0.kind != .create || madeAs[$0.objectID] != nil } : sendable
        var start = 0
        while start < batched.count {
            let chunk = Array(batched[start..<min(start + configuration.batchSize, batched.count)])
            start += chunk.count
            for (id, outcome) in try await pushBatch(chunk, context, made: singly ? madeAs : nil) { outcomes[id] = outcome }
        }
        for (local, id) in deletedAs { outcomes[local] = outcomes.removeValue(forKey: id) }
        if singly {
            let creates = sendable.filter { $0.kind == .create && madeAs[$0.objectID] == nil }
            for (id, outcome) in try await pushCreates(creates, context, othersAnswered: outcomes.count > refusedHere, claimed: claimed) {
                outcomes[id] = outcome
            }
        }
        return request.changes.map {
            PushResult(objectID: $0.objectID, outcome: outcomes[$0.objectID] ?? .retryLater(message: "no result from the server"))
        }
    }

    /// The `X-Parse-Request-Id` of a change: derived from the class, the change's kind, object
    /// id, attributes (blobs by their content's reference, not by the file name an upload gets),
    /// base version and attempt (see ``pushCreates(_:_:othersAnswered:claimed:)``), so it is the same
    /// whenever the same change is sent again.
    static func requestID(_ change: OutgoingChange, className: String, attempt: Int = 0) -> String {
        RequestID.make([
            Array("satchel-parse-change".utf8), Array(className.utf8), Array(change.kind.rawValue.utf8), Array(change.objectID.utf8),
            change.attributes.jsonBytes, change.baseVersion?.jsonBytes ?? [], attempt == 0 ? [] : Array(String(attempt).utf8),
        ])
    }

    /// The body of a create or an update, its blobs uploaded first.
    func body(of change: OutgoingChange, _ context: PushContext) async throws -> JSONObject {
        var files: [String: (name: String, url: String)] = [:]
        for (attribute, data) in change.blobs.sorted(by: { $0.key < $1.key }) {
            files[attribute] = try await upload(data, name: attribute, session: context.request.session)
        }
        var body = ParseMapping.body(change.attributes, model: context.request.model, types: context.types, files: files)
        if change.kind == .create {
            switch configuration.createProtection {
            case .customObjectIDs: body["objectId"] = .string(change.objectID)
            case .clientIDField(let field): if body[field] == nil { body[field] = .string(change.objectID) }
            case .requestIDs, .none: break
            }
        }
        return body
    }

    // MARK: - Batches

    /// One `POST /batch` of `chunk`; the outcome of each change by id. `made`: creates that an
    /// earlier push made already (local id → objectId), sent as updates of that object.
    func pushBatch(_ chunk: [OutgoingChange], _ context: PushContext, made known: [String: String]? = nil) async throws -> [String: PushOutcome] {
        let made: [String: String]
        if let known { made = known } else { made = try await madeBefore(chunk.filter(\.mayHaveBeenSent), context) }
        var requests: [JSONValue] = []
        var bodies: [String: JSONObject] = [:]
        for change in chunk {
            let path = context.classPath + "/" + SyncHTTPClient.escape(made[change.objectID] ?? change.objectID)
            switch change.kind {
            case .create, .update:
                var body = try await body(of: change, context)
                if change.kind == .create, made[change.objectID] != nil {
                    // Made already: the create's attributes (edits since included) go on it, and
                    // what the lost push sent that was removed here since goes as removed (a
                    // black-box probe: the server kept it, and the next pull brought it back).
                    body["objectId"] = nil
                    let removed = JSONObject(change.removedSinceSent.map { ($0, JSONValue.null) })
                    for (field, removal) in ParseMapping.body(removed, model: context.request.model, types: context.types, files: [:]) {
                        body[field] = removal
                    }
                    requests.append(["method": "PUT", "path": .string(path), "body": .object(body)])
                } else if change.kind == .create {
                    requests.append(["method": "POST", "path": .string(context.classPath), "body": .object(body)])
                } else {
                    requests.append(["method": "PUT", "path": .string(path), "body": .object(body)])
                }
                bodies[change.objectID] = body
            case .delete:
                requests.append(["method": "DELETE", "path": .string(path)])
            }
        }
        let body: JSONObject = ["requests": .array(requests)]
        let requestID = RequestID.make([Array("satchel-parse-batch".utf8), body.jsonBytes])
        let answer = try await send(
            "POST", try endpoint("batch"), body: body, session: context.request.session, what: context.what, requestID: requestID)
        try check(answer, context.what)
        var outcomes: [String: PushOutcome] = [:]
        var madeAlready: [OutgoingChange] = []
        for (change, outcome) in zip(chunk, try Self.batchOutcomes(answer, changes: chunk, made: made, what: context.what)) {
            switch outcome {
            case .refused(let message, let code, nil) where change.kind == .update:
                // The server's copy, for a rollback.
                outcomes[change.objectID] = .refused(message: message, code: code, serverCopy: try await serverCopy(change.objectID, context))
            case .notFound(let message, "101"?) where change.kind != .create:
                // `101` is "missing or not permitted": an object this user still reads is one it
                // may not change (its ACL), not one the server deleted (a black-box probe: a
                // rollback dropped it here, a retry made it twice).
                if let copy = try await serverCopy(change.objectID, context) {
                    let verb = change.kind == .update ? "change" : "delete"
                    outcomes[change.objectID] = .refused(
                        message: "\(message ?? "refused") (the object is there: this user may not \(verb) it)", code: "101", serverCopy: copy)
                } else {
                    outcomes[change.objectID] = outcome
                }
            case .refused(_, "137"?, _)
            where change.kind == .create && configuration.createProtection == .customObjectIDs && made[change.objectID] == nil:
                // A duplicate value: an object with this id exists when an earlier push made it.
                if try await serverCopy(change.objectID, context) != nil { madeAlready.append(change) } else { outcomes[change.objectID] = outcome }
            default:
                outcomes[change.objectID] = outcome
            }
        }
        if !madeAlready.isEmpty {
            let ids = Dictionary(uniqueKeysWithValues: madeAlready.map { ($0.objectID, $0.objectID) })
            for (id, outcome) in try await pushBatch(madeAlready, context, made: ids) { outcomes[id] = outcome }
        }
        return outcomes
    }

    /// The objects that earlier creates in `creates` made (local id → objectId), found by the
    /// client-id field (``CreateProtection/clientIDField(_:)``); none with another protection.
    func madeBefore(_ creates: [OutgoingChange], _ context: PushContext) async throws -> [String: String] {
        guard case .clientIDField(let field) = configuration.createProtection, !creates.isEmpty else { return [:] }
        // The field's value: the object's own, else its local id.
        var owners: [JSONValue: String] = [:]
        for change in creates { owners[change.attributes[field].flatMap { $0.isNull ? nil : $0 } ?? .string(change.objectID)] = change.objectID }
        let condition: JSONValue = [field: ["$in": .array(Array(owners.keys))]]
        let what = "looking for earlier creates in \(context.request.model.name)"
        var made: [String: String] = [:]
        let found = try await list(
            context.request.model.name, where: condition, keys: field, limit: creates.count, session: context.request.session, what: what)
        for (id, fields) in found {
            if let value = fields[field], let local = owners[value], made[local] == nil { made[local] = id }
        }
        return made
    }

    /// What a `/batch` answer says of `changes`, one result each in order (`made`: the objects
    /// earlier creates made, by local id). Package-visible so that the fuzz targets read answers
    /// through the code a push runs.
    ///
    /// - Throws: ``SyncError`` `.protocolViolation` for an answer that does not hold one result
    ///   per change, or a result with neither `success` nor `error`.
    package static func batchOutcomes(
        _ answer: SyncHTTPClient.Response, changes: [OutgoingChange], made: [String: String], what: String
    ) throws(SyncError) -> [PushOutcome] {
        guard let responses = try answer.json(what).arrayValue, responses.count == changes.count else {
            throw SyncError(.protocolViolation, "\(what): the batch answer does not hold one result per request")
        }
        var outcomes: [PushOutcome] = []
        for (change, response) in zip(changes, responses) {
            outcomes.append(try outcome(of: change, response, what, madeAs: made[change.objectID]))
        }
        return outcomes
    }

    /// What one batch result (or a single request's answer, as `{"success":…}` or
    /// `{"error":…}`) says of `change`.
    static func outcome(of change: OutgoingChange, _ response: JSONValue, _ what: String, madeAs made: String? = nil) throws(SyncError) -> PushOutcome
    {
        if let success = response["success"]?.objectValue {
            switch change.kind {
            case .create where made != nil:
                return .accepted(serverID: made, version: success["updatedAt"])
            case .create:
                guard let id = success["objectId"]?.stringValue, !id.isEmpty else {
                    throw SyncError(.protocolViolation, "\(what): a create's result has no `objectId`")
                }
                return .accepted(serverID: id, version: success["createdAt"])
            case .update: return .accepted(version: success["updatedAt"])
            case .delete: return .accepted()
            }
        }
        guard let error = response["error"]?.objectValue else {
            throw SyncError(.protocolViolation, "\(what): a batch result with neither `success` nor `error`")
        }
        let code = error["code"]?.intValue
        let message = error["error"]?.stringValue ?? error["message"]?.stringValue ?? "refused by the server"
        switch code {
        case 101?: return .notFound(message: message, code: "101")
        case 1?, 100?, 124?: return .retryLater(message: "Parse error \(code!): \(message)")
        default: return .refused(message: message, code: code.map(String.init))
        }
    }

    /// Object `id` as the server has it now, in Satchel's terms (nil when it is gone).
    func serverCopy(_ id: String, _ context: PushContext) async throws -> JSONObject? {
        let what = "reading \(context.request.model.name) \(id)"
        let answer = try await send(
            "GET", try endpoint("classes/\(SyncHTTPClient.escape(context.request.model.name))/\(SyncHTTPClient.escape(id))"),
            session: context.request.session, what: what)
        if answer.status == 404 { return nil }
        try check(answer, what)
        return ParseMapping.decode(try answer.json(what), requireUpdatedAt: false)?.object.attributes
    }

    // MARK: - Creates, one request each

    /// What one create's own request came to.
    enum CreateAnswer: Sendable {
        case outcome(PushOutcome)
        /// `159`: a request with this id was made before.
        case duplicate(body: JSONObject)
        /// No answer that says (no answer at all, a server failure, a refused session).
        case failed(SyncError)
    }

    /// Sends each create as its own `POST /classes/C` with its request id, at most
    /// ``Configuration/createConcurrency`` at once. A create whose request failed (no answer, a
    /// 5xx, a refused session) is ``SatchelSync/PushOutcome/unanswered(_:)``: in flight, sent
    /// again by the next sync — unless every create failed so and nothing else of the push was
    /// answered (`othersAnswered` false): the error is then the push's, for the engine's
    /// retries and its handling of refused sessions.
    ///
    /// A create answered `159` (its request id was seen) is linked to the object the first
    /// request made. When no object holds its attributes, the first request failed after
    /// Parse recorded its id (a `beforeSave` refusal, say, before a `recreate`): it is sent
    /// once more under another request id, also derived from the change (the attempt counts).
    /// `claimed`: objects other changes of the push were found to have made.
    func pushCreates(
        _ creates: [OutgoingChange], _ context: PushContext, othersAnswered: Bool, claimed found: Set<String> = []
    ) async throws -> [String: PushOutcome] {
        guard !creates.isEmpty else { return [:] }
        var answers = [CreateAnswer](repeating: .outcome(.retryLater(message: "no result from the server")), count: creates.count)
        await withTaskGroup(of: (Int, CreateAnswer).self) { group in
            var next = 0
            func startNext() {
                guard next < creates.count else { return }
                let (index, change) = (next, creates[next])
                next += 1
                group.addTask { (index, await self.postCreate(change, context, attempt: 0)) }
            }
            for _ in 0..<configuration.createConcurrency { startNext() }
            while let (index, answer) = await group.next() {
                answers[index] = answer
                startNext()
            }
        }
        if !othersAnswered, case .failed(let error) = answers[0], answers.allSatisfy({ if case .failed = $0 { true } else { false } }) {
            throw error
        }
        var claimed = found
        for case .outcome(.accepted(let id?, _)) in answers { claimed.insert(id) }
        var outcomes: [String: PushOutcome] = [:]
        for (change, first) in zip(creates, answers) {
            var answer = first
            // Duplicates are resolved one at a time, so that two creates never claim one object.
            var attempt = 0
            while case .duplicate(let body) = answer {
                // A create never sent before has no earlier request of its own: the `159` is
                // another create's that had the same local id and attributes, and it goes under
                // the next request id (a black-box probe: it was linked to that create's object).
                if change.mayHaveBeenSent, let found = try await findMade(change, body: body, context, excluding: claimed) {
                    answer = .outcome(.accepted(serverID: found.id, version: found.version))
                } else if attempt < Self.createAttempts - 1 {
                    attempt += 1
                    answer = await postCreate(change, context, attempt: attempt)
                } else {
                    answer = .outcome(
                        .retryLater(
                            message: "Parse answered that this create was made already (code 159: its X-Parse-Request-Id was seen), "
                                + "but no object on the server holds its attributes; it is sent again by a later sync"))
                }
            }
            switch answer {
            case .outcome(let outcome):
                outcomes[change.objectID] = outcome
                if case .accepted(let id?, _) = outcome { claimed.insert(id) }
            case .duplicate:
                break  // resolved above
            case .failed(let error):
                outcomes[change.objectID] = .unanswered(error)
            }
        }
        return outcomes
    }

    /// Whether `change` creates an object whose create was sent, its answer lost, and that was
    /// edited here since: its request now differs from the one that may have made it.
    static func editedLostCreate(_ change: OutgoingChange) -> Bool {
        change.kind == .create && !change.sentValues.isEmpty && !change.sentValues.isIdentical(to: change.attributes)
    }

    /// What a lost create of a deleted object came to.
    enum LostCreate {
        /// It made object `id` (or makes it now: it never reached the server), to be deleted.
        case made(String)
        /// No object of it is on the server: the delete is done.
        case none
        case unanswered(SyncError)
    }

    /// Asks again with the lost create's own request id (what it sent, attempt 0): `159` says it
    /// was carried out, and the object it made is found by what it sent; a create made now (the
    /// first never reached the server) is deleted as well; a refusal now means nothing was made.
    /// An object `claimed` (found for another change) is not this one's.
    func madeByLostCreate(_ change: OutgoingChange, _ context: PushContext, excluding claimed: Set<String>) async throws -> LostCreate {
        let create = OutgoingChange(objectID: change.objectID, kind: .create, attributes: change.sentValues)
        switch await postCreate(create, context, attempt: 0) {
        case .outcome(.accepted(let id?, _)): return .made(id)
        case .duplicate(let body):
            // The object holds what the lost create sent, or, where an update of its edits went
            // through unanswered, what the object holds here now (a black-box probe: that
            // update's answer lost too, it was taken for no object, and made a second one).
            return try await findMade(create, body: body, context, excluding: claimed, orNow: change.attributes).map { .made($0.id) } ?? .none
        case .failed(let error): return .unanswered(error)
        case .outcome: return .none
        }
    }

    /// How many request ids one create tries in one push when the server answers `159` and no
    /// object holds its attributes.
    static let createAttempts = 3

    /// `POST /classes/C` of one create, carrying the request id of its `attempt`.
    func postCreate(_ change: OutgoingChange, _ context: PushContext, attempt: Int) async -> CreateAnswer {
        do {
            return try await sendCreate(change, context, attempt: attempt)
        } catch let error as SyncError {
            return .failed(error)
        } catch {
            return .failed(SyncError(.network, "\(context.what): \(error)"))
        }
    }

    func sendCreate(_ change: OutgoingChange, _ context: PushContext, attempt: Int) async throws -> CreateAnswer {
        let body = try await body(of: change, context)
        let answer = try await send(
            "POST", try endpoint("classes/\(SyncHTTPClient.escape(context.request.model.name))"), body: body, session: context.request.session,
            what: context.what, requestID: Self.requestID(change, className: context.request.model.name, attempt: attempt))
        if (200..<300).contains(answer.status) {
            return .outcome(try Self.outcome(of: change, ["success": try answer.json(context.what)], context.what))
        }
        let code = Self.code(answer)
        // A Parse error about this object (a 400 or 404 with a code) is its outcome; a refused
        // session, a refused key, too many requests or a server failure is the call's.
        guard let code, code != 209, answer.status != 429, answer.status < 500, ![1, 100, 124].contains(code) else {
            try check(answer, context.what)
            throw SyncError(.protocolViolation, "\(context.what): HTTP \(answer.status) without an error").at(answer.url.path)
        }
        if code == 159 { return .duplicate(body: body) }
        return .outcome(try Self.outcome(of: change, ["error": try answer.json(context.what)], context.what))
    }

    /// The object an earlier request of `change` made: the newest object of the class holding
    /// every attribute the change carries (blobs aside: their file names differ), other than
    /// `claimed` ones. Its scalar, date and pointer values narrow the query; the rest are
    /// compared here.
    /// `now`: values an attribute may also hold on the server (an edit made since, whose update
    /// may have gone through); an attribute it lacks may be absent there.
    func findMade(
        _ change: OutgoingChange, body: JSONObject, _ context: PushContext, excluding claimed: Set<String>, orNow now: JSONObject? = nil
    ) async throws -> (id: String, version: JSONValue?)? {
        var condition = JSONObject()
        for (name, value) in body where Self.isComparable(value) && (now == nil || now?[name] == change.attributes[name]) { condition[name] = value }
        let query = [("where", Self.text(.object(condition))), ("order", "-createdAt"), ("limit", "100")]
        let what = "looking for the object an earlier create of \(context.request.model.name) made"
        let answer = try await send(
            "GET", try endpoint("classes/\(SyncHTTPClient.escape(context.request.model.name))", query), session: context.request.session, what: what)
        try check(answer, what)
        let blobs = Set(context.request.model.blobAttributes).union(change.blobs.keys)
        for value in try Self.results(answer, what) {
            guard let decoded = ParseMapping.decode(value, requireUpdatedAt: false), !claimed.contains(decoded.object.id) else { continue }
            let held = change.attributes.allSatisfy { name, value in
                blobs.contains(name) || ParseMapping.serverFields.contains(name) || decoded.object.attributes[name] == value
                    || (now != nil && decoded.object.attributes[name] == now?[name])
            }
            // Exactly what the create sent: an object with more is another's (a black-box probe:
            // another device's object with the same title was linked, and its copy here
            // overwritten). Parse's own fields, and the ACL it may add, aside.
            let more = decoded.object.attributes.keys.contains { name in
                change.attributes[name] == nil && now?[name] == nil && !ParseMapping.serverFields.contains(name) && name != "ACL"
                    && !blobs.contains(name)
            }
            if held && !more { return (decoded.object.id, decoded.object.version) }
        }
        return nil
    }

    /// Whether a wire value can be matched by equality in a `where`: a string, number or
    /// boolean, a `Date` or a `Pointer`.
    static func isComparable(_ value: JSONValue) -> Bool {
        switch value {
        case .string, .int, .double, .bool: return true
        case .object(let object): return ["Date", "Pointer"].contains(object["__type"]?.stringValue)
        default: return false
        }
    }
}
