import Foundation
import Satchel

/// What an ``InMemoryBackend`` holds: the server's objects with per-attribute versions and
/// tombstones, its users' sessions and clients, and the outcomes it still owes clients. Plain
/// data, saved to and loaded from JSON (`satchel sync --backend memory --url FILE`).
struct ServerState: Sendable {
    /// One object on the server.
    struct Entry: Sendable {
        var attributes: JSONObject
        /// The clock when the object last changed: its version, and its place in the change feed.
        var version: Int64
        /// The clock when each attribute set before ``version`` was last set (the others were set
        /// at ``version``: usually all of them), and when each removed one went.
        var setAt: [String: Int64] = [:]
        var removedAt: [String: Int64] = [:]

        /// When attribute `name` was last set.
        func setTime(_ name: String) -> Int64 { setAt[name] ?? version }
    }

    struct Collection: Sendable {
        var objects: [String: Entry] = [:]
        /// Deleted ids and when.
        var tombstones: [String: Int64] = [:]
        /// Every write, in clock order: the change feed. An entry is current while its clock is
        /// the object's version (or its tombstone's); older ones are skipped, and dropped when
        /// they outnumber the current ones.
        var feed: [(clock: Int64, id: String)] = []

        /// Whether a feed entry is the object's latest write.
        func isCurrent(_ item: (clock: Int64, id: String)) -> Bool {
            objects[item.id]?.version == item.clock || tombstones[item.id] == item.clock
        }

        /// Appends a write to the feed, compacting it when mostly stale.
        mutating func record(_ clock: Int64, _ id: String) {
            feed.append((clock, id))
            let current = objects.count + tombstones.count
            if feed.count > 1024 && feed.count > 2 * current {
                let (objects, tombstones) = (self.objects, self.tombstones)
                feed.removeAll { objects[$0.id]?.version != $0.clock && tombstones[$0.id] != $0.clock }
            }
        }

        /// The index of the first feed entry after `clock`.
        func feedIndex(after clock: Int64) -> Int {
            var low = 0, high = feed.count
            while low < high {
                let middle = (low + high) / 2
                if feed[middle].clock <= clock { low = middle + 1 } else { high = middle }
            }
            return low
        }

        /// Rebuilds the feed from the objects and tombstones (after loading).
        mutating func rebuildFeed() {
            feed = (objects.map { ($0.value.version, $0.key) } + tombstones.map { ($0.value, $0.key) }).sorted { $0.0 < $1.0 }
        }
    }

    /// A result of a push the server reports in a later pull (RhoConnect's links and errors).
    struct Outcome: Sendable {
        var link: (local: String, server: String)?
        var error: RecordError?
        /// The pull page that carried it, until the client acknowledges the page.
        var page: Int64?
    }

    var collections: [String: Collection] = [:]
    /// Moves on with every change; versions and cursors are its readings.
    var clock: Int64 = 0
    var nextID = 1
    /// Session token → user.
    var sessions: [String: String] = [:]
    var clients: Set<String> = []
    /// (client, model, local id) → the server id its create made: a create sent again (its answer
    /// was lost) makes no second object.
    var creates: [String: String] = [:]
    /// Client → model → outcomes not yet acknowledged.
    var outcomes: [String: [String: [Outcome]]] = [:]
    /// URL → bytes.
    var blobs: [String: Data] = [:]

    mutating func tick() -> Int64 {
        clock += 1
        return clock
    }

    mutating func newID(_ prefix: String) -> String {
        defer { nextID += 1 }
        return "\(prefix)\(nextID)"
    }

    static func createKey(client: String, model: String, id: String) -> String { "\(client)\u{1}\(model)\u{1}\(id)" }

    /// Writes object `id` of `model` whole (nil or no attributes: deletes it), under the null rule,
    /// recording which attributes changed when. Returns the object's new version (nil: deleted).
    @discardableResult
    mutating func write(_ model: String, _ id: String, _ attributes: JSONObject?) -> Int64? {
        let kept = (attributes ?? JSONObject()).filter { name, value in !value.isNull && name != Object.idAttribute }
        let now = tick()
        // Taken out of the dictionary while changed, so the change does not copy it.
        var collection = collections.removeValue(forKey: model) ?? Collection()
        defer { collections[model] = collection }
        guard !kept.isEmpty else {
            if collection.objects.removeValue(forKey: id) != nil {
                collection.tombstones[id] = now
                collection.record(now, id)
            }
            return nil
        }
        var entry = collection.objects[id] ?? Entry(attributes: JSONObject(), version: now)
        var setAt: [String: Int64] = [:]
        for (name, value) in kept {
            if entry.attributes[name] == value {
                setAt[name] = entry.setTime(name)  // unchanged: set when it was
            } else {
                entry.removedAt[name] = nil  // set now, at the new version
            }
        }
        for (name, _) in entry.attributes where kept[name] == nil { entry.removedAt[name] = now }
        entry.setAt = setAt
        entry.attributes = kept
        entry.version = now
        collection.objects[id] = entry
        collection.tombstones[id] = nil
        collection.record(now, id)
        return now
    }

    /// Merges `changes` into object `id` (null removes an attribute). Returns the new version
    /// (nil: the object is gone, or was never there).
    @discardableResult
    mutating func merge(_ model: String, _ id: String, _ changes: JSONObject) -> Int64? {
        guard var attributes = collections[model]?.objects[id]?.attributes else { return nil }
        for (name, value) in changes where name != Object.idAttribute { attributes[name] = value.isNull ? nil : value }
        return write(model, id, attributes)
    }

    // MARK: - JSON

    /// The state as JSON: `{"format":"satchel-memory-server 2","clock":…,"collections":{model:
    /// {"objects":{id:{"attributes":{…},"version":v,"setAt":{…}?,"removedAt":{…}?}},
    /// "tombstones":{id:clock}}},…}`, where `setAt` lists only the attributes set before the
    /// object's version (the others were set at it). Objects are built in one pass and sorted
    /// once (a ``JSONObject`` keeps its members sorted: inserting them one by one is quadratic).
    var json: JSONObject {
        let collections = JSONObject(self.collections.map { name, collection in
            let objects = JSONObject(collection.objects.map { id, entry in
                var object: JSONObject = ["attributes": .object(entry.attributes), "version": .int(entry.version)]
                if !entry.setAt.isEmpty { object["setAt"] = .object(Self.clocks(entry.setAt)) }
                if !entry.removedAt.isEmpty { object["removedAt"] = .object(Self.clocks(entry.removedAt)) }
                return (id, JSONValue.object(object))
            })
            return (name, JSONValue.object(["objects": .object(objects), "tombstones": .object(Self.clocks(collection.tombstones))]))
        })
        let outcomes = JSONObject(self.outcomes.map { client, models in
            (client, JSONValue.object(JSONObject(models.map { model, list in (model, JSONValue.array(list.map { .object(Self.json($0)) })) })))
        })
        return [
            "format": "satchel-memory-server 2", "clock": .int(clock), "nextID": .int(Int64(nextID)),
            "collections": .object(collections),
            "sessions": .object(JSONObject(sessions.map { ($0.key, JSONValue.string($0.value)) })),
            "clients": .array(clients.sorted().map { .string($0) }),
            "creates": .object(JSONObject(creates.map { ($0.key, JSONValue.string($0.value)) })),
            "outcomes": .object(outcomes),
            "blobs": .object(JSONObject(blobs.map { ($0.key, JSONValue.string($0.value.base64EncodedString())) })),
        ]
    }

    init() {}

    /// Reads what ``json`` wrote.
    ///
    /// - Throws: ``SyncError`` `.protocolViolation` naming what is malformed.
    init(json: JSONObject) throws {
        func fail(_ what: String) -> SyncError { SyncError(.protocolViolation, "the in-memory server's state is malformed: \(what)") }
        // Format 1 listed every attribute in `setAt`; format 2 only those set before the version.
        guard let format = json["format"]?.stringValue, ["satchel-memory-server 1", "satchel-memory-server 2"].contains(format) else {
            throw fail("not a saved in-memory server")
        }
        guard let clock = json["clock"]?.intValue, let nextID = json["nextID"]?.intValue else { throw fail("clock") }
        self.clock = clock
        self.nextID = Int(nextID)
        for (name, value) in json["collections"]?.objectValue ?? JSONObject() {
            var collection = Collection()
            for (id, object) in value["objects"]?.objectValue ?? JSONObject() {
                guard let attributes = object["attributes"]?.objectValue, let version = object["version"]?.intValue else {
                    throw fail("object '\(id)' of '\(name)'")
                }
                let setAt = try Self.clocks(object["setAt"], fail).filter { $0.value != version }
                collection.objects[id] = Entry(
                    attributes: attributes, version: version, setAt: setAt, removedAt: try Self.clocks(object["removedAt"], fail))
            }
            collection.tombstones = try Self.clocks(value["tombstones"], fail)
            collection.rebuildFeed()
            collections[name] = collection
        }
        for (token, user) in json["sessions"]?.objectValue ?? JSONObject() { sessions[token] = user.stringValue }
        clients = Set((json["clients"]?.arrayValue ?? []).compactMap(\.stringValue))
        for (key, id) in json["creates"]?.objectValue ?? JSONObject() { creates[key] = id.stringValue }
        for (client, models) in json["outcomes"]?.objectValue ?? JSONObject() {
            for (model, list) in models.objectValue ?? JSONObject() {
                outcomes[client, default: [:]][model] = try (list.arrayValue ?? []).map { try Self.outcome($0, model: model, fail) }
            }
        }
        for (url, data) in json["blobs"]?.objectValue ?? JSONObject() {
            guard let data = data.stringValue.flatMap({ Data(base64Encoded: $0) }) else { throw fail("blob '\(url)'") }
            blobs[url] = data
        }
    }

    private static func clocks(_ values: [String: Int64]) -> JSONObject {
        JSONObject(values.lazy.map { ($0.key, JSONValue.int($0.value)) })
    }

    private static func clocks(_ value: JSONValue?, _ fail: (String) -> SyncError) throws -> [String: Int64] {
        var result: [String: Int64] = [:]
        for (name, clock) in value?.objectValue ?? JSONObject() {
            guard let clock = clock.intValue else { throw fail("clock of '\(name)'") }
            result[name] = clock
        }
        return result
    }

    private static func json(_ outcome: Outcome) -> JSONObject {
        var json = JSONObject()
        if let link = outcome.link { json["link"] = .array([.string(link.local), .string(link.server)]) }
        if let error = outcome.error {
            var e: JSONObject = ["id": .string(error.objectID), "kind": .string(error.kind.rawValue), "message": .string(error.message)]
            if let code = error.code { e["code"] = .string(code) }
            if let server = error.serverCopy { e["server"] = .object(server) }
            if !error.attributes.isEmpty { e["attributes"] = .object(error.attributes) }
            json["error"] = .object(e)
        }
        if let page = outcome.page { json["page"] = .int(page) }
        return json
    }

    private static func outcome(_ value: JSONValue, model: String, _ fail: (String) -> SyncError) throws -> Outcome {
        var outcome = Outcome(page: value["page"]?.intValue)
        if let link = value["link"]?.arrayValue {
            guard link.count == 2, let local = link[0].stringValue, let server = link[1].stringValue else { throw fail("a link") }
            outcome.link = (local, server)
        }
        if let error = value["error"] {
            guard let id = error["id"]?.stringValue, let kind = error["kind"]?.stringValue.flatMap(PendingChange.Kind.init(rawValue:)),
                let message = error["message"]?.stringValue
            else { throw fail("a record error") }
            outcome.error = RecordError(
                model: model, objectID: id, kind: kind, message: message, code: error["code"]?.stringValue,
                attributes: error["attributes"]?.objectValue ?? JSONObject(), serverCopy: error["server"]?.objectValue)
        }
        return outcome
    }
}
