import Foundation
import Satchel
import SatchelTestSupport
import Testing

@testable import SatchelSync

/// The session's stored layout (the engine's) against docs/KEY_LAYOUT.md's rows, both ways.
@Suite("KEY_LAYOUT.md: the session")
struct SessionLayoutDocTests {
    @Test("the session rows are what the engine writes, and read back to what wrote them")
    func session() throws {
        let url = Fixtures.directory.deletingLastPathComponent().appendingPathComponent("docs/KEY_LAYOUT.md")
        let text = try String(contentsOf: url, encoding: .utf8)
        let start = try #require(text.range(of: "<!-- session values -->"))
        let end = try #require(text.range(of: "<!-- /session values -->"))
        var rows: [String: String] = [:]
        for line in text[start.upperBound..<end.lowerBound].split(separator: "\n") {
            let cells = line.split(separator: "|").map {
                $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            }
            if cells.count == 2, cells[1].hasPrefix("{") { rows[cells[0]] = cells[1] }
        }
        let session = SyncSession(user: "ann", data: ["token": "t"], clientID: "c-1")
        let cases: [(String, SyncEngine.StoredSession)] = [
            ("session", .init(session)), ("session logged out", .init(session, loggedOut: true)),
        ]
        for (name, stored) in cases {
            #expect(rows[name] == String(decoding: stored.json.jsonBytes, as: UTF8.self), "\(name)")
            let back = SyncEngine.StoredSession(json: try JSONObject(parsing: try #require(rows[name])))
            #expect(back.session == stored.session && back.loggedOut == stored.loggedOut, "\(name)")
        }
    }
}
