import Foundation
import Satchel
import SalesforceTestServer
import SatchelSalesforce
import SatchelSync
import SatchelSyncTesting

/// The loopback Salesforce as a conformance server: one org per scenario, with the kit's objects,
/// answering queries in pages of 5 (the kit's page size; a real org's pages hold 200 to 2,000).
struct SalesforceHarness: ConformanceHarness {
    func makeServer() async throws -> any ConformanceServer {
        var fixture = try SalesforceFixture.named("kit")
        fixture.queryPageSize = 5
        return SalesforceConformanceServer(server: try await SalesforceServer.start(fixture))
    }
}

struct SalesforceConformanceServer: ConformanceServer {
    let server: SalesforceServer

    var backend: any SyncBackend { SalesforceBackend.forTests(server) }
    var credentials: Credentials { Credentials(user: "ann", password: "secret") }
    var otherCredentials: Credentials { Credentials(user: "bob", password: "secret") }
    /// Salesforce keeps the last write of each field.
    var detectsConflicts: Bool { false }
    /// The system fields, and the client-id field the kit's objects declare (the org opted in:
    /// a create carries it, against lost answers).
    var serverAttributes: Set<String> { SalesforceWire.systemFields.union(["Satchel_Client_ID__c"]) }
    var storedServerFields: Set<String> { serverAttributes.union(["Id"]) }

    /// Salesforce makes the ids (18 characters, with the object's key prefix): the one asked for
    /// is not used.
    func put(_ model: String, _ attributes: JSONObject, id: String?) async throws -> String {
        let id = await server.insert(model, Data(attributes.jsonBytes), id: nil)
        await server.advanceClock(seconds: 1)
        return id
    }

    func update(_ model: String, _ id: String, _ changes: JSONObject) async throws {
        await server.update(model, id, Data(changes.jsonBytes))
        await server.advanceClock(seconds: 1)
    }

    /// A delete, then two minutes on the server's clock: `getDeleted` covers whole minutes, and
    /// a window must be longer than one.
    func delete(_ model: String, _ id: String) async throws {
        await server.delete(model, id)
        await server.advanceClock(seconds: 120)
    }

    func objects(_ model: String) async throws -> [String: JSONObject] {
        try await server.records(model).mapValues { SalesforceWire.local(try JSONObject(parsing: $0)) }
    }

    /// The record as the org keeps it, less its null fields: Salesforce has no absent field
    /// (every record holds every field of its object, and `null` is a field's empty value), so a
    /// removal is a null there, which is what the kit's "absence" means here.
    func storedObject(_ model: String, _ id: String) async throws -> JSONObject? {
        try await server.records(model)[id].map { try JSONObject(parsing: $0).filter { _, value in !value.isNull } }
    }

    /// Salesforce registers no clients.
    func clientCount() async throws -> Int? { nil }

    func refuse(_ kind: PendingChange.Kind, model: String, id: String) async throws {
        await server.addRule(SalesforceFixture.Rule(object: model, operation: kind.rawValue, ids: [id], message: "refused for the test"))
    }

    /// A create carries no id of the client's: it is refused by what it carries.
    func refuse(_ kind: PendingChange.Kind, model: String, id: String, carrying attributes: JSONObject) async throws {
        guard kind == .create else { return try await refuse(kind, model: model, id: id) }
        await server.addRule(
            SalesforceFixture.Rule(object: model, operation: "create", matching: Data(attributes.jsonBytes), message: "refused for the test"))
    }

    func allowAll() async throws { await server.clearRules() }
    func shutdown() async throws { await server.stop() }
}

/// How a record the server holds reads on a device, written from the REST format (not from the
/// adapter's code): `Id` and `attributes` dropped, a `null` field absent.
enum SalesforceWire {
    static let systemFields: Set<String> = ["CreatedDate", "LastModifiedDate", "SystemModstamp", "IsDeleted"]

    static func local(_ record: JSONObject) -> JSONObject {
        record.filter { name, value in !["Id", "attributes"].contains(name) && !value.isNull }
    }
}

extension SalesforceBackend {
    /// An adapter for a test server.
    static func forTests(_ server: SalesforceServer) -> SalesforceBackend {
        SalesforceBackend(configuration: testConfiguration(server))
    }

    /// The configuration for a test server. Its idle timeout (60 s) outlasts a stall of the
    /// loopback server while other tests compute beside it.
    static func testConfiguration(_ server: SalesforceServer) -> Configuration { Configuration(url: server.url, timeout: 60) }
}
