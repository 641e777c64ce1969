import Foundation
import LoopbackSupport

/// The server's state and the REST API's routes: OAuth under `/services/oauth2/`, the version
/// list at `/services/data/`, and under `/services/data/vXX.X/` (bearer token required)
/// `sobjects` (describe, records, blobs, `deleted`, `updated`, upsert by external id), `query`
/// and `queryAll` (`QueryRoutes.swift`), and `composite/sobjects` (`CompositeRoutes.swift`).
/// The HTTP side is ``SalesforceServer``'s.
struct SalesforceState {
    /// The request being answered, as the routes read it.
    struct Call {
        var request: SalesforceServer.Request
        /// The version of the path (`59.0`).
        var version: String
        /// The path under `/services/data/vXX.X/`, split.
        var parts: [String]
        var method: String { request.method }
    }

    /// A query's rows, kept for `nextRecordsUrl`.
    struct Cursor {
        var records: [JSON]
        var pageSize: Int
    }

    /// `http://127.0.0.1:PORT`.
    let root: String
    /// The versions listed, oldest first.
    let versions: [String]
    var store: RecordStore
    var sessions: Sessions
    var rules: [SalesforceFixture.Rule]
    var pageSize: Int
    var deletedWindowExpired = false
    /// Object → when its describe last changed.
    var describeModified: [String: Int64] = [:]
    var cursors: [String: Cursor] = [:]
    var cursorCount = 0
    var apiUsage = 0
    /// Answers to give instead of the real ones: to the matching request after `skip` others.
    var sabotage: [(method: String, prefix: String, skip: Int, status: Int, body: Data)] = []
    /// Whether answers carry a `Date` of the real clock before the server's own, as a framework
    /// that sends one of its own would.
    var dateSentTwice = false
    var requests: [SalesforceServer.Request] = []

    init(fixture: SalesforceFixture, root: String) {
        self.root = root
        versions = fixture.versions.sorted { (Double($0) ?? 0) < (Double($1) ?? 0) }
        store = RecordStore(objects: fixture.objects)
        sessions = Sessions(users: fixture.users)
        rules = fixture.rules
        pageSize = fixture.queryPageSize
        let started = store.clock.stamp()
        for name in fixture.objects.keys { describeModified[name] = started }
        for (object, records) in fixture.records.sorted(by: { $0.key < $1.key }) {
            for record in records {
                let id = store.adminInsert(object, JSON.parse(record)?.object ?? [:], id: nil, keepStamps: true)
                if let schema = store.schema(object), let field = schema.blobField, let bytes = fixture.files[id] {
                    store.setBlob(id, field.name, bytes)
                }
            }
        }
    }

    /// The newest version listed.
    var newestVersion: String { versions.last ?? "59.0" }

    // MARK: - Routing

    mutating func route(_ request: SalesforceServer.Request) -> Answer {
        let parts = request.path.split(separator: "/").map { String($0).removingPercentEncoding ?? String($0) }
        guard parts.count >= 2, parts[0] == "services" else { return .error(.notFound) }
        switch (parts[1], Array(parts.dropFirst(2))) {
        case ("oauth2", ["token"]):
            guard request.method == "POST" else { return .error(.methodNotAllowed(request.method, allowed: ["POST"])) }
            return sessions.tokenEndpoint(Self.form(request), root: root, now: store.clock.now())
        case ("oauth2", ["userinfo"]):
            return sessions.userInfo(authorization: request.headers["authorization"], root: root)
        case ("oauth2", ["revoke"]):
            return sessions.revoke(Self.form(request))
        case ("data", []):
            guard request.method == "GET" else { return .error(.methodNotAllowed(request.method, allowed: ["GET", "HEAD"])) }
            return .json(
                .array(
                    versions.map { version in
                        .object(["label": .string(Self.label(version)), "url": .string("/services/data/v\(version)"), "version": .string(version)])
                    }))
        case ("data", let rest):
            guard rest[0].hasPrefix("v"), versions.contains(String(rest[0].dropFirst())) else { return .error(.notFound) }
            guard sessions.user(authorization: request.headers["authorization"]) != nil else { return .error(.invalidSession) }
            apiUsage += 1
            var answer: Answer
            do throws(APIError) {
                answer = try dispatch(Call(request: request, version: String(rest[0].dropFirst()), parts: Array(rest.dropFirst())))
            } catch {
                answer = .error(error)
            }
            answer.headers["Sforce-Limit-Info"] = "api-usage=\(apiUsage)/15000"
            return answer
        default:
            return .error(.notFound)
        }
    }

    /// The routes under `/services/data/vXX.X/`.
    private mutating func dispatch(_ call: Call) throws(APIError) -> Answer {
        let p = call.parts
        switch (p.first ?? "", p.count) {
        case ("", 0):
            try allow(call, ["GET"])
            let base = "/services/data/v\(call.version)"
            var resources = JSONObject()
            for name in ["sobjects", "query", "queryAll", "composite", "limits"] { resources[name] = .string("\(base)/\(name)") }
            return .json(.object(resources))
        case ("sobjects", 1):
            try allow(call, ["GET"])
            return .json(describeGlobal(call.version))
        case ("sobjects", 2):
            let schema = try schema(p[1])
            if call.method == "POST" { return try create(schema, call) }
            try allow(call, ["GET", "POST"])
            return .json(
                .object([
                    "objectDescribe": .object([
                        "name": .string(schema.name), "label": .string(schema.label), "keyPrefix": .string(schema.keyPrefix),
                        "createable": .bool(schema.createable), "updateable": .bool(schema.updateable),
                        "deletable": .bool(schema.deletable), "queryable": .bool(schema.queryable),
                    ]),
                    "recentItems": .array([]),
                ]))
        case ("sobjects", 3) where p[2] == "describe":
            try allow(call, ["GET"])
            return describe(try schema(p[1]), call)
        case ("sobjects", 3) where p[2] == "deleted":
            try allow(call, ["GET"])
            return try deleted(try schema(p[1]), call)
        case ("sobjects", 3) where p[2] == "updated":
            try allow(call, ["GET"])
            return try updated(try schema(p[1]), call)
        case ("sobjects", 3):
            return try record(try schema(p[1]), p[2], call)
        case ("sobjects", 4):
            let schema = try schema(p[1])
            if let id = SalesforceID.canonical(p[2]), SalesforceID.prefix(id) == schema.keyPrefix {
                try allow(call, ["GET"])
                return try blob(schema, id, p[3])
            }
            return try externalID(schema, p[2], p[3], call)
        case ("query", 1), ("queryAll", 1):
            try allow(call, ["GET"])
            return try query(call, all: p[0] == "queryAll")
        case ("query", 2), ("queryAll", 2):
            try allow(call, ["GET"])
            return try nextPage(p[1], call)
        case ("composite", 2) where p[1] == "sobjects":
            return try composite(call)
        default:
            throw .notFound
        }
    }

    private func allow(_ call: Call, _ methods: [String]) throws(APIError) {
        guard methods.contains(call.method) || (call.method == "HEAD" && methods.contains("GET")) else {
            throw .methodNotAllowed(call.method, allowed: methods + (methods.contains("GET") ? ["HEAD"] : []))
        }
    }

    /// The object of a path, whatever its case; unknown: `404 NOT_FOUND`.
    func schema(_ name: String) throws(APIError) -> Schema {
        guard let schema = store.schema(name) else { throw .notFound }
        return schema
    }

    // MARK: - Describe

    private func describeGlobal(_ version: String) -> JSON {
        let objects = store.schemas.keys.sorted().map { name -> JSON in
            let schema = store.schemas[name]!
            let base = "/services/data/v\(version)/sobjects/\(name)"
            return .object([
                "name": .string(name), "label": .string(schema.label), "keyPrefix": .string(schema.keyPrefix),
                "custom": .bool(name.hasSuffix("__c")), "createable": .bool(schema.createable), "updateable": .bool(schema.updateable),
                "deletable": .bool(schema.deletable), "queryable": .bool(schema.queryable), "replicateable": .bool(true),
                "urls": .object(["sobject": .string(base), "describe": .string(base + "/describe"), "rowTemplate": .string(base + "/{ID}")]),
            ])
        }
        return .object(["encoding": .string("UTF-8"), "maxBatchSize": .int(200), "sobjects": .array(objects)])
    }

    /// `GET /sobjects/O/describe`, with `Last-Modified`; `304` with no body when
    /// `If-Modified-Since` is not older than it.
    private func describe(_ schema: Schema, _ call: Call) -> Answer {
        let modified = describeModified[schema.name] ?? 0
        let lastModified = SalesforceTime.httpDate(modified)
        if let since = call.request.headers["if-modified-since"].flatMap(SalesforceTime.parseHTTPDate), since >= modified {
            return Answer(status: 304, contentType: "", headers: ["Last-Modified": lastModified], body: Data())
        }
        let children = store.schemas.keys.sorted().flatMap { name in
            store.schemas[name]!.fields.filter { $0.referenceTo.contains(schema.name) }.map { (object: name, field: $0) }
        }
        return .json(schema.describe(version: call.version, children: children), headers: ["Last-Modified": lastModified])
    }

    /// Marks a describe as changed now (at least a second after its last change, so a client
    /// holding the last `Last-Modified` sees it).
    mutating func touchDescribe(_ object: String) {
        guard let name = store.schema(object)?.name else { return }
        describeModified[name] = max(store.clock.stamp(), (describeModified[name] ?? 0) + SalesforceTime.second)
    }

    // MARK: - Records

    /// `GET`, `PATCH`, `DELETE /sobjects/O/ID`.
    private mutating func record(_ schema: Schema, _ rawID: String, _ call: Call) throws(APIError) -> Answer {
        try allow(call, ["GET", "PATCH", "DELETE"])
        guard let id = SalesforceID.canonical(rawID), SalesforceID.prefix(id) == schema.keyPrefix else {
            throw APIError(404, "NOT_FOUND", "Provided external ID field does not exist or is not accessible: \(rawID)")
        }
        switch call.method {
        case "PATCH":
            let body = try Self.body(call)
            if body.keys.contains(where: { $0.lowercased() == "id" }) {
                throw .invalidField("The Id field should not be specified in the sobject data.")
            }
            let changes = try Changes(body, schema, skipping: ["attributes"])
            guard let error = store.update(schema, id, changes, rules: rules) else { return .noContent }
            throw error.statusCode == "INVALID_CROSS_REFERENCE_KEY" && store.record(schema.name, id) == nil ? .notFound : APIError(error)
        case "DELETE":
            guard let error = store.delete(id, rules: rules) else { return .noContent }
            throw error.statusCode == "INVALID_CROSS_REFERENCE_KEY" ? .notFound : APIError(error)
        default:
            guard let stored = store.record(schema.name, id) else { throw .notFound }
            if stored.deletedAt != nil { throw .entityIsDeleted }
            var fields: [Schema.Field]?
            if let list = call.request.query["fields"] {
                var chosen: [Schema.Field] = []
                for name in list.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !name.isEmpty {
                    guard let field = schema.field(name) else { throw .noSuchColumn(name, schema.name) }
                    chosen.append(field)
                }
                fields = chosen
            }
            return .json(.object(store.render(schema, id, stored.fields, fields: fields, version: call.version)))
        }
    }

    /// `POST /sobjects/O`: `201 {"id":…,"success":true,"errors":[]}`.
    private mutating func create(_ schema: Schema, _ call: Call) throws(APIError) -> Answer {
        let body = try Self.body(call)
        if body.keys.contains(where: { $0.lowercased() == "id" }) { throw .invalidField("The Id field should not be specified in the sobject data.") }
        switch store.create(schema, try Changes(body, schema, skipping: ["attributes"]), rules: rules) {
        case .success(let id):
            return .json(.object(["id": .string(id), "success": .bool(true), "errors": .array([])]), status: 201)
        case .failure(let error):
            throw APIError(error)
        }
    }

    /// `GET /sobjects/O/ID/Field`: a base64 field's bytes.
    private func blob(_ schema: Schema, _ id: String, _ name: String) throws(APIError) -> Answer {
        guard let field = schema.field(name), field.type == "base64", let stored = store.record(schema.name, id) else { throw .notFound }
        if stored.deletedAt != nil { throw .entityIsDeleted }
        guard let bytes = store.blob(id, field.name) else { throw .notFound }
        return Answer(status: 200, contentType: "application/octetstream", body: bytes)
    }

    /// `PATCH /sobjects/O/Field/Value`: upsert by an external id — `201` with `"created":true`
    /// when no record has the value, `200` with `"created":false` when one has, `300` with
    /// their URLs when several have.
    private mutating func externalID(_ schema: Schema, _ name: String, _ value: String, _ call: Call) throws(APIError) -> Answer {
        guard let field = schema.field(name), field.externalId else {
            throw APIError(404, "NOT_FOUND", "Provided external ID field does not exist or is not accessible: \(name)")
        }
        try allow(call, ["GET", "PATCH"])
        let matches = store.rows(schema.name).filter { $0.fields[field.name]?.string?.lowercased() == value.lowercased() }
        if matches.count > 1 {
            return .json(.array(matches.map { .string("/services/data/v\(call.version)/sobjects/\(schema.name)/\($0.id)") }), status: 300)
        }
        if call.method == "GET" {
            guard let match = matches.first else { throw .notFound }
            return .json(.object(store.render(schema, match.id, match.fields, version: call.version)))
        }
        let body = try Self.body(call)
        var changes = try Changes(body, schema, skipping: ["attributes", field.name.lowercased()])
        if let match = matches.first {
            if let error = store.update(schema, match.id, changes, rules: rules) { throw APIError(error) }
            return .json(.object(["id": .string(match.id), "success": .bool(true), "errors": .array([]), "created": .bool(false)]))
        }
        changes.values.append((field, try Coercion.value(.string(value), for: field)))
        switch store.create(schema, changes, rules: rules) {
        case .success(let id):
            return .json(.object(["id": .string(id), "success": .bool(true), "errors": .array([]), "created": .bool(true)]), status: 201)
        case .failure(let error):
            throw APIError(error)
        }
    }

    // MARK: - Reading requests

    /// A JSON object body (`415` for a body declared as something else than JSON).
    static func body(_ call: Call) throws(APIError) -> JSONObject {
        if let type = call.request.headers["content-type"], !type.lowercased().contains("json") {
            throw APIError(415, "UNSUPPORTED_MEDIA_TYPE", "MediaType of '\(type)' is not supported by this resource")
        }
        guard let json = JSON.parse(call.request.body) else {
            throw .jsonParser(call.request.body.isEmpty ? "No content to map due to end-of-input" : "Unexpected character: the body is not JSON")
        }
        guard let object = json.object else {
            throw .jsonParser("Cannot deserialize instance of SObject out of \(json.array != nil ? "START_ARRAY" : "VALUE") token")
        }
        return object
    }

    /// A form-encoded body's parameters, over the URL's.
    static func form(_ request: SalesforceServer.Request) -> [String: String] {
        var form = request.query
        for (key, value) in SalesforceServer.decodeQuery(String(decoding: request.body, as: UTF8.self)) { form[key] = value }
        return form
    }

    /// A release name for a version: `59.0` → `Winter '24` (three releases a year).
    static func label(_ version: String) -> String {
        guard let number = Double(version).map({ Int($0) }) else { return version }
        let k = number - 56
        let seasons = ["Winter", "Spring", "Summer"]
        let season = seasons[((k % 3) + 3) % 3]
        let year = 23 + Int((Double(k) / 3).rounded(.down))
        return "\(season) '\(String(format: "%02d", ((year % 100) + 100) % 100))"
    }
}
