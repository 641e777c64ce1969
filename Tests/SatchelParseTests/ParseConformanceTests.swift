import SatchelSyncTesting
import Testing

@Suite("Conformance: Parse adapter against the loopback Parse Server")
struct ParseConformanceTests {
    @Test(arguments: SyncConformance.scenarios)
    func conformance(_ scenario: SyncConformance.Scenario) async throws {
        try await scenario.run(on: ParseHarness())
    }
}
