import SatchelSyncTesting
import Testing

@Suite("Conformance: RhoConnect adapter against the loopback RhoConnect server")
struct RhoConnectConformanceTests {
    @Test(arguments: SyncConformance.scenarios)
    func conformance(_ scenario: SyncConformance.Scenario) async throws {
        try await scenario.run(on: RhoConnectHarness())
    }
}
