import Foundation
import Satchel
import SatchelSync
import SatchelSyncTesting
import Testing

/// The in-memory backend as a conformance server.
struct InMemoryHarness: ConformanceHarness {
    var configuration = InMemoryBackend.Configuration()

    func makeServer() async throws -> any ConformanceServer { InMemoryServer(server: InMemoryBackend(configuration: configuration)) }
}

struct InMemoryServer: ConformanceServer {
    let server: InMemoryBackend

    var backend: any SyncBackend { server }
    var credentials: Credentials { Credentials(user: "ann", password: "secret") }
    var detectsConflicts: Bool { server.configuration.checkVersions }

    func put(_ model: String, _ attributes: JSONObject, id: String?) async throws -> String { await server.put(model, attributes, id: id) }
    func update(_ model: String, _ id: String, _ changes: JSONObject) async throws { await server.update(model, id, changes) }
    func delete(_ model: String, _ id: String) async throws { await server.delete(model, id) }
    func objects(_ model: String) async throws -> [String: JSONObject] { await server.objects(model) }
    var otherCredentials: Credentials { Credentials(user: "bob", password: "secret") }
    func storedObject(_ model: String, _ id: String) async throws -> JSONObject? { await server.object(model, id) }
    func clientCount() async throws -> Int? { await server.clientIDs.count }

    func refuse(_ kind: PendingChange.Kind, model: String, id: String) async throws {
        await server.reject(InMemoryBackend.Rejection(model: model, kinds: [kind], ids: [id], message: "refused for the test"))
    }

    func allowAll() async throws { await server.clearRejections() }
    func shutdown() async throws {}

    /// A blob is a `mem://` URL in its attribute, naming bytes the server holds.
    func putBlob(_ model: String, _ id: String, _ attribute: String, _ data: Data?) async throws {
        let value: JSONValue = if let data { .string(await server.putBlob(data)) } else { .null }
        await server.update(model, id, [attribute: value])
    }

    func blob(_ model: String, _ id: String, _ attribute: String) async throws -> Data? {
        guard let url = await server.object(model, id)?[attribute]?.stringValue else { return nil }
        return await server.blob(at: url)
    }
}

extension InMemoryHarness {
    /// Like Kinto: client ids kept, version conflicts, tombstones.
    static var kintoLike: InMemoryHarness {
        var configuration = InMemoryBackend.Configuration()
        configuration.serverAssignsIDs = false
        return InMemoryHarness(configuration: configuration)
    }

    /// Like RhoConnect: server ids and errors arrive in pulls, partial objects, no version checks.
    static var rhoConnectLike: InMemoryHarness {
        var configuration = InMemoryBackend.Configuration()
        configuration.linksViaPull = true
        configuration.wholeObjects = false
        configuration.checkVersions = false
        return InMemoryHarness(configuration: configuration)
    }

    /// Like Parse: server ids, no tombstones (deletions seen by listing ids), small push batches.
    static var parseLike: InMemoryHarness {
        var configuration = InMemoryBackend.Configuration()
        configuration.deletions = .byListingIDs
        configuration.checkVersions = false
        configuration.maxPushBatch = 2
        return InMemoryHarness(configuration: configuration)
    }
}

@Suite("Conformance: in-memory backend")
struct InMemoryConformanceTests {
    @Test("server ids, version checks", arguments: SyncConformance.scenarios)
    func standard(_ scenario: SyncConformance.Scenario) async throws {
        try await scenario.run(on: InMemoryHarness())
    }

    @Test("Kinto-like", arguments: SyncConformance.scenarios)
    func kintoLike(_ scenario: SyncConformance.Scenario) async throws {
        try await scenario.run(on: InMemoryHarness.kintoLike)
    }

    @Test("RhoConnect-like", arguments: SyncConformance.scenarios)
    func rhoConnectLike(_ scenario: SyncConformance.Scenario) async throws {
        try await scenario.run(on: InMemoryHarness.rhoConnectLike)
    }

    @Test("Parse-like", arguments: SyncConformance.scenarios)
    func parseLike(_ scenario: SyncConformance.Scenario) async throws {
        try await scenario.run(on: InMemoryHarness.parseLike)
    }

    @Test("blobs: server ids, version checks", arguments: SyncConformance.blobScenarios)
    func blobs(_ scenario: SyncConformance.Scenario) async throws {
        try await scenario.run(on: InMemoryHarness())
    }

    @Test("blobs: Kinto-like", arguments: SyncConformance.blobScenarios)
    func kintoLikeBlobs(_ scenario: SyncConformance.Scenario) async throws {
        try await scenario.run(on: InMemoryHarness.kintoLike)
    }
}
