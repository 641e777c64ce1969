import Foundation
import Satchel
import SatchelKinto
import SatchelSync

/// Kinto answers: a record list (a pull, first or later), and a `/batch` answer read against as
/// many changes as it holds responses.
enum KintoTarget {
    /// An adapter that is never asked to send anything: it only reads the answers given.
    static let backend = KintoBackend(url: URL(string: "http://127.0.0.1:8888/v1")!, bucket: "app")

    /// The bytes as a record list, from a first pull and from a cursor, and as a batch answer.
    static func outcomes(_ bytes: UnsafeRawBufferPointer) -> [FuzzOutcome] {
        let records = Answers.response(bytes, url: "http://127.0.0.1:8888/v1/buckets/app/collections/Product/records")
        let batch = Answers.response(bytes, url: "http://127.0.0.1:8888/v1/batch")
        let changes = Answers.changes(Answers.resultCount(bytes, key: "responses"))
        return [
            .of("kinto.pull") {
                _ = try backend.pullPage(records, since: nil, what: "pull of Product")
                _ = try backend.pullPage(records, since: 1_700_000_000_000, what: "pull of Product")
                return nil
            },
            .of("kinto.batch") {
                _ = try KintoBackend.batchOutcomes(batch, changes: changes, mayCreateCollection: true, what: "push to Product")
                return nil
            },
        ]
    }
}
