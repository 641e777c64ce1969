import Foundation
import LoopbackSupport

/// The server's state and Parse Server's routes under the mount: headers and sessions first,
/// then `/classes`, `/batch`, `/login` and the rest. The HTTP side is ``ParseServer``'s.
///
/// A path outside the mount, or one no route takes, gets Express's own 404 page (`Cannot GET
/// /parse/nowhere`, `text/html`), as Parse Server leaves it; inside a batch, the item's error
/// is `{"code":107,"error":"cannot route GET /nowhere"}`, as Parse's batch router answers.
struct ParseState {
    /// Who makes a request: the session's user and token, if it carries one.
    struct Caller {
        var user: String?
        var token: String?
    }

    /// A successful answer of a route (a batch item's `success` is its `json`).
    struct Reply {
        var json: JSON
        var status = 200
        var headers: [String: String] = [:]
    }

    let fixture: ParseFixture
    let mount = "/parse"
    /// `http://127.0.0.1:PORT`.
    let root: String
    var store = ClassStore()
    var rules: [ParseFixture.Rule]
    var maxLimit: Int?
    var batchLimit: Int?
    /// Session token → user `objectId`.
    var sessions: [String: String] = [:]
    /// User `objectId` → password (never shown: `_User` objects carry no password).
    var passwords: [String: String] = [:]
    var files: [String: (data: Data, contentType: String)] = [:]
    var sabotage: [(method: String, prefix: String, status: Int, body: Data)] = []
    /// Requests whose answers are lost after they were carried out: answered 502 instead.
    var lostAnswers: [(method: String, prefix: String)] = []
    var requests: [ParseServer.Request] = []
    var idempotency: ParseFixture.Idempotency?
    var allowCustomObjectID: Bool
    /// `X-Parse-Request-Id` → when it was first seen (Parse Server's `_Idempotency` class).
    var requestIDs: [String: Date] = [:]
    /// How many requests were answered `159`.
    var duplicateRequests = 0

    init(fixture: ParseFixture, root: String) {
        self.fixture = fixture
        self.root = root
        rules = fixture.rules
        maxLimit = fixture.maxLimit
        batchLimit = fixture.batchLimit
        idempotency = fixture.idempotency
        allowCustomObjectID = fixture.allowCustomObjectID
        store.lockedSchemas = fixture.lockedSchemas
        for (name, data) in fixture.files { files[name] = (data, Self.contentType(of: name)) }
        for (name, password) in fixture.users.sorted(by: { $0.key < $1.key }) {
            let created = try? store.write("_User", .create(id: nil), body: ["username": .string(name)], checked: false)
            if let id = created?["objectId"]?.string { passwords[id] = password }
        }
        for (className, objects) in fixture.classes.sorted(by: { $0.key < $1.key }) {
            for object in objects { store.seed(className, JSON.parse(object)?.object ?? [:]) }
        }
    }

    /// Where stored files are served: `http://127.0.0.1:PORT/parse/files/<appID>/`.
    var filesBase: String { fixture.filesLocation ?? "\(root)\(mount)/files/\(fixture.appID)/" }

    func view(_ caller: Caller) -> ObjectView { ObjectView(store: store, user: caller.user, filesBase: filesBase) }

    // MARK: - Routing

    mutating func route(_ request: ParseServer.Request) -> Answer {
        guard request.path == mount || request.path.hasPrefix(mount + "/") else {
            return .expressNotFound(request.method, request.path)
        }
        let parts = request.path.dropFirst(mount.count).split(separator: "/").map(String.init)
        // Files and the health check answer without any header, as in Parse Server.
        if request.method == "GET", parts.count == 3, parts[0] == "files" { return download(appID: parts[1], name: parts[2]) }
        if request.method == "GET", parts == ["health"] { return .json(.object(["status": .string("ok")])) }
        guard request.headers["x-parse-application-id"] == fixture.appID,
            fixture.restKey == nil || request.headers["x-parse-rest-api-key"] == fixture.restKey
        else { return .unauthorized }
        var caller = Caller()
        if let token = request.headers["x-parse-session-token"], !token.isEmpty {
            guard let user = sessions[token] else { return .error(.invalidSessionToken) }
            caller = Caller(user: user, token: token)
        }
        if request.method == "POST", parts.count == 2, parts[0] == "files" { return upload(parts[1], request) }
        if let duplicate = checkIdempotency(request, parts) { return .error(duplicate) }
        do throws(ParseError) {
            var body: [String: JSON] = [:]
            if !request.body.isEmpty {
                guard let object = JSON.parse(request.body)?.object else { throw .invalidJSON }
                body = object
            }
            // Query parameters are JSON when they parse as JSON, else strings; the body adds to them.
            var parameters = body
            for (key, value) in request.query { parameters[key] = JSON.parse(value) ?? .string(value) }
            let reply = try dispatch(request.method, parts, parameters: parameters, body: body, caller: caller, inBatch: false)
            return .json(reply.json, status: reply.status, headers: reply.headers)
        } catch {
            return error.isNoRoute ? .expressNotFound(request.method, request.path) : .error(error)
        }
    }

    /// Runs one route (`parts`: the path under the mount); a batch's items come here too.
    private mutating func dispatch(
        _ method: String, _ parts: [String], parameters: [String: JSON], body: [String: JSON], caller: Caller, inBatch: Bool
    ) throws(ParseError) -> Reply {
        switch (method, parts.first ?? "", parts.count) {
        case ("POST", "login", 1), ("GET", "login", 1): return try login(parameters)
        case ("POST", "logout", 1): return logout(caller)
        case ("GET", "users", 2) where parts[1] == "me": return try me(caller)
        case ("POST", "users", 1): return try signUp(body)
        case ("GET", "users", 1): return try find("_User", parameters, caller)
        case ("GET", "users", 2): return try get("_User", parts[1], parameters, caller)
        case ("PUT", "users", 2): return try update("_User", parts[1], body, caller)
        case ("DELETE", "users", 2): return try delete("_User", parts[1], caller)
        case ("GET", "classes", 2): return try find(parts[1], parameters, caller)
        case ("POST", "classes", 2): return try create(parts[1], body, caller)
        case ("GET", "classes", 3): return try get(parts[1], parts[2], parameters, caller)
        case ("PUT", "classes", 3): return try update(parts[1], parts[2], body, caller)
        case ("DELETE", "classes", 3): return try delete(parts[1], parts[2], caller)
        case ("POST", "batch", 1) where !inBatch: return try batch(body, caller)
        case ("POST", "functions", 2), ("GET", "functions", 2): return try function(parts[1])
        default: throw .noRoute(method, "/" + parts.joined(separator: "/"))
        }
    }

    // MARK: - Idempotency

    /// Parse Server's `promiseEnsureIdempotency`, on the routes that run it (`POST /classes/C`,
    /// `PUT /classes/C/ID`, users and functions; never `/batch`, whose sub-requests carry no
    /// headers): a request id is recorded before the request runs, whatever then becomes of
    /// it, and a request carrying one recorded less than `ttl` seconds ago is answered `159`.
    private mutating func checkIdempotency(_ request: ParseServer.Request, _ parts: [String]) -> ParseError? {
        guard let idempotency, let id = request.headers["x-parse-request-id"] else { return nil }
        let guarded =
            switch (request.method, parts.first ?? "", parts.count) {
            case ("POST", "classes", 2), ("PUT", "classes", 3), ("POST", "users", 1), ("PUT", "users", 2), ("POST", "functions", 2): true
            default: false
            }
        let path = parts.joined(separator: "/")
        guard guarded, idempotency.paths.contains(where: { path.range(of: "^" + $0.drop { $0 == "^" }, options: .regularExpression) != nil }) else {
            return nil
        }
        let now = Date()
        if let seen = requestIDs[id], now.timeIntervalSince(seen) < idempotency.ttl {
            duplicateRequests += 1
            return ParseError(159, "Duplicate request")
        }
        requestIDs[id] = now
        return nil
    }

    // MARK: - Classes

    private func find(_ className: String, _ parameters: [String: JSON], _ caller: Caller) throws(ParseError) -> Reply {
        let query = try ParseQuery(find: parameters, maxLimit: maxLimit)
        guard ClassStore.isValidClassName(className) else { throw .invalidClassName(className) }
        let matching = store.objects(className).filter { ClassStore.allows($0, user: caller.user, write: false) && query.matches($0) }
        let view = view(caller)
        var answer: [String: JSON] = ["results": .array(query.page(query.sorted(matching)).map { view.present($0, query) })]
        if query.count { answer["count"] = .number(Double(matching.count)) }
        return Reply(json: .object(answer))
    }

    private func get(_ className: String, _ id: String, _ parameters: [String: JSON], _ caller: Caller) throws(ParseError) -> Reply {
        let query = try ParseQuery(get: parameters)
        guard let object = store.object(className, id), ClassStore.allows(object, user: caller.user, write: false) else {
            throw .objectNotFound()
        }
        return Reply(json: view(caller).present(object, query))
    }

    private mutating func create(_ className: String, _ body: [String: JSON], _ caller: Caller) throws(ParseError) -> Reply {
        if className == "_User" { return try signUp(body) }
        guard ClassStore.isValidClassName(className) else { throw .invalidClassName(className) }
        var body = body
        var chosen: String?
        if let objectID = body["objectId"] {
            guard allowCustomObjectID else { throw .invalidKeyName("objectId is an invalid field name.") }
            guard let id = objectID.string, !id.isEmpty else { throw ParseError(104, "objectId must not be empty, null or undefined") }
            if store.object(className, id) != nil { throw ParseError(137, "A duplicate value for a field with unique values was provided") }
            chosen = id
            body["objectId"] = nil
        }
        try checkRules("create", className, id: nil, fields: body)
        let response = try store.write(className, .create(id: chosen), body: body)
        let id = response["objectId"]?.string ?? ""
        return Reply(json: response, status: 201, headers: ["Location": "\(root)\(mount)/classes/\(className)/\(id)"])
    }

    private mutating func update(_ className: String, _ id: String, _ body: [String: JSON], _ caller: Caller) throws(ParseError) -> Reply {
        guard let object = store.object(className, id), ClassStore.allows(object, user: caller.user, write: true) else {
            throw .objectNotFound()
        }
        if className == "_User" { return try updateUser(id, body, caller) }
        try checkRules("update", className, id: id, fields: body)
        return Reply(json: try store.write(className, .update(id), body: body))
    }

    private mutating func delete(_ className: String, _ id: String, _ caller: Caller) throws(ParseError) -> Reply {
        guard let object = store.object(className, id), ClassStore.allows(object, user: caller.user, write: true) else {
            throw .objectNotFound("Object not found for delete.")
        }
        if className == "_User", caller.user != id { throw ParseError(206, "Cannot modify user \(id).") }
        try checkRules("delete", className, id: id, fields: object)
        store.delete(className, id)
        if className == "_User" {
            sessions = sessions.filter { $0.value != id }
            passwords[id] = nil
        }
        return Reply(json: .object([:]))
    }

    /// A `beforeSave` / `beforeDelete` rule that rejects the write, as its error.
    func checkRules(_ operation: String, _ className: String, id: String?, fields: [String: JSON]) throws(ParseError) {
        if let rule = rules.first(where: { $0.rejects(operation, className: className, id: id, fields: fields) }) {
            throw ParseError(rule.code, rule.message)
        }
    }

    // MARK: - Batch

    /// `POST /batch`: every item routed (its path must start with the mount, or the whole call
    /// fails with 107 as in Parse), run in order, answered `{"success":…}` or `{"error":…}`
    /// with HTTP 200 whatever the items' fates. Not atomic: `transaction` is ignored.
    private mutating func batch(_ body: [String: JSON], _ caller: Caller) throws(ParseError) -> Reply {
        guard let items = body["requests"]?.array else { throw ParseError(107, "requests must be an array") }
        if let batchLimit, items.count > batchLimit {
            throw ParseError(107, "too many requests in batch: \(items.count), the limit is \(batchLimit)")
        }
        var routed: [(method: String, parts: [String], body: [String: JSON])] = []
        for item in items {
            let path = item["path"]?.string ?? ""
            guard path.hasPrefix(mount + "/") else { throw ParseError(107, "cannot route batch path \(path)") }
            guard item["body"] == nil || item["body"]?.object != nil else { throw .invalidJSON }
            let parts = path.dropFirst(mount.count).split(separator: "/").map { String($0).removingPercentEncoding ?? String($0) }
            routed.append((item["method"]?.string ?? "", parts, item["body"]?.object ?? [:]))
        }
        var results: [JSON] = []
        for item in routed {
            do {
                let reply = try dispatch(item.method, item.parts, parameters: item.body, body: item.body, caller: caller, inBatch: true)
                results.append(.object(["success": reply.json]))
            } catch {
                results.append(.object(["error": error.json]))
            }
        }
        return Reply(json: .array(results))
    }

    // MARK: - Cloud functions

    private func function(_ name: String) throws(ParseError) -> Reply {
        guard let result = fixture.functions[name] else { throw ParseError(141, "Invalid function: \"\(name)\"") }
        return Reply(json: .object(["result": JSON.parse(result) ?? .null]))
    }
}
