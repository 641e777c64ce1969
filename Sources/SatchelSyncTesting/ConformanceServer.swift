public import Foundation
public import Satchel
public import SatchelSync

/// A server the conformance kit drives: an adapter pointed at it, and a way to act on the
/// server as another client (or its administrator) would.
///
/// Each scenario gets a fresh server from ``ConformanceHarness/makeServer()``: an empty one, or an
/// isolated part of a shared one (a Kinto bucket, a RhoConnect user). Scenarios run in parallel.
public protocol ConformanceServer: Sendable {
    /// The adapter under test, pointed at this server.
    var backend: any SyncBackend { get }
    /// Credentials the server accepts.
    var credentials: Credentials { get }
    /// Whether the server refuses an update or delete made from an older version than its own
    /// (Kinto's 412); otherwise concurrent changes to different attributes merge.
    var detectsConflicts: Bool { get }
    /// Whether every value travels as a string (RhoConnect): the kit's models are then
    /// fixed-schema with typed attributes, so numbers come back as numbers, and ``objects(_:)``
    /// gives values of those types.
    var valuesAreStrings: Bool { get }

    /// Creates an object on the server (with id `id`, or one the server picks when nil);
    /// returns its id.
    func put(_ model: String, _ attributes: JSONObject, id: String?) async throws -> String
    /// Changes attributes of an object on the server (null removes one).
    func update(_ model: String, _ id: String, _ changes: JSONObject) async throws
    /// Deletes an object on the server.
    func delete(_ model: String, _ id: String) async throws
    /// The server's objects of `model`, by id, as a client would store them.
    func objects(_ model: String) async throws -> [String: JSONObject]
    /// Credentials of a second user of the server.
    var otherCredentials: Credentials { get }
    /// The server's objects of `model` that `user` syncs, by id, as a client would store them
    /// (by default ``objects(_:)``: every user sees the same data).
    func objects(_ model: String, of user: Credentials) async throws -> [String: JSONObject]
    /// Object `id` of `model` exactly as the server keeps it, read from the server's own data
    /// and not through the adapter: attribute names as stored there, a `null` kept as a `null`
    /// (nil: no such object). What any other client of the server would read.
    func storedObject(_ model: String, _ id: String) async throws -> JSONObject?
    /// How many clients the server has registered (nil: the server registers none).
    func clientCount() async throws -> Int?
    /// Makes the server refuse pushed changes of `kind` to object `id` of `model` (by a
    /// validation rule, a conflict — however the server can), until ``allowAll()``.
    func refuse(_ kind: PendingChange.Kind, model: String, id: String) async throws
    /// Makes the server refuse pushed changes of `kind` to object `id` of `model`, whose change
    /// carries `attributes`: a server that assigns the ids of created objects (Parse) never
    /// sees the client's id of a create, and refuses it by what it carries. By default
    /// ``refuse(_:model:id:)``.
    func refuse(_ kind: PendingChange.Kind, model: String, id: String, carrying attributes: JSONObject) async throws
    /// Attributes the server adds to every object (Parse's `createdAt` and `updatedAt`):
    /// ``objects(_:)`` includes them as a client stores them, and the kit's comparisons of whole
    /// objects leave them out. By default none.
    var serverAttributes: Set<String> { get }
    /// Fields the server keeps on every object of its own accord, as ``storedObject(_:_:)``
    /// shows them (Parse's `objectId`, `createdAt` and `updatedAt`; Salesforce's `Id` and system
    /// fields): every other stored field must be one the app wrote. By default
    /// ``serverAttributes``.
    var storedServerFields: Set<String> { get }
    /// Stops refusing changes.
    func allowAll() async throws
    /// Releases the server (or its part).
    func shutdown() async throws

    /// Puts `data` on the server as blob attribute `attribute` of object `id` of `model`, which
    /// exists there, as another client would (nil: removes the blob), for
    /// ``SyncConformance/blobScenarios``. By default it throws ``SyncError/Code/notSupported``.
    func putBlob(_ model: String, _ id: String, _ attribute: String, _ data: Data?) async throws
    /// The bytes the server keeps for blob attribute `attribute` of object `id` of `model`, read
    /// from the server's own storage and not through the adapter (nil: the object has none, or
    /// there is no such object). By default it throws ``SyncError/Code/notSupported``.
    func blob(_ model: String, _ id: String, _ attribute: String) async throws -> Data?
}

extension ConformanceServer {
    public var valuesAreStrings: Bool { false }
    public var serverAttributes: Set<String> { [] }
    public var storedServerFields: Set<String> { serverAttributes }

    public func refuse(_ kind: PendingChange.Kind, model: String, id: String, carrying attributes: JSONObject) async throws {
        try await refuse(kind, model: model, id: id)
    }

    public func objects(_ model: String, of user: Credentials) async throws -> [String: JSONObject] { try await objects(model) }

    public func putBlob(_ model: String, _ id: String, _ attribute: String, _ data: Data?) async throws {
        throw SyncError(.notSupported, "this conformance server cannot put blobs")
    }

    public func blob(_ model: String, _ id: String, _ attribute: String) async throws -> Data? {
        throw SyncError(.notSupported, "this conformance server cannot read blobs")
    }
}

/// Makes servers for the conformance kit.
public protocol ConformanceHarness: Sendable {
    func makeServer() async throws -> any ConformanceServer
}
