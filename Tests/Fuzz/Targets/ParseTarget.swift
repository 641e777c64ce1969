import Foundation
import Satchel
import SatchelParse
import SatchelSync

/// Parse answers: query results (a pull by keyset from a cursor, and a limited first pull), and a
/// `/batch` answer read against as many changes as it holds results (creates made before among
/// them).
enum ParseTarget {
    /// An adapter that is never asked to send anything: it only reads the answers given.
    static let backend = ParseBackend(url: URL(string: "http://127.0.0.1:1337/parse")!, applicationID: "fuzz")
    /// Where the keyset pull stands: the rows must come after it.
    static let cursor: JSONValue = ["updatedAt": "2024-01-01T00:00:00.000Z", "objectId": "A"]
    /// Wire types remembered from earlier pulls.
    static let metadata: JSONValue = ["types": ["releasedAt": "Date", "customer": "Pointer:Customer"]]

    /// The bytes as query results, for a keyset and a limited pull, and as a batch answer.
    static func outcomes(_ bytes: UnsafeRawBufferPointer) -> [FuzzOutcome] {
        let results = Answers.response(bytes, url: "http://127.0.0.1:1337/parse/classes/Product")
        let batch = Answers.response(bytes, url: "http://127.0.0.1:1337/parse/batch")
        let changes = Answers.changes(Answers.resultCount(bytes))
        // Every other create was made by an earlier push whose answer was lost.
        let made = Dictionary(
            uniqueKeysWithValues: changes.enumerated().filter { $0.offset % 6 == 3 }.map { ($0.element.objectID, "Made\($0.offset)") })
        return [
            .of("parse.pull") {
                _ = try backend.pullPage(results, after: cursor, limited: false, metadata: metadata, what: "pull of Product")
                return nil
            },
            .of("parse.limited") {
                _ = try backend.pullPage(results, after: nil, limited: true, metadata: nil, what: "pull of Product")
                return nil
            },
            .of("parse.batch") {
                _ = try ParseBackend.batchOutcomes(batch, changes: changes, made: made, what: "push to Product")
                return nil
            },
        ]
    }
}
