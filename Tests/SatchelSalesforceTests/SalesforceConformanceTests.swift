import SatchelSyncTesting
import Testing

// One scenario at a time: each starts a loopback server, and each running server blocks a
// Dispatch thread in epoll_wait (FlyingFox's socket pool). Seventy at once, beside the other
// suites, left servers without threads in full runs on two cores: clients timed out.
@Suite("Conformance: Salesforce adapter against the loopback Salesforce", .serialized)
struct SalesforceConformanceTests {
    @Test(arguments: SyncConformance.scenarios)
    func conformance(_ scenario: SyncConformance.Scenario) async throws {
        try await scenario.run(on: SalesforceHarness())
    }
}
