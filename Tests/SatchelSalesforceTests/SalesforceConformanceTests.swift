import SatchelSyncTesting
import Testing

@Suite("Conformance: Salesforce adapter against the loopback Salesforce")
struct SalesforceConformanceTests {
    @Test(arguments: SyncConformance.scenarios)
    func conformance(_ scenario: SyncConformance.Scenario) async throws {
        try await scenario.run(on: SalesforceHarness())
    }
}
