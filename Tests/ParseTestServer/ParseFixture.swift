import LoopbackSupport
public import Foundation

/// What a ``ParseServer`` starts with, read from a JSON file in `Fixtures/parse`:
///
/// ```json
/// {
///   "appID": "satchel-app", "restKey": "rest-key",
///   "users": {"ann": "secret"},
///   "classes": {"Product": [{"objectId": "P000000001", "name": "Lamp", "price": 12}]},
///   "functions": {"hello": {"greeting": "hi"}},
///   "files": {"0f3e…_receipt.txt": "aGVsbG8="},
///   "rules": [{"className": "Product", "operation": "create", "matching": {"name": "forbidden"},
///              "code": 142, "message": "name is forbidden"}],
///   "maxLimit": 1000, "batchLimit": 50,
///   "idempotency": {"paths": ["classes/.*"], "ttl": 300}, "allowCustomObjectId": true,
///   "lockedSchemas": ["Product"]
/// }
/// ```
///
/// Every key is optional. An object may carry its `objectId`, `createdAt` and `updatedAt`
/// (kept as given: fixtures have fixed timestamps), else the server assigns them. A `File`
/// field needs only its `name`: the server adds the `url`, as Parse does. `"restKey": null`
/// makes a server that checks no client key.
public struct ParseFixture: Sendable {
    public var appID = "satchel-app"
    /// The REST API key every request must carry; nil: none is checked.
    public var restKey: String? = "rest-key"
    /// Username → password.
    public var users: [String: String] = ["ann": "secret", "bob": "secret"]
    /// Class name → its objects, each a JSON object.
    public var classes: [String: [Data]] = [:]
    /// Cloud function name → the JSON its `result` is.
    public var functions: [String: Data] = [:]
    /// Stored file name → its bytes, served at `/parse/files/<appID>/<name>`.
    public var files: [String: Data] = [:]
    /// Where `File` URLs point, as a files adapter with direct access (S3, a CDN) makes them:
    /// the file's name is appended. nil: the server's own `/parse/files/<appID>/`.
    public var filesLocation: String? = nil
    /// Parse Server's `maxLimit`: a larger `limit` is silently clamped to it.
    public var maxLimit: Int? = nil
    /// The most requests one `POST /batch` may carry (Parse Server has no cap; hosted Parse had 50).
    public var batchLimit: Int? = nil
    public var rules: [Rule] = []
    /// Parse Server's `idempotencyOptions`: requests to paths under the mount matching one of
    /// `paths` (regular expressions anchored at the start, e.g. `classes/.*`) that carry an
    /// `X-Parse-Request-Id` seen in the last `ttl` seconds are answered `159`. nil: off, as
    /// Parse Server's default.
    public var idempotency: Idempotency? = nil
    /// Parse Server's `allowCustomObjectId`: a create may carry its `objectId`.
    public var allowCustomObjectID = false
    /// Classes whose class-level permissions refuse `addField` (the usual production setting):
    /// a client write of a field the class's schema lacks is refused with `119`.
    public var lockedSchemas: Set<String> = []

    /// Parse Server's `idempotencyOptions`.
    public struct Idempotency: Sendable {
        public var paths: [String]
        public var ttl: TimeInterval

        public init(paths: [String] = ["classes/.*"], ttl: TimeInterval = 300) {
            self.paths = paths
            self.ttl = ttl
        }
    }

    /// A `beforeSave` / `beforeDelete` trigger that rejects some writes: `operation` (`create`,
    /// `update` or `delete`) on `className` (nil: any class), restricted to the objects `ids`
    /// and to writes whose body carries every field value of `matching` (a JSON object; for a
    /// delete, the stored object's values). The write is answered `{"code":code,"error":message}`.
    public struct Rule: Sendable {
        public var className: String?
        public var operation: String
        public var ids: [String]?
        public var matching: Data?
        public var code: Int = 142
        public var message: String

        public init(
            className: String? = nil, operation: String, ids: [String]? = nil, matching: Data? = nil, code: Int = 142,
            message: String
        ) {
            self.className = className
            self.operation = operation
            self.ids = ids
            self.matching = matching
            self.code = code
            self.message = message
        }

        /// Whether the rule rejects `operation` on object `id` (nil for a create) of `className`
        /// whose fields are `fields`.
        func rejects(_ operation: String, className: String, id: String?, fields: [String: JSON]) -> Bool {
            guard operation == self.operation, self.className == nil || self.className == className else { return false }
            if let ids, !ids.contains(id ?? "") { return false }
            if let matching {
                guard let wanted = JSON.parse(matching)?.object else { return false }
                return wanted.allSatisfy { fields[$0.key] == $0.value }
            }
            return true
        }
    }

    public init() {}

    /// Reads a fixture file.
    public init(contentsOf url: URL) throws {
        guard let root = JSON.parse(try Data(contentsOf: url))?.object else {
            throw ParseFixtureError("\(url.lastPathComponent) is not a JSON object")
        }
        if let appID = root["appID"]?.string { self.appID = appID }
        if let restKey = root["restKey"] { self.restKey = restKey.string }
        if let users = root["users"]?.object { self.users = users.compactMapValues(\.string) }
        for (name, objects) in root["classes"]?.object ?? [:] {
            guard let objects = objects.array, objects.allSatisfy({ $0.object != nil }) else {
                throw ParseFixtureError("the class \(name) is not an array of objects")
            }
            classes[name] = objects.map(\.data)
        }
        functions = (root["functions"]?.object ?? [:]).mapValues(\.data)
        for (name, base64) in root["files"]?.object ?? [:] {
            guard let bytes = base64.string.flatMap({ Data(base64Encoded: $0) }) else {
                throw ParseFixtureError("the file \(name) is not base64")
            }
            files[name] = bytes
        }
        maxLimit = root["maxLimit"]?.number.map { Int($0) }
        batchLimit = root["batchLimit"]?.number.map { Int($0) }
        if let options = root["idempotency"]?.object {
            idempotency = Idempotency(
                paths: options["paths"]?.array?.compactMap(\.string) ?? ["classes/.*"], ttl: options["ttl"]?.number ?? 300)
        }
        allowCustomObjectID = root["allowCustomObjectId"]?.bool ?? false
        lockedSchemas = Set(root["lockedSchemas"]?.array?.compactMap(\.string) ?? [])
        for rule in root["rules"]?.array ?? [] {
            guard let operation = rule["operation"]?.string else { throw ParseFixtureError("a rule has no operation") }
            rules.append(
                Rule(
                    className: rule["className"]?.string, operation: operation, ids: rule["ids"]?.array?.compactMap(\.string),
                    matching: rule["matching"]?.data, code: rule["code"]?.number.map { Int($0) } ?? 142,
                    message: rule["message"]?.string ?? "rejected"))
        }
    }

    /// The fixture file `name` of the repository's `Fixtures/parse`, found from `file` upwards.
    public static func named(_ name: String, file: String = #filePath) throws -> ParseFixture {
        var directory = URL(fileURLWithPath: file)
        while directory.path != "/" {
            directory.deleteLastPathComponent()
            let candidate = directory.appendingPathComponent("Fixtures/parse/\(name).json")
            if FileManager.default.fileExists(atPath: candidate.path) { return try ParseFixture(contentsOf: candidate) }
        }
        throw ParseFixtureError("no Parse fixture named \(name)")
    }
}

/// A fixture that cannot be read, or a server that cannot start.
public struct ParseFixtureError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
