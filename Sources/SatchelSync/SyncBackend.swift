public import Foundation
public import Satchel

/// A server that Satchel syncs with, through one adapter per kind of server.
///
/// An adapter only translates: it turns the engine's requests into the server's wire format and
/// the server's answers into ``PullPage``s and ``PushResult``s. Everything else — what to push,
/// applying pages atomically with their cursor, ids and associations, errors, retries, resets,
/// notifications — is the ``SyncEngine``'s. Cursors are opaque to the engine: whatever
/// ``JSONValue`` the adapter puts in ``PullPage/nextCursor`` comes back in the next
/// ``PullRequest/cursor``, after a restart too.
///
/// Errors: throw ``SyncError`` — `.network` when no answer came, `.server` with the HTTP status
/// (and ``SyncError/retryAfter`` from `Retry-After`), `.unauthorized` for a 401,
/// `.unknownClient` when the server has forgotten this client, `.protocolViolation` for an
/// answer that does not parse. A record the server refuses is not an error of the call: it is a
/// ``PushOutcome/refused(message:code:serverCopy:)`` result, or a ``PullPage/refusals`` entry.
///
/// ``InMemoryBackend`` is the reference implementation. Every adapter must pass the conformance
/// kit (`Tests/SatchelSyncTesting`).
public protocol SyncBackend: Sendable {
    /// A short name for notifications and logs (`rhoconnect`, `kinto`, `memory`).
    var name: String { get }
    /// What the server can do.
    var capabilities: SyncCapabilities { get }

    /// Logs in; the session returned is stored (not the password, unless the app asked the
    /// adapter to keep it there).
    func logIn(_ credentials: Credentials) async throws -> SyncSession
    /// Logs out of the server (the engine forgets the session whatever happens).
    func logOut(_ session: SyncSession) async throws
    /// Called at the start of every sync cycle: register the client (set
    /// ``SyncSession/clientID`` when it is nil), refresh a token. The session returned replaces
    /// the stored one.
    func prepare(_ session: SyncSession) async throws -> SyncSession
    /// Called at the end of every sync, with no I/O: `session` with what the adapter renewed
    /// during it (a token refreshed after a `401`), stored so that the next process starts from
    /// it rather than from what expired. By default `session` itself.
    func renewedSession(_ session: SyncSession) -> SyncSession
    /// Tells the server to forget this client's sync state (a client reset); returns the session,
    /// without its ``SyncSession/clientID`` when the server no longer has that client.
    func resetClient(_ session: SyncSession) async throws -> SyncSession

    /// Called before a ``SyncEngine/Mode/full`` sync of a model (before its push): a server that
    /// sends a client only what it lacks (RhoConnect) is told to forget what this client has of
    /// the model, so that the pull from no cursor sends everything again.
    func prepareFullPull(_ request: PullRequest) async throws

    /// The associations the server declares for a model without pulling it (Salesforce's
    /// describe: its reference fields), asked before anything is pushed in a sync for models
    /// never pulled that have local creates, so that a new parent's id replaces the local one
    /// in its new children before they go. By default none (the first pull's pages say them).
    func associations(_ request: PullRequest) async throws -> [String: String]

    /// One page of the server's changes after ``PullRequest/cursor``.
    func pull(_ request: PullRequest) async throws -> PullPage
    /// Sends local changes; returns one result per change, for each id of the request.
    func push(_ request: PushRequest) async throws -> [PushResult]

    /// The whole model at once (``SyncType/bulkOnly`` models, full resets). The pages returned
    /// hold upserts only; the engine pulls until ``PullPage/done``.
    func bulkSnapshot(_ request: PullRequest) async throws -> PullPage
    /// Objects the server's own search finds for `query` — parameters whose meaning is the
    /// server's (RhoConnect's `search[name]=value`, given to the source adapter's `search`),
    /// in one page — pulled into the store like a page.
    func search(_ request: PullRequest, query: JSONObject) async throws -> PullPage
    /// A page of the server's objects of the model matching `condition`, from
    /// ``PullRequest/cursor`` (nil: the first page) until ``PullPage/done``, changing nothing on
    /// the server. The adapter sends what its query language can say of the condition (Parse's
    /// `where`, SOQL, Kinto's filters, RhoConnect's search parameters); it may send less — a
    /// part it cannot say is left out, so the server answers more — since the engine keeps only
    /// the objects that match the whole condition under Satchel's semantics. It throws
    /// ``SyncError/Code/notSupported`` only when the server cannot search at all.
    func search(_ request: PullRequest, matching condition: Condition) async throws -> PullPage
    /// A page of every object the server holds for the model, from ``PullRequest/cursor`` (nil:
    /// the first page) until ``PullPage/done``, changing nothing on the server (no client
    /// position moves): what ``SyncEngine/verify(_:)`` compares the store with. By default a
    /// search matching ``Satchel/Condition/all`` when the server searches, else its bulk
    /// snapshot.
    func serverObjects(_ request: PullRequest) async throws -> PullPage
    /// Every id the server holds for the model (for servers that report no deletions).
    func remoteIDs(_ request: PullRequest) async throws -> [String]
    /// A local value as the server keeps it once pushed, for the drift check to compare with
    /// the server's: by default the value itself (servers that keep JSON's types). RhoConnect,
    /// whose values are strings, gives a number's or boolean's text.
    func serverForm(_ value: JSONValue) -> JSONValue
    /// The bytes at `url`, for blob attributes that arrive as URLs.
    func downloadBlob(_ url: String, session: SyncSession) async throws -> Data
}

extension SyncBackend {
    public func prepare(_ session: SyncSession) async throws -> SyncSession { session }
    public func renewedSession(_ session: SyncSession) -> SyncSession { session }
    public func resetClient(_ session: SyncSession) async throws -> SyncSession { session }
    public func prepareFullPull(_ request: PullRequest) async throws {}
    public func associations(_ request: PullRequest) async throws -> [String: String] { [:] }
    public func serverForm(_ value: JSONValue) -> JSONValue { value }
    public func bulkSnapshot(_ request: PullRequest) async throws -> PullPage {
        throw SyncError(.notSupported, "\(name) has no bulk snapshot")
    }
    public func search(_ request: PullRequest, query: JSONObject) async throws -> PullPage {
        throw SyncError(.notSupported, "\(name) has no search of its own")
    }
    public func search(_ request: PullRequest, matching condition: Condition) async throws -> PullPage {
        throw SyncError(.notSupported, "\(name) has no server search")
    }
    public func serverObjects(_ request: PullRequest) async throws -> PullPage {
        if capabilities.search { return try await search(request, matching: .all) }
        if capabilities.bulkSnapshot { return try await bulkSnapshot(request) }
        throw SyncError(.notSupported, "\(name) can list neither a search's objects nor a bulk snapshot")
    }
    public func remoteIDs(_ request: PullRequest) async throws -> [String] {
        throw SyncError(.notSupported, "\(name) cannot list remote ids")
    }
    public func downloadBlob(_ url: String, session: SyncSession) async throws -> Data {
        throw SyncError(.notSupported, "\(name) cannot download blobs")
    }
}

/// What a server can do.
public struct SyncCapabilities: Sendable, Hashable {
    /// How the server reports deleted objects.
    public enum Deletions: Sendable, Hashable {
        /// In pull pages (tombstones, `delete` sections).
        case inPages
        /// Not at all: the engine compares ``SyncBackend/remoteIDs(_:)`` with the store after
        /// each complete pull.
        case byListingIDs
    }

    public var deletions: Deletions
    public var bulkSnapshot: Bool
    public var search: Bool
    /// At most this many changes per push request (nil: no limit).
    public var maxPushBatch: Int?
    /// Whether asking for a pull page changes nothing on the server, so that the engine may ask
    /// for the next page while it applies the last one (each page is still applied in order,
    /// with its cursor). True for servers whose cursor only says where to read on (Kinto,
    /// Parse, Salesforce); false for RhoConnect, whose next query acknowledges the page before
    /// it, which must not happen before that page is stored.
    public var pullsAhead: Bool
    /// Whether the server says what became of a push in later pull pages (links for creates,
    /// errors), not in its answer: RhoConnect. A push whose answer was lost is then not sent
    /// again at once, which would make its creates twice: its changes wait for the model's
    /// next complete pull, where a create's link confirms it; the rest are sent again after it.
    public var pushResultsViaPull: Bool
    /// Whether a server filter may be a SOQL condition (``ModelSyncConfiguration/serverFilter``
    /// `["soql": …]`, from a string `filter`): Salesforce. Another server would read it as a
    /// condition on a field named `soql`, matching nothing: the engine refuses it.
    public var soqlFilters: Bool
    /// Attributes the server sets on every object, which every pull brings whatever a model's
    /// `onlyList` says, and which are kept (Parse's `createdAt` and `updatedAt`). The adapter
    /// never pushes them.
    public var serverAttributes: [String]
    /// Whether ``SyncBackend/search(_:matching:)`` reads as a client other than the device's,
    /// of a server that keeps per client what it has sent and sends each one only what changed
    /// in that (RhoConnect). The objects a search stores are then in none of this device's
    /// later pulls, their deletes included: the engine owes the model a full pull once it has
    /// stored any.
    public var searchesAsAnotherClient: Bool

    public init(
        deletions: Deletions = .inPages, bulkSnapshot: Bool = false, search: Bool = false, maxPushBatch: Int? = nil, pullsAhead: Bool = false,
        pushResultsViaPull: Bool = false, soqlFilters: Bool = false, serverAttributes: [String] = [], searchesAsAnotherClient: Bool = false
    ) {
        self.deletions = deletions
        self.bulkSnapshot = bulkSnapshot
        self.search = search
        self.maxPushBatch = maxPushBatch
        self.pullsAhead = pullsAhead
        self.pushResultsViaPull = pushResultsViaPull
        self.soqlFilters = soqlFilters
        self.serverAttributes = serverAttributes
        self.searchesAsAnotherClient = searchesAsAnotherClient
    }
}

/// A user name and password. Its description never shows the password; the engine never stores
/// it (an adapter's session may, when its app asks: see the Kinto adapter's `remembersPassword`).
public struct Credentials: Sendable, CustomStringConvertible {
    public var user: String
    public var password: String

    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }

    public var description: String { "Credentials(user: \(user), password: ***)" }
}

/// A logged-in session: the user, whatever the adapter needs to prove the login (a cookie, a
/// token), and this device's client id on the server. Stored in the store's `user` partition.
public struct SyncSession: Sendable, Hashable {
    public var user: String
    /// The proof of login, as JSON: forgotten at logout and when the server refuses it (a 401).
    public var data: JSONObject
    /// This device's identity on a server that registers clients (RhoConnect), given by
    /// ``SyncBackend/prepare(_:)``. The engine keeps it across logins of the same user, logouts
    /// and expired sessions, so the server goes on sending this device what changed since its
    /// last sync; it changes only when the server forgets the client (a client reset, an
    /// unknown client) or the store is wiped. nil until the server gives one.
    public var clientID: String?

    public init(user: String, data: JSONObject = JSONObject(), clientID: String? = nil) {
        self.user = user
        self.data = data
        self.clientID = clientID
    }
}

/// What the engine asks of a pull, a bulk snapshot or a search.
public struct PullRequest: Sendable {
    /// The model's definition (name, partition, associations, blob attributes, schema types).
    public var model: ModelDefinition
    /// Where the last page ended (nil: from the start).
    public var cursor: JSONValue?
    /// Objects per page, a hint.
    public var pageSize: Int
    public var session: SyncSession
    /// The app's configuration of the model (server filter, attribute lists, fetch limit and order).
    public var configuration: ModelSyncConfiguration
    /// What the server last said about the model (the last ``PullPage/metadata`` stored), for
    /// an adapter that builds on it (Parse: the wire types of attributes).
    public var metadata: JSONValue?

    public init(
        model: ModelDefinition, cursor: JSONValue?, pageSize: Int, session: SyncSession, configuration: ModelSyncConfiguration,
        metadata: JSONValue? = nil
    ) {
        self.model = model
        self.cursor = cursor
        self.pageSize = pageSize
        self.session = session
        self.configuration = configuration
        self.metadata = metadata
    }
}

/// An object as the server sends it.
public struct ServerObject: Sendable, Hashable {
    public var id: String
    /// The attributes sent. A null removes an attribute.
    public var attributes: JSONObject
    /// True when `attributes` is the whole object (attributes it lacks are removed locally);
    /// false when they are only some attributes to add or overwrite (RhoConnect's `insert`).
    public var isWhole: Bool
    /// The object's version on the server, kept for the next push of a change to it.
    public var version: JSONValue?
    /// Blob attributes whose value is a URL to download (attribute → URL).
    public var blobURLs: [String: String]
    /// Whether the server keeps every value as a string (RhoConnect): a string attribute that is
    /// the JSON text of the value stored here (a number, a boolean, an array or an object this
    /// device wrote, sent as text) is that value, and the stored one is kept with its type.
    public var valuesAsText: Bool

    public init(
        id: String, attributes: JSONObject, isWhole: Bool = true, version: JSONValue? = nil, blobURLs: [String: String] = [:],
        valuesAsText: Bool = false
    ) {
        self.id = id
        self.attributes = attributes
        self.isWhole = isWhole
        self.version = version
        self.blobURLs = blobURLs
        self.valuesAsText = valuesAsText
    }

    /// The object with each string attribute that is the JSON text of `stored`'s value of the
    /// same name (not itself a string) replaced by that value.
    func keepingTypes(of stored: JSONObject) -> ServerObject {
        var kept = self
        for (name, value) in attributes {
            guard case .string(let text) = value, let local = stored[name] else { continue }
            switch local {
            case .string, .null: continue
            default: if text.utf8.elementsEqual(local.jsonBytes) { kept.attributes[name] = local }
            }
        }
        return kept
    }
}

/// One page of the server's changes: objects created or changed, attributes removed, objects
/// deleted, where the next page starts, and whether this is the last. The rest is said when a
/// server has it: ids given to this client's creates, refusals, the model's total, what the
/// server declares of the model's schema (``Schema``), and a few signals of single servers.
public struct PullPage: Sendable {
    /// What the server's answer declares of the model's schema. The engine adds it to the
    /// model's definition before applying the page.
    public struct Schema: Sendable, Hashable {
        /// Associations the server's objects showed (attribute → the model it refers to: Parse's
        /// `Pointer`s, Salesforce's references): references are rewritten when the server
        /// renames an object, parents sync first, and `find(_:including:)` resolves them.
        public var associations: [String: String]
        /// Attributes that hold files (Parse's `File`, Salesforce's `base64`, Kinto's attachment):
        /// added to the model's blob attributes.
        public var blobAttributes: [String]
        /// The values the server allows for attributes (Salesforce's picklists, dependent ones
        /// included): set on the model, so that a local write of a value the server would refuse
        /// is refused at once.
        public var choices: [String: AttributeChoices]
        /// The types of the model's attributes as the server declares them (Salesforce's
        /// describe): when set, the model becomes fixed-schema with these types — plus its
        /// device-only attributes, of any type — so a local write the server would refuse is
        /// refused before it is queued.
        public var attributeTypes: [String: AttributeType]?
        /// Attributes the server showed as associations before and now sends plain (a Parse
        /// field whose type its admin changed): no longer associations of the model.
        public var associationsGone: [String]

        public init(
            associations: [String: String] = [:], blobAttributes: [String] = [], choices: [String: AttributeChoices] = [:],
            attributeTypes: [String: AttributeType]? = nil, associationsGone: [String] = []
        ) {
            self.associations = associations
            self.blobAttributes = blobAttributes
            self.choices = choices
            self.attributeTypes = attributeTypes
            self.associationsGone = associationsGone
        }

        /// Whether it declares nothing.
        public var isEmpty: Bool {
            associations.isEmpty && blobAttributes.isEmpty && choices.isEmpty && attributeTypes == nil && associationsGone.isEmpty
        }
    }

    // The page's objects.

    /// Objects created or changed.
    public var upserts: [ServerObject]
    /// Attributes removed: object id → attribute names. An object left with none is deleted; so
    /// is one all of whose attributes are listed (a delete, with what that means for an object
    /// changed here).
    public var removals: [String: [String]]
    /// Objects deleted whole.
    public var deletes: [String]
    /// Objects of other models that came with this page's objects (Parse's `include`d
    /// pointers, decomposed): model → objects, applied like upserts of those models after the
    /// page.
    public var related: [String: [ServerObject]]

    // Where it stands.

    /// Where the next page starts; stored with this page.
    public var nextCursor: JSONValue?
    /// Whether this is the last page for now.
    public var done: Bool
    /// The number of objects the server holds for the model, when it says.
    public var totalCount: Int?

    // What the server says besides.

    /// Ids the server gave objects this client created: local id → server id (RhoConnect's
    /// links, for servers that answer a create later).
    public var links: [String: String]
    /// Changes the server refused, reported in a page (``Satchel/RefusedChange`` with the
    /// object's id, the kind, the server's message and code, its copy of the object when it sent
    /// one, and the attributes pushed when it echoes them — left empty, the engine fills in what
    /// it sent).
    public var refusals: [RefusedChange]
    /// What the answer declares of the model's schema.
    public var schema: Schema
    /// What the server says about the model (RhoConnect's source `metadata`, Parse's wire
    /// types), stored with the page; see ``SyncEngine/serverMetadata(_:)``. It comes back in
    /// later requests (``PullRequest/metadata``, ``PushRequest/metadata``).
    public var metadata: JSONValue?
    /// An error of the server's source as a whole (RhoConnect's `source-error`): reported, the
    /// page is still applied.
    public var sourceError: String?
    /// The server's schema changed (RhoConnect's `schema-changed`): the engine stores the
    /// cursor, stops syncing and reports it.
    public var schemaChanged: Bool
    /// The server cannot say which objects were deleted since the cursor (Salesforce's
    /// `getDeleted` window has passed): after the pull, the engine lists the ids the server
    /// holds (``SyncBackend/remoteIDs(_:)``) and deletes the others, as for servers that report
    /// no deletions.
    public var reconcileIDs: Bool

    public init(
        upserts: [ServerObject] = [], removals: [String: [String]] = [:], deletes: [String] = [], related: [String: [ServerObject]] = [:],
        nextCursor: JSONValue? = nil, done: Bool = true, totalCount: Int? = nil, links: [String: String] = [:], refusals: [RefusedChange] = [],
        schema: Schema = Schema(), metadata: JSONValue? = nil, sourceError: String? = nil, schemaChanged: Bool = false, reconcileIDs: Bool = false
    ) {
        self.upserts = upserts
        self.removals = removals
        self.deletes = deletes
        self.related = related
        self.nextCursor = nextCursor
        self.done = done
        self.totalCount = totalCount
        self.links = links
        self.refusals = refusals
        self.schema = schema
        self.metadata = metadata
        self.sourceError = sourceError
        self.schemaChanged = schemaChanged
        self.reconcileIDs = reconcileIDs
    }

    /// Objects in the page (upserts, deletes, and objects with removals), for progress counts.
    public var count: Int { upserts.count + deletes.count + removals.count }

    @available(*, deprecated, renamed: "refusals")
    public var errors: [RefusedChange] {
        get { refusals }
        set { refusals = newValue }
    }
    @available(*, deprecated, renamed: "schema.associations")
    public var associations: [String: String] {
        get { schema.associations }
        set { schema.associations = newValue }
    }
    @available(*, deprecated, renamed: "schema.blobAttributes")
    public var blobAttributes: [String] {
        get { schema.blobAttributes }
        set { schema.blobAttributes = newValue }
    }
    @available(*, deprecated, renamed: "schema.choices")
    public var choices: [String: AttributeChoices] {
        get { schema.choices }
        set { schema.choices = newValue }
    }
    @available(*, deprecated, renamed: "schema.attributeTypes")
    public var attributeTypes: [String: AttributeType]? {
        get { schema.attributeTypes }
        set { schema.attributeTypes = newValue }
    }
}

/// A local change on its way to the server.
public struct OutgoingChange: Sendable, Hashable {
    /// The changed object's id.
    public var objectID: String
    public var kind: PendingChange.Kind
    /// For a create, every attribute; for an update, the changed attributes (null: removed);
    /// for a delete, the object's last attributes. Device-only and ignored attributes are left
    /// out.
    public var attributes: JSONObject
    /// The object's version on the server the change was made from (nil when unknown).
    public var baseVersion: JSONValue?
    /// The bytes of blob attributes among `attributes` (attribute → file contents).
    public var blobs: [String: Data]
    /// For an update, the whole object after the change, as it travels (device-only and ignored
    /// attributes left out): for servers that can remove an attribute only by replacing the
    /// object (Kinto). nil for creates and deletes.
    public var object: JSONObject?
    /// What an earlier push of this change, whose answer was lost, sent for attributes edited
    /// here since (``PendingChange/sentValues``): the server may hold them as this device's own.
    /// For a create, every attribute that push sent: a create with sent values may have made its
    /// object on the server already (and another device may have deleted it since).
    public var sentValues: JSONObject

    /// For a create sent again after its answer was lost: the attributes that push sent which
    /// are gone here now (removed since), to be removed on the server too.
    public var removedSinceSent: [String] { kind == .create ? sentValues.keys.filter { attributes[$0] == nil } : [] }

    /// Whether this deletes an object whose create was sent and its answer lost: it never had a
    /// server version, and carries what the create sent. The create may have made the object
    /// under an id this device does not know, so a delete of the local id would miss it.
    public var deletesALostCreate: Bool { kind == .delete && baseVersion == nil && !sentValues.isEmpty }

    /// Whether this is a create that may have been sent before, and so may have made its object
    /// already: one sent again after its answer was lost (or the sync's retry of its push, or a
    /// push the app was stopped in) carries what it sent. One never sent is made anew, whatever
    /// object on the server holds its values. (A create with nothing to send cannot tell: it may.)
    public var mayHaveBeenSent: Bool { kind == .create && (!sentValues.isEmpty || attributes.isEmpty) }

    public init(
        objectID: String, kind: PendingChange.Kind, attributes: JSONObject, baseVersion: JSONValue? = nil, blobs: [String: Data] = [:],
        object: JSONObject? = nil, sentValues: JSONObject = JSONObject()
    ) {
        self.objectID = objectID
        self.kind = kind
        self.attributes = attributes
        self.baseVersion = baseVersion
        self.blobs = blobs
        self.object = object
        self.sentValues = sentValues
    }

    @available(*, deprecated, renamed: "objectID")
    public var id: String { objectID }

    @available(*, deprecated, renamed: "init(objectID:kind:attributes:baseVersion:blobs:object:)")
    public init(
        id: String, kind: PendingChange.Kind, attributes: JSONObject, baseVersion: JSONValue? = nil, blobs: [String: Data] = [:],
        object: JSONObject? = nil
    ) {
        self.init(objectID: id, kind: kind, attributes: attributes, baseVersion: baseVersion, blobs: blobs, object: object)
    }
}

/// What the engine asks of a push.
public struct PushRequest: Sendable {
    public var model: ModelDefinition
    public var changes: [OutgoingChange]
    public var session: SyncSession
    public var configuration: ModelSyncConfiguration
    /// What the server last said about the model (the last ``PullPage/metadata`` stored).
    public var metadata: JSONValue?
    /// Where the model's next pull starts (the last ``PullPage/nextCursor`` stored; nil before the
    /// first): what this device has seen of the server.
    public var cursor: JSONValue?

    public init(
        model: ModelDefinition, changes: [OutgoingChange], session: SyncSession, configuration: ModelSyncConfiguration, metadata: JSONValue? = nil,
        cursor: JSONValue? = nil
    ) {
        self.model = model
        self.changes = changes
        self.session = session
        self.configuration = configuration
        self.cursor = cursor
        self.metadata = metadata
    }
}

/// What became of one pushed change.
public enum PushOutcome: Sendable, Hashable {
    /// Done. A create may come back with the server's id for the object; any change with the
    /// object's new version.
    case accepted(serverID: String? = nil, version: JSONValue? = nil)
    /// Received; the outcome comes later, in a pull page (a link, or an error). For a delete:
    /// done once the model's next pull is complete.
    case awaitingLink
    /// Refused: kept as a refused change, with the server's copy when it sent one.
    case refused(message: String, code: String? = nil, serverCopy: JSONObject? = nil)
    /// Refused because the object changed on the server since the change's base version (a
    /// version check: Kinto's `412`), with the server's object and its version. For an update,
    /// the engine merges changes to different attributes and sends the change again, asks the
    /// model's ``ConflictResolver`` about a true conflict, or keeps it as a refused change
    /// (``refused(message:code:serverCopy:)``) with `code`. A delete goes again on the server's
    /// version when the server's object is as this device last had it or as a push of its own
    /// (whose answer was lost) left it; otherwise it is kept as a refused change too.
    case conflict(message: String, code: String? = nil, serverCopy: JSONObject, serverVersion: JSONValue?)
    /// The object does not exist on the server: a delete is then done; an update or create is
    /// kept as a refused change, with the server's own message and code when it gave them
    /// (Parse's `101`, Salesforce's `ENTITY_IS_DELETED`; else "the object does not exist on the
    /// server" and `404`).
    case notFound(message: String? = nil, code: String? = nil)
    /// Not now: the change stays pending for the next cycle.
    case retryLater(message: String)
    /// Sent, but no answer came (the connection dropped, the server failed mid-way): the server
    /// may have carried it out. For an adapter that sends changes in several requests (Parse's
    /// creates) and has the other results: the change stays in flight and is sent again by the
    /// next sync, and this sync fails with the error once the other results are applied —
    /// before anything is pulled, since a pull could bring what the change made as an object
    /// of its own. An adapter with one request for the whole push throws instead.
    case unanswered(SyncError)
}

extension PushOutcome {
    /// A create sent again after its answer was lost (``OutgoingChange/sentValues``) that had
    /// made its object, which another device deleted since: made again, it would undo that
    /// delete. Kept as a refused create, deleted on the server, for the app to resolve with
    /// `delete` or `recreate`.
    public static let deletedSinceCreated = PushOutcome.notFound(
        message: "an earlier push of this create, whose answer was lost, made the object, and another device deleted it since: "
            + "resolve with delete, or recreate to make it again", code: "404")
}

/// The result of one change of a push, by the change's id.
public struct PushResult: Sendable, Hashable {
    /// The id of the object whose change this is the result of.
    public var objectID: String
    public var outcome: PushOutcome

    public init(objectID: String, outcome: PushOutcome) {
        self.objectID = objectID
        self.outcome = outcome
    }

    @available(*, deprecated, renamed: "objectID")
    public var id: String { objectID }

    @available(*, deprecated, renamed: "init(objectID:outcome:)")
    public init(id: String, outcome: PushOutcome) { self.init(objectID: id, outcome: outcome) }
}
