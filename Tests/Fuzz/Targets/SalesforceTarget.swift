import Foundation
import Satchel
import SatchelSalesforce
import SatchelSync

/// Salesforce answers: query results (a first pull, and one from a cursor with records applied
/// at its second), a describe and what the adapter derives from it, the bytes as a datetime and
/// as a `Date` header, and a composite answer read against as many changes as it holds results.
enum SalesforceTarget {
    /// An adapter that is never asked to send anything: it only reads the answers given.
    static let backend = SalesforceBackend(url: URL(string: "http://127.0.0.1:8443")!)
    /// A later pull's cursor: its newest second, a record applied at it, getDeleted's start.
    static let cursor: JSONValue = ["since": "2024-05-01T10:00:00.000+0000", "at": ["001Qy0000000001IAA": "x"], "deleted": "2024-05-01T09:00:00Z"]

    /// The bytes as query results (from no cursor and from one), as a describe, and as a
    /// composite answer.
    static func outcomes(_ bytes: UnsafeRawBufferPointer) -> [FuzzOutcome] {
        let query = Answers.response(bytes, url: "http://127.0.0.1:8443/services/data/v59.0/query")
        let describe = Answers.response(bytes, url: "http://127.0.0.1:8443/services/data/v59.0/sobjects/Account/describe")
        let composite = Answers.response(bytes, url: "http://127.0.0.1:8443/services/data/v59.0/composite/sobjects")
        return [
            .of("salesforce.query") {
                for start in [nil, cursor] {
                    var page = PullPage()
                    try backend.readQueryAnswer(query, into: &page, cursor: start, blobFields: ["Body"], what: "pull of Account")
                }
                return nil
            },
            .of("salesforce.describe") {
                let (read, _) = try SalesforceBackend.readDescribe(describe, what: "describing Account")
                // What a pull takes from it, and the picklists a local write is checked against.
                _ = (read.associations, read.blobFields, read.attributeTypes)
                for (name, choices) in read.choices {
                    for value in choices.validFor.keys { _ = read.picklist(name, controller: value) }
                }
                return nil
            },
            .of("salesforce.date") {
                // The same bytes as a `Date` header and as a record's `LastModifiedDate`.
                let text = String(decoding: bytes, as: UTF8.self)
                _ = (SalesforceBackend.httpDate(text), SalesforceBackend.instant(text))
                return nil
            },
            .of("salesforce.composite") {
                let changes = Answers.changes(Answers.resultCount(bytes))
                for (change, result) in zip(changes, try SalesforceBackend.compositeResults(composite, count: changes.count, what: "push to Account"))
                {
                    _ = try SalesforceBackend.outcome(of: change, result, what: "push to Account")
                }
                return nil
            },
        ]
    }
}
