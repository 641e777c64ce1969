import SatchelSyncTesting
import Testing

@Suite("Conformance: Kinto adapter against a real Kinto server", .enabled(if: KintoServers.enabled, KintoServers.skipReason))
struct KintoConformanceTests {
    @Test(arguments: SyncConformance.scenarios)
    func conformance(_ scenario: SyncConformance.Scenario) async throws {
        try await scenario.run(on: KintoHarness())
    }

    /// Blobs are record attachments (the kinto-attachment plugin), read back from the files the
    /// plugin wrote.
    @Test(arguments: SyncConformance.blobScenarios)
    func blobs(_ scenario: SyncConformance.Scenario) async throws {
        try await scenario.run(on: KintoHarness())
    }
}
