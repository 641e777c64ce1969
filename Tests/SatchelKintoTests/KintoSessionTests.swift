import Foundation
import Satchel
import SatchelKinto
import SatchelSync
import SatchelSyncTesting
import Testing

/// Kinto wants the password on every request: what a later process of the same store has to
/// send it with.
@Suite("Kinto adapter: the password across processes")
struct KintoSessionTests {
    static let product = ModelDefinition(name: "Product")
    static let empty = #"{"data":[]}"#

    static func backend(_ stub: KintoStub, remembering: Bool) async -> KintoBackend {
        var configuration = KintoBackend.Configuration(url: await stub.root, bucket: "b")
        configuration.remembersPassword = remembering
        return KintoBackend(configuration: configuration)
    }

    static func notLoggedIn(_ client: SyncClient) async -> Bool {
        do {
            try await client.engine.sync(models: ["Product"])
            return false
        } catch let error as SyncError {
            return error.code == .notLoggedIn
        } catch {
            return false
        }
    }

    @Test(
        "with remembersPassword a reopened store syncs on its stored session alone, with the password logged in with; without it, or after a logout, it is not logged in"
    )
    func remembered() async throws {
        let stub = try await KintoStub.start()
        let expected = SyncHTTPClient.basicAuthorization(Credentials(user: "ann", password: "pw-1"))

        let first = try SyncClient(backend: await Self.backend(stub, remembering: true), models: [Self.product], pageSize: 10)
        try await first.engine.logIn(Credentials(user: "ann", password: "pw-1"))
        await stub.enqueue([.init(status: 200, body: #"{"data":[{"id":"p1","last_modified":10,"name":"One"}]}"#)])
        try await first.engine.sync(models: ["Product"])

        // A later process: no credentials of its own.
        let later = try await first.reopened(backend: await Self.backend(stub, remembering: true), models: [Self.product], pageSize: 10)
        try later.model("Product").update("p1", with: ["name": "Later"])
        await stub.enqueue([
            .init(status: 200, body: #"{"responses":[{"status":200,"body":{"data":{"id":"p1","last_modified":12,"name":"Later"}}}]}"#),
            .init(status: 200, body: Self.empty),
        ])
        try await later.engine.sync(models: ["Product"])
        let sent = await stub.authorizations
        #expect(sent.count >= 3 && sent.suffix(2).allSatisfy { $0 == expected }, "\(sent)")
        let requests = await stub.requests
        #expect(requests.suffix(2).first?.hasPrefix("POST /v1/batch") == true, "\(requests)")

        // An adapter that does not remember takes no password from the session.
        let forgetful = try await later.reopened(backend: await Self.backend(stub, remembering: false), models: [Self.product], pageSize: 10)
        let before = await stub.requests.count
        #expect(await Self.notLoggedIn(forgetful))

        // Nor is one stored by a login that did not ask.
        try await forgetful.engine.logIn(Credentials(user: "ann", password: "pw-1"))
        let unstored = try await forgetful.reopened(backend: await Self.backend(stub, remembering: true), models: [Self.product], pageSize: 10)
        #expect(await Self.notLoggedIn(unstored))

        // A logout drops a remembered one.
        let again = try await unstored.reopened(backend: await Self.backend(stub, remembering: true), models: [Self.product], pageSize: 10)
        try await again.engine.logIn(Credentials(user: "ann", password: "pw-1"))
        try await again.engine.logOut()
        let loggedOut = try await again.reopened(backend: await Self.backend(stub, remembering: true), models: [Self.product], pageSize: 10)
        #expect(await Self.notLoggedIn(loggedOut))
        #expect(await stub.requests.count == before, "nothing was sent without a password")
        await stub.stop()
    }
}
