import Foundation
import RhoConnectTestServer
import Satchel
import SatchelRhoConnect
import SatchelSync
import SatchelSyncTesting

/// The loopback RhoConnect server as a conformance server: one server per scenario, user `ann`.
struct RhoConnectHarness: ConformanceHarness {
    var fixture = Fixture()

    func makeServer() async throws -> any ConformanceServer {
        RhoConnectConformanceServer(server: try await RhoConnectServer.start(fixture))
    }
}

struct RhoConnectConformanceServer: ConformanceServer {
    let server: RhoConnectServer
    let user = "ann"

    var backend: any SyncBackend { RhoConnectBackend.forTests(server) }
    var credentials: Credentials { Credentials(user: user, password: "secret") }
    var detectsConflicts: Bool { false }
    var valuesAreStrings: Bool { true }

    func put(_ model: String, _ attributes: JSONObject, id: String?) async throws -> String {
        let id = id ?? "srv-\(UUID().uuidString.prefix(8))"
        await server.put(model, user: user, id: id, attributes.reduce(into: [:]) { $0[$1.key] = Self.wire($1.value) })
        return id
    }

    func update(_ model: String, _ id: String, _ changes: JSONObject) async throws {
        await server.update(
            model, user: user, id: id, changes.reduce(into: [:]) { $0[$1.key] = $1.value.isNull ? String?.none : Self.wire($1.value) })
    }

    func delete(_ model: String, _ id: String) async throws { await server.delete(model, user: user, id: id) }

    /// The server's objects, typed as the kit's fixed-schema models read them.
    func objects(_ model: String) async throws -> [String: JSONObject] { try await objects(model, of: credentials) }

    var otherCredentials: Credentials { Credentials(user: "bob", password: "secret") }

    /// Each user has data of their own.
    func objects(_ model: String, of user: Credentials) async throws -> [String: JSONObject] {
        let types = SyncConformance.schemas[model] ?? [:]
        return await server.objects(model, user: user.user).mapValues { attributes in
            JSONObject(
                attributes.map { name, value in
                    (name, types[name] == .integer ? Int64(value).map(JSONValue.int) ?? .string(value) : .string(value))
                })
        }
    }

    func storedObject(_ model: String, _ id: String) async throws -> JSONObject? {
        await server.objects(model, user: user)[id].map { JSONObject($0.map { ($0.key, JSONValue.string($0.value)) }) }
    }

    /// Clients that pulled — distinct client ids of the queries (`GET /app/v1/SOURCE`) in the
    /// server's request log. (A search by condition and the drift check read as clients of their
    /// own, which query nothing: they are not the device's client.)
    func clientCount() async throws -> Int? {
        Set(await server.requests.filter { $0.method == "GET" && $0.path.hasPrefix("/app/v1/") }.compactMap(\.clientID)).count
    }

    func refuse(_ kind: PendingChange.Kind, model: String, id: String) async throws {
        await server.addRule(Fixture.Rule(source: model, operation: kind.rawValue, ids: [id], message: "refused for the test"))
    }

    func allowAll() async throws { await server.clearRules() }
    func shutdown() async throws { await server.stop() }

    /// A value as a RhoConnect backend stores it.
    static func wire(_ value: JSONValue) -> String {
        if case .string(let text) = value { return text }
        return String(decoding: value.jsonBytes, as: UTF8.self)
    }
}

extension RhoConnectBackend {
    /// An adapter for a test server, which polls bulk data without waiting. Its idle timeout
    /// (60 s) outlasts a stall of the loopback server while other tests compute beside it.
    static func forTests(_ server: RhoConnectServer, routes: Configuration.Routes = .protocol4) -> RhoConnectBackend {
        RhoConnectBackend(configuration: Configuration(url: server.url, routes: routes, timeout: 60, sleep: { _ in }))
    }
}
