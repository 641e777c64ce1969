import SatchelSyncTesting
import Testing

// One scenario at a time: each starts a loopback server, and each running server blocks a
// Dispatch thread in epoll_wait (FlyingFox's socket pool). Seventy at once, beside the other
// suites, left servers without threads in full runs on two cores: clients timed out.
@Suite("Conformance: RhoConnect adapter against the loopback RhoConnect server", .serialized)
struct RhoConnectConformanceTests {
    @Test(arguments: SyncConformance.scenarios)
    func conformance(_ scenario: SyncConformance.Scenario) async throws {
        try await scenario.run(on: RhoConnectHarness())
    }
}
