import Foundation
import ParseTestServer
import Satchel
import SatchelParse
import SatchelSync
import SatchelSyncTesting

/// The loopback Parse Server as a conformance server: one server per scenario.
struct ParseHarness: ConformanceHarness {
    /// Idempotency on, as a server that wants request ids to protect creates runs it.
    var fixture: ParseFixture = {
        var fixture = ParseFixture()
        fixture.idempotency = ParseFixture.Idempotency()
        return fixture
    }()

    func makeServer() async throws -> any ConformanceServer {
        ParseConformanceServer(server: try await ParseServer.start(fixture))
    }
}

struct ParseConformanceServer: ConformanceServer {
    let server: ParseServer

    var backend: any SyncBackend { ParseBackend.forTests(server) }
    var credentials: Credentials { Credentials(user: "ann", password: "secret") }
    var otherCredentials: Credentials { Credentials(user: "bob", password: "secret") }
    /// Parse keeps the last write of each field.
    var detectsConflicts: Bool { false }
    var serverAttributes: Set<String> { ["createdAt", "updatedAt"] }
    var storedServerFields: Set<String> { ["objectId", "createdAt", "updatedAt"] }

    func put(_ model: String, _ attributes: JSONObject, id: String?) async throws -> String {
        await server.put(model, Data(attributes.jsonBytes), id: id)
    }

    /// A null removes the field (`{"__op":"Delete"}`).
    func update(_ model: String, _ id: String, _ changes: JSONObject) async throws {
        let body = JSONObject(changes.map { name, value in (name, value.isNull ? ["__op": "Delete"] : value) })
        await server.update(model, id, Data(body.jsonBytes))
    }

    func delete(_ model: String, _ id: String) async throws { await server.delete(model, id) }

    /// The server's objects as the adapter stores them: read through ``ParseWire`` from the
    /// server's own data.
    func objects(_ model: String) async throws -> [String: JSONObject] {
        try await server.objects(model).mapValues { try ParseWire.local(JSONObject(parsing: $0)) }
    }

    func storedObject(_ model: String, _ id: String) async throws -> JSONObject? {
        try await server.objects(model)[id].map { try JSONObject(parsing: $0) }
    }

    /// Parse registers no clients.
    func clientCount() async throws -> Int? { nil }

    func refuse(_ kind: PendingChange.Kind, model: String, id: String) async throws {
        await server.addRule(ParseFixture.Rule(className: model, operation: kind.rawValue, ids: [id], message: "refused for the test"))
    }

    /// A create carries no id of the client's: it is refused by what it carries.
    func refuse(_ kind: PendingChange.Kind, model: String, id: String, carrying attributes: JSONObject) async throws {
        guard kind == .create else { return try await refuse(kind, model: model, id: id) }
        await server.addRule(
            ParseFixture.Rule(className: model, operation: "create", matching: Data(attributes.jsonBytes), message: "refused for the test"))
    }

    func allowAll() async throws { await server.clearRules() }
    func shutdown() async throws { await server.stop() }
}

/// How an object the server holds reads on a device, written from the REST format (not from
/// the adapter's code): `objectId` dropped, dates as their `iso`,
/// pointers as their `objectId`, files as their `url`, other values as they are.
enum ParseWire {
    static func local(_ object: JSONObject) -> JSONObject {
        JSONObject(
            object.compactMap { name, value -> (String, JSONValue)? in
                if name == "objectId" || value.isNull { return nil }
                return (name, local(value))
            })
    }

    static func local(_ value: JSONValue) -> JSONValue {
        switch value["__type"]?.stringValue {
        case "Date": return value["iso"] ?? value
        case "Pointer", "Object": return value["objectId"] ?? value
        case "File": return value["url"] ?? value
        default:
            if case .array(let elements) = value, elements.allSatisfy({ ["Pointer", "Object"].contains($0["__type"]?.stringValue) }),
                !elements.isEmpty
            {
                return .array(elements.map { $0["objectId"] ?? $0 })
            }
            return value
        }
    }
}

extension ParseBackend {
    /// An adapter for a test server. Its idle timeout (60 s) outlasts a stall of the loopback
    /// server while other tests compute beside it.
    static func forTests(_ server: ParseServer, batchSize: Int = 50) -> ParseBackend {
        ParseBackend(
            configuration: Configuration(url: server.url, applicationID: server.appID, restKey: server.restKey, batchSize: batchSize, timeout: 60))
    }
}
