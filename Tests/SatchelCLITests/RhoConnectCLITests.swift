import Foundation
import RhoConnectTestServer
import Satchel
import SatchelTestSupport
import Testing

/// `satchel sync --backend rhoconnect` against the loopback RhoConnect server.
@Suite("satchel sync --backend rhoconnect")
struct RhoConnectCLITests {
    @Test("syncs, pushes, exits 3 on a refused record, and names the models it was given")
    func sync() async throws {
        let server = try await RhoConnectServer.start(try Fixture.named("products"))
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let url = server.url.absoluteString
        let first = try await CLI.detached(["--db", db, "sync", "--backend", "rhoconnect", "--url", url, "--user", "ann", "--password", "secret", "--model", "Product"])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.lines.last == #"{"processed":0,"status":"complete"}"#)
        #expect(try await CLI.detached(["--db", db, "find", "Product", "--id", "1"]).lines == [#"{"brand":"Apple","name":"iPhone","object":"1","price":"199.99"}"#])

        _ = try await CLI.detached(["--db", db, "put", "Product", #"{"object":"tmp","name":"wrongname"}"#])
        let refused = try await CLI.detached(["--db", db, "sync", "--backend", "rhoconnect", "--url", url])
        #expect(refused.status == 3, "\(refused.stderr)")
        #expect(try await CLI.detached(["--db", db, "errors"]).stdout.contains("error create"))

        let bad = try await CLI.detached(["--db", db, "sync", "--backend", "rhoconnect", "--url", "not a url"])
        #expect(bad.status != 0 && bad.stderr.contains("server's root"))
        await server.stop()
    }
}
