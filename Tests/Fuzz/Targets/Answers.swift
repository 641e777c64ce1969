import Foundation
import Satchel
import SatchelSync

/// What the adapter targets share: an input as a server's answer, and changes to match a batch
/// answer against.
enum Answers {
    /// `bytes` as a 200 answer from `url`, as the HTTP client hands it to an adapter.
    static func response(_ bytes: UnsafeRawBufferPointer, url: String) -> SyncHTTPClient.Response {
        SyncHTTPClient.Response(status: 200, headers: [:], body: Data(bytes), url: URL(string: url)!)
    }

    /// `count` changes, one of each kind in turn (create, update, delete), for a batch answer of
    /// `count` results to be read against; ids `c0`, `c1`… Updates remove an attribute and carry
    /// the whole object, creates carry one that a server copy may match.
    static func changes(_ count: Int) -> [OutgoingChange] {
        (0..<count).map { index in
            let id = "c\(index)"
            switch index % 3 {
            case 0: return OutgoingChange(objectID: id, kind: .create, attributes: ["name": "x"])
            case 1:
                return OutgoingChange(
                    objectID: id, kind: .update, attributes: ["name": "y", "gone": .null], baseVersion: .int(10), object: ["name": "y"])
            default: return OutgoingChange(objectID: id, kind: .delete, attributes: ["name": "z"], baseVersion: .int(10))
            }
        }
    }

    /// How many results a batch answer holds, so that the changes match it: the length of the
    /// list at `key` (the whole answer when nil), else 1.
    static func resultCount(_ bytes: UnsafeRawBufferPointer, key: String? = nil) -> Int {
        guard let value = try? JSONValue(parsing: bytes) else { return 1 }
        let list = key.map { value[$0] } ?? value
        return list?.arrayValue?.count ?? 1
    }
}
