import Foundation
import Satchel
import SatchelKinto
import SatchelSync
import SatchelTestSupport
import Testing

/// The real Kinto servers `scripts/kinto.sh up` started for this test run, found through the
/// environment it exports:
/// - `SATCHEL_KINTO_URL` and `SATCHEL_KINTO_DIR`: PostgreSQL backend (seeded with SQL by the
///   big scenario), basic auth accepting any user;
/// - `SATCHEL_KINTO_ACCOUNTS_URL`: memory backend, the accounts plugin alone (a wrong password
///   is a real 401).
///
/// Without them (a bare `swift test`) the Kinto suites are skipped, saying why; with
/// `SATCHEL_KINTO_REQUIRED=1` (CI, `scripts/test.sh`) a missing server fails them instead.
enum KintoServers {
    static let environment = ProcessInfo.processInfo.environment

    /// Whether the suites should run: a server is configured, or one is required.
    static let enabled = environment["SATCHEL_KINTO_URL"] != nil || environment["SATCHEL_KINTO_REQUIRED"] == "1"
    static let skipReason: Comment = "no Kinto server: run `bash scripts/test.sh`, or `eval \"$(bash scripts/kinto.sh up DIR)\"` first"

    static func variable(_ name: String) throws -> String {
        guard let value = environment[name], !value.isEmpty else {
            throw SyncError(.network, "\(name) is not set: the Kinto servers were not started (see scripts/kinto.sh)")
        }
        return value
    }

    /// The PostgreSQL-backed server (any user:password).
    static func main() throws -> URL { URL(string: try variable("SATCHEL_KINTO_URL"))! }
    /// The server with the accounts plugin.
    static func accounts() throws -> URL { URL(string: try variable("SATCHEL_KINTO_ACCOUNTS_URL"))! }

    /// Runs SQL on the main server's database; returns what psql printed.
    @discardableResult
    static func sql(_ statement: String) async throws -> String {
        try await script(["psql", try variable("SATCHEL_KINTO_DIR"), "-c", statement])
    }

    /// Runs `scripts/kinto.sh` with `arguments`, waiting on a thread of its own
    /// (``ChildProcess/detached(_:_:environment:killWhen:)``): starting a server takes seconds,
    /// and a Dispatch global queue's thread is one of the concurrency pool's on Linux, so waiting
    /// there stalls every test of the process (and the loopback servers they run). Returns its
    /// standard output, trimmed.
    @discardableResult
    static func script(_ arguments: [String]) async throws -> String {
        let path =
            environment["SATCHEL_KINTO_SCRIPT"]
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../scripts/kinto.sh").standardized.path
        let child = try await ChildProcess.detached("/bin/bash", [path] + arguments)
        FileHandle.standardError.write(child.stderr)
        guard child.status == 0 && !child.signaled else {
            throw SyncError(.server, "scripts/kinto.sh \(arguments.joined(separator: " ")) failed with status \(child.status)")
        }
        return String(decoding: child.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The bytes of the file the main server's attachment at `location` names, read from the
    /// directory its kinto-attachment plugin writes to (`SATCHEL_KINTO_DIR/attachments`); nil
    /// when there is no such file.
    static func attachmentFile(_ location: String) throws -> Data? {
        guard let url = URL(string: location), url.path.count > 1 else {
            throw SyncError(.protocolViolation, "the attachment's location is not a URL: \(location)")
        }
        return FileManager.default.contents(atPath: try variable("SATCHEL_KINTO_DIR") + "/attachments" + url.path)
    }

    /// A short unique name for buckets and users.
    static func unique(_ prefix: String) -> String { "\(prefix)-\(UUID().uuidString.prefix(8).lowercased())" }
}

/// A PostgreSQL-backed Kinto of one test's own, which the test may stop and start again.
struct OwnKintoServer {
    let root: String
    var directory: String { root + "/main" }
    let url: URL

    /// Starts one in a new directory under the system's temporary directory (readable by the
    /// user postgres, which runs its database).
    static func start() async throws -> OwnKintoServer {
        let root = NSTemporaryDirectory() + KintoServers.unique("satchel-kinto-own")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let text = try await KintoServers.script(["start", root + "/main", "--postgresql"])
        guard let url = URL(string: text) else { throw SyncError(.protocolViolation, "kinto.sh printed no URL: \(text)") }
        return OwnKintoServer(root: root, url: url)
    }

    func stop() async throws { try await KintoServers.script(["stop", directory]) }
    func restart() async throws { try await KintoServers.script(["start", directory]) }
    /// Stops the server and its database and removes its files.
    func remove() async throws { try await KintoServers.script(["down", root]) }
}

/// Talks to Kinto directly, as another client or the administrator would (not through the
/// adapter under test).
struct KintoAdmin: Sendable {
    let url: URL
    let credentials: Credentials
    let http = SyncHTTPClient(timeout: 30)

    init(_ url: URL, _ credentials: Credentials) {
        self.url = url
        self.credentials = credentials
    }

    /// Sends a request; throws unless the status is 2xx. Returns the JSON body.
    @discardableResult
    func call(_ method: String, _ path: String, _ body: JSONObject? = nil, headers: [String: String] = [:]) async throws -> JSONValue {
        let answer = try await raw(method, path, body, headers: headers)
        guard (200..<300).contains(answer.status) else {
            throw SyncError(.server, "\(method) \(path): HTTP \(answer.status) \(answer.text)", httpStatus: answer.status)
        }
        return answer.body.isEmpty ? .null : try JSONValue(parsing: answer.body)
    }

    func raw(_ method: String, _ path: String, _ body: JSONObject? = nil, headers: [String: String] = [:]) async throws -> SyncHTTPClient.Response {
        var headers = headers
        headers["Authorization"] = SyncHTTPClient.basicAuthorization(credentials)
        let target = path.hasPrefix("http") ? URL(string: path)! : try SyncHTTPClient.url(url, path)
        // Concurrent writes on Kinto's PostgreSQL backend may lose a race for a timestamp: 409,
        // errno 122, "please retry".
        for _ in 1..<5 {
            let answer = try await http.send(method, target, headers: headers, body: body.map { Data($0.jsonBytes) })
            guard answer.status == 409, (try? JSONValue(parsing: answer.body))?["errno"]?.intValue == 122 else { return answer }
        }
        return try await http.send(method, target, headers: headers, body: body.map { Data($0.jsonBytes) })
    }

    /// Uploads `data` as the attachment of the record at `path` (created when missing), as a
    /// multipart form's field `attachment` (kinto-attachment's API). Returns the attachment.
    @discardableResult
    func attach(_ path: String, _ data: Data, filename: String, fields: JSONObject? = nil) async throws -> JSONValue {
        var parts = [MultipartForm.Part(name: "attachment", filename: filename, contentType: "application/octet-stream", data: data)]
        if let fields { parts.append(MultipartForm.Part(name: "data", contentType: "application/json", data: Data(fields.jsonBytes))) }
        let form = MultipartForm(parts)
        let headers = ["Authorization": SyncHTTPClient.basicAuthorization(credentials), "Content-Type": form.contentType]
        let answer = try await http.send("POST", try SyncHTTPClient.url(url, path + "/attachment"), headers: headers, body: form.body)
        guard (200..<300).contains(answer.status) else {
            throw SyncError(.server, "POST \(path)/attachment: HTTP \(answer.status) \(answer.text)", httpStatus: answer.status)
        }
        return try JSONValue(parsing: answer.body)
    }

    /// The principal (`user.id`) Kinto gives these credentials.
    func principal() async throws -> String {
        guard let id = try await call("GET", "")["user"]?["id"]?.stringValue else { throw SyncError(.unauthorized, "no user id") }
        return id
    }

    func records(_ bucket: String, _ collection: String) -> String {
        "buckets/\(bucket)/collections/\(KintoMapping.recordID(collection))/records"
    }

    /// Every record of a collection (following `Next-Page`), as the mapping reads them.
    func list(_ bucket: String, _ collection: String) async throws -> [KintoMapping.Record] {
        var next: String? = records(bucket, collection) + "?_limit=1000"
        var result: [KintoMapping.Record] = []
        while let path = next {
            let answer = try await raw("GET", path)
            guard answer.status == 200, let data = try JSONValue(parsing: answer.body)["data"]?.arrayValue else {
                throw SyncError(.server, "listing \(collection): HTTP \(answer.status)")
            }
            result += data.compactMap(KintoMapping.record)
            next = answer.header("next-page")
        }
        return result
    }

    /// The live objects of a collection, by id.
    func objects(_ bucket: String, _ collection: String) async throws -> [String: JSONObject] {
        var objects: [String: JSONObject] = [:]
        for case .object(let id, let attributes, _) in try await list(bucket, collection) { objects[id] = attributes }
        return objects
    }

    /// Writes records in batches of 25: id → attributes.
    func putMany(_ bucket: String, _ collection: String, _ objects: [(String, JSONObject)], permissions: JSONObject? = nil) async throws {
        var start = 0
        while start < objects.count {
            let chunk = objects[start..<min(start + 25, objects.count)]
            let requests: [JSONValue] = chunk.map { id, attributes in
                var body: JSONObject = ["data": .object(KintoMapping.data(attributes))]
                if let permissions { body["permissions"] = .object(permissions) }
                return ["method": "PUT", "path": .string("/" + records(bucket, collection) + "/" + KintoMapping.recordID(id)), "body": .object(body)]
            }
            let answer = try await call("POST", "batch", ["requests": .array(requests)])
            for response in answer["responses"]?.arrayValue ?? [] where !(200..<300).contains(response["status"]?.intValue ?? 0) {
                throw SyncError(.server, "batch write: \(response)")
            }
            start += chunk.count
        }
    }
}
