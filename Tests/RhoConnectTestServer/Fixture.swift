public import Foundation

/// What a ``RhoConnectServer`` starts with, read from a JSON file in `Fixtures/rhoconnect`:
///
/// ```json
/// {
///   "users": {"ann": "secret"},
///   "sources": {"Product": {"partition": "user", "objects": {"1": {"name": "iPhone"}}, "metadata": "{\"v\":1}"}},
///   "rules": [{"source": "Product", "operation": "create", "where": {"name": "wrongname"}, "message": "error create"}],
///   "scripts": {"edits": [{"source": "Product", "update": {"1": {"price": "9"}}, "remove": {"1": ["brand"]}, "delete": ["2"]}]},
///   "blobs": {"seed.txt": "aGVsbG8="}
/// }
/// ```
///
/// `users` empty or absent: any non-empty login is accepted. Values are stored as strings, as
/// RhoConnect stores them; `{{server}}` in a value becomes the server's root URL (for blob URLs).
/// Each user gets their own copy of a `user` source's objects; `app` sources are shared.
public struct Fixture: Sendable {
    public var users: [String: String] = [:]
    public var sources: [String: Source] = [:]
    public var rules: [Rule] = []
    public var scripts: [String: [Change]] = [:]
    /// Blob files served at `/blobs/NAME`.
    public var blobs: [String: Data] = [:]

    public struct Source: Sendable {
        public var partition = "user"
        public var objects: [String: [String: String]] = [:]
        public var metadata: String?
        /// A schema version: a client that has not seen this one gets `schema-changed`.
        public var schemaVersion: String?

        public init(partition: String = "user", objects: [String: [String: String]] = [:]) {
            self.partition = partition
            self.objects = objects
        }
    }

    /// An error the server's backend raises: for `operation` `create`, `update`, `delete` (on
    /// the objects `ids`, or those whose pushed attributes include `where`), `query` (a
    /// `source-error`), `login`, or `search`.
    public struct Rule: Sendable {
        public var source: String?
        public var operation: String
        public var ids: [String]?
        public var matching: [String: String]?
        public var message: String

        public init(source: String? = nil, operation: String, ids: [String]? = nil, matching: [String: String]? = nil, message: String) {
            self.source = source
            self.operation = operation
            self.ids = ids
            self.matching = matching
            self.message = message
        }

        func applies(_ operation: String, source: String, id: String? = nil, attributes: [String: String?] = [:]) -> Bool {
            guard operation == self.operation, self.source == nil || self.source == source else { return false }
            if let ids, !ids.contains(id ?? "") { return false }
            if let matching, !matching.allSatisfy({ attributes[$0.key] == .some($0.value) }) { return false }
            return true
        }
    }

    /// A server-side change, as another client or the backend would make it.
    public struct Change: Sendable {
        public var source: String
        /// For a `user` source: whose data (default: every user's).
        public var user: String?
        public var insert: [String: [String: String]] = [:]
        public var update: [String: [String: String]] = [:]
        public var remove: [String: [String]] = [:]
        public var delete: [String] = []
    }

    public init() {}

    /// Reads a fixture file.
    public init(contentsOf url: URL) throws {
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: url))
        guard let root = json as? [String: Any] else { throw FixtureError("\(url.lastPathComponent) is not a JSON object") }
        users = (root["users"] as? [String: Any] ?? [:]).mapValues { Self.string($0) }
        for (name, value) in root["sources"] as? [String: Any] ?? [:] {
            let source = value as? [String: Any] ?? [:]
            var parsed = Source(partition: source["partition"] as? String ?? "user", objects: Self.objects(source["objects"]))
            parsed.metadata = source["metadata"] as? String
            parsed.schemaVersion = source["schemaVersion"] as? String
            sources[name] = parsed
        }
        for case let rule as [String: Any] in root["rules"] as? [Any] ?? [] {
            rules.append(
                Rule(
                    source: rule["source"] as? String, operation: rule["operation"] as? String ?? "", ids: rule["ids"] as? [String],
                    matching: (rule["where"] as? [String: Any])?.mapValues { Self.string($0) }, message: rule["message"] as? String ?? "error"))
        }
        for (name, steps) in root["scripts"] as? [String: Any] ?? [:] {
            scripts[name] = (steps as? [Any] ?? []).compactMap { step in
                guard let step = step as? [String: Any], let source = step["source"] as? String else { return nil }
                var change = Change(source: source, user: step["user"] as? String)
                change.insert = Self.objects(step["insert"])
                change.update = Self.objects(step["update"])
                change.remove = (step["remove"] as? [String: Any] ?? [:]).mapValues { $0 as? [String] ?? [] }
                change.delete = step["delete"] as? [String] ?? []
                return change
            }
        }
        for (name, value) in root["blobs"] as? [String: String] ?? [:] { blobs[name] = Data(base64Encoded: value) ?? Data() }
    }

    /// The fixture file `name` of the repository's `Fixtures/rhoconnect`.
    public static func named(_ name: String, file: String = #filePath) throws -> Fixture {
        var directory = URL(fileURLWithPath: file)
        while directory.path != "/" {
            directory.deleteLastPathComponent()
            let candidate = directory.appendingPathComponent("Fixtures/rhoconnect/\(name).json")
            if FileManager.default.fileExists(atPath: candidate.path) { return try Fixture(contentsOf: candidate) }
        }
        throw FixtureError("no fixture named \(name)")
    }

    static func objects(_ value: Any?) -> [String: [String: String]] {
        (value as? [String: Any] ?? [:]).mapValues { ($0 as? [String: Any] ?? [:]).mapValues { string($0) } }
    }

    /// A JSON scalar as RhoConnect stores it: a string (write booleans as strings in fixtures).
    static func string(_ value: Any) -> String {
        switch value {
        case let text as String: text
        case let number as NSNumber: number.stringValue
        default: "\(value)"
        }
    }
}

public struct FixtureError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
