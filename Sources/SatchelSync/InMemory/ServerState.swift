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

        /// Where the object's latest write sits in its collection's feed.
        var feedIndex = 0

        /// When attribute `name` was last set.
        func setTime(_ name: String) -> Int64 { setAt[name] ?? version }
    }

    struct Collection: Sendable {
        /// The live objects.
        private(set) var objects: [String: Entry] = [:]
        /// Deleted ids: when, and where their delete sits in the feed.
        private(set) var tombstones: [String: Tombstone] = [:]
        /// Every write, in clock order: the change feed, each item with what the write left
        /// (nil: a delete), so that a pull reads the feed without looking objects up. An item is
        /// stale once a later write of its id follows (its entry is dropped then); stale items
        /// are skipped, and dropped when they outnumber the current ones.
        private(set) var feed: [FeedItem] = []
        private var staleCount = 0

        struct Tombstone: Sendable {
            var clock: Int64
            var feedIndex: Int
        }

        struct FeedItem: Sendable {
            let clock: Int64
            let id: String
            var entry: Entry?
            var isStale = false
        }

        init() {}

        /// A collection holding `objects` and `tombstones` (deleted id → when), its feed rebuilt.
        init(objects: [String: Entry], tombstones: [String: Int64]) {
            var items = objects.map { FeedItem(clock: $0.value.version, id: $0.key, entry: $0.value) }
            items += tombstones.map { FeedItem(clock: $0.value, id: $0.key, entry: nil) }
            feed = items.sorted { $0.clock < $1.clock }
            self.objects = objects
            reindex()
        }

        /// Makes object `id` `entry` (nil: deleted at `clock`, if it existed), recording the
        /// write in the feed. Returns whether anything changed.
        @discardableResult
        mutating func set(_ id: String, _ entry: Entry?, at clock: Int64) -> Bool {
            if var entry {
                if let old = objects[id] {
                    markStale(old.feedIndex)
                } else if let tombstone = tombstones.removeValue(forKey: id) {
                    markStale(tombstone.feedIndex)
                }
                entry.feedIndex = feed.count
                objects[id] = entry
                feed.append(FeedItem(clock: clock, id: id, entry: entry))
            } else {
                guard let old = objects.removeValue(forKey: id) else { return false }
                markStale(old.feedIndex)
                tombstones[id] = Tombstone(clock: clock, feedIndex: feed.count)
                feed.append(FeedItem(clock: clock, id: id, entry: nil))
            }
            if feed.count > 1024 && staleCount > feed.count - staleCount {
                feed.removeAll { $0.isStale }
                reindex()
            }
            return true
        }

        private mutating func markStale(_ index: Int) {
            feed[index].entry = nil
            feed[index].isStale = true
            staleCount += 1
        }

        /// Points every object and tombstone at its place in the feed (which holds no stale item).
        private mutating func reindex() {
            staleCount = 0
            for index in feed.indices {
                let id = feed[index].id
                if feed[index].entry != nil {
                    objects[id]?.feedIndex = index
                    feed[index].entry?.feedIndex = index
                } else {
                    tombstones[id] = Tombstone(clock: feed[index].clock, feedIndex: index)
                }
            }
        }

        /// The index of the first feed item after `clock`.
        func feedIndex(after clock: Int64) -> Int {
            var low = 0, high = feed.count
            while low < high {
                let middle = (low + high) / 2
                if feed[middle].clock <= clock { low = middle + 1 } else { high = middle }
            }
            return low
        }
    }

    /// A result of a push the server reports in a later pull (RhoConnect's links and errors).
    struct Outcome: Sendable {
        var link: (local: String, server: String)?
        var error: RefusedChange?
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
            collection.set(id, nil, at: now)
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
        collection.set(id, entry, at: now)
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
        let collections = JSONObject(
            self.collections.map { name, collection in
                let objects = JSONObject(
                    collection.objects.map { id, entry in
                        var object: JSONObject = ["attributes": .object(entry.attributes), "version": .int(entry.version)]
                        if !entry.setAt.isEmpty { object["setAt"] = .object(Self.clocks(entry.setAt)) }
                        if !entry.removedAt.isEmpty { object["removedAt"] = .object(Self.clocks(entry.removedAt)) }
                        return (id, JSONValue.object(object))
                    })
                return (
                    name,
                    JSONValue.object(["objects": .object(objects), "tombstones": .object(Self.clocks(collection.tombstones.mapValues(\.clock)))])
                )
            })
        let outcomes = JSONObject(
            self.outcomes.map { client, models in
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
        // A member that is there is of its type: one read as empty would lose what it held at
        // the next save (a black-box probe: `"objects":[1,2]` was a collection emptied).
        func members(_ value: JSONValue?, _ what: String) throws -> JSONObject {
            switch value {
            case nil: return JSONObject()
            case .object(let object)?: return object
            default: throw fail("\(what) is not a JSON object")
            }
        }
        for (name, value) in try members(json["collections"], "collections") {
            var objects: [String: Entry] = [:]
            guard case .object = value else { throw fail("collection '\(name)' is not a JSON object") }
            for (id, object) in try members(value["objects"], "the objects of '\(name)'") {
                guard let attributes = object["attributes"]?.objectValue, let version = object["version"]?.intValue else {
                    throw fail("object '\(id)' of '\(name)'")
                }
                let setAt = try Self.clocks(object["setAt"], fail).filter { $0.value != version }
                objects[id] = Entry(attributes: attributes, version: version, setAt: setAt, removedAt: try Self.clocks(object["removedAt"], fail))
            }
            collections[name] = Collection(objects: objects, tombstones: try Self.clocks(value["tombstones"], fail))
        }
        for (token, user) in try members(json["sessions"], "sessions") { sessions[token] = user.stringValue }
        if let list = json["clients"] {
            guard let clients = list.arrayValue, clients.allSatisfy({ $0.stringValue != nil }) else { throw fail("clients is not a list of ids") }
            self.clients = Set(clients.compactMap(\.stringValue))
        }
        for (key, id) in try members(json["creates"], "creates") { creates[key] = id.stringValue }
        for (client, models) in try members(json["outcomes"], "outcomes") {
            for (model, list) in try members(models, "the outcomes of client '\(client)'") {
                outcomes[client, default: [:]][model] = try (list.arrayValue ?? []).map { try Self.outcome($0, model: model, fail) }
            }
        }
        for (url, data) in try members(json["blobs"], "blobs") {
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
            else { throw fail("a refused change") }
            outcome.error = RefusedChange(
                model: model, objectID: id, kind: kind, message: message, code: error["code"]?.stringValue,
                attributes: error["attributes"]?.objectValue ?? JSONObject(), serverCopy: error["server"]?.objectValue)
        }
        return outcome
    }
}
