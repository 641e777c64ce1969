import Foundation
public import Satchel
public import SatchelSync

extension KintoBackend {
    /// The server's live records of the model that match `condition` as far as Kinto's
    /// querystring filters can say it (and-ed with the model's server filter), a page at a time
    /// through `Next-Page`; the engine holds the answer to the whole condition.
    public func search(_ request: PullRequest, matching condition: Condition) async throws -> PullPage {
        let blob = try Self.blobAttribute(of: request.model) ?? KintoMapping.attachmentField
        let what = "search of \(request.model.name)"
        let answer: SyncHTTPClient.Response
        if let next = request.cursor?["next"]?.stringValue {
            // Checked as a page of the same list when it came (``pullPage``).
            answer = try await send("GET", try linkOnThisServer(next, what), what: what)
        } else {
            // Without `_since`, Kinto lists live records only.
            let query = [("_sort", "id"), ("_limit", String(max(1, request.pageSize)))] + serverFilter(request) + Self.filters(condition)
            answer = try await send("GET", try root(collectionPath(request.model.name) + "/records", query), what: what)
        }
        // A collection not made yet holds nothing.
        if request.cursor == nil, answer.status == 404, Self.missingContainer(answer) { return PullPage(done: true) }
        try check(answer, what)
        var page = try pullPage(answer, since: nil, blobAttribute: blob, what: what)
        // Without `_since` Kinto lists no tombstones: what reads as deleted is a record whose
        // fields are all null, which is no object here (see KintoMapping) and so matches nothing.
        page.deletes = []
        page.nextCursor = page.done ? nil : answer.header("next-page").map { ["next": .string($0)] }
        page.schema.blobAttributes = []
        return page
    }

    /// Every live record of the model, for the drift check: a search matching everything.
    public func serverObjects(_ request: PullRequest) async throws -> PullPage { try await search(request, matching: .all) }

    /// Kinto's querystring filters for what of `condition` they can say — the leaves of its
    /// top-level `and` that they express as a superset of Satchel's semantics: equality (`f=`),
    /// `not_`, `lt_`, `max_`, `gt_`, `min_`, `in_` (unless a string holds a comma), `has_`, a
    /// prefix as `has_f=true` (the field's presence: `like_` is a pattern in both of Kinto's
    /// backends, and the memory backend fails it on a value that is no string), and an array
    /// element as `contains_`. Values go as JSON, which Kinto reads back as the value. The rest
    /// is left to the engine (`or`, `not`, a substring, which may be an array's element, a range
    /// of ids, and an attribute whose name holds a dot, which Kinto's filters read as a path).
    static func filters(_ condition: Condition) -> [(String, String)] {
        // `"a.b"` and the path a.b would be one filter (a black-box probe: the search for the
        // name sent the path's, and found nothing).
        switch condition.expression {
        case .compare(let field, _, _), .isIn(let field, _), .beginsWith(let field, _), .contains(let field, _), .exists(let field, _):
            if field != .id, field.components.contains(where: { $0.contains(".") }) { return [] }
        case .all, .and, .or, .not: break
        }
        func name(_ field: Field) -> String {
            field == .id ? "id" : field.components.map(KintoMapping.field).joined(separator: ".")
        }
        func value(_ field: Field, _ value: JSONValue) -> String {
            if field == .id, let id = value.stringValue { return KintoMapping.recordID(id) }
            return String(decoding: value.jsonBytes, as: UTF8.self)
        }
        switch condition.expression {
        case .compare(.id, .less, _), .compare(.id, .lessOrEqual, _), .compare(.id, .greater, _), .compare(.id, .greaterOrEqual, _):
            // Ids the mapping encodes (`x--…`) do not sort on the server as the objects' ids do.
            return []
        case .compare(_, let op, let bound) where op != .equal && op != .notEqual && (bound.arrayValue != nil || bound.objectValue != nil):
            // A range of arrays (element by element here) the server orders otherwise, if at all.
            return []
        case .compare(let field, let op, let operand):
            let prefix =
                switch op {
                case .equal: ""
                case .notEqual: "not_"
                case .less: "lt_"
                case .lessOrEqual: "max_"
                case .greater: "gt_"
                case .greaterOrEqual: "min_"
                }
            return [(prefix + name(field), value(field, operand))]
        case .isIn(let field, let values) where !values.isEmpty && values.allSatisfy({ !value(field, $0).contains(",") }):
            return [("in_" + name(field), values.map { value(field, $0) }.joined(separator: ","))]
        case .exists(let field, let present):
            return [("has_" + name(field), present ? "true" : "false")]
        case .beginsWith(let field, _) where field != .id:
            // The field's presence only: Kinto's memory backend fails `like_` (HTTP 500) on a
            // record whose field is missing or not a string (a black-box probe: a number).
            return [("has_" + name(field), "true")]
        case .contains(let field, let element) where element.stringValue == nil:
            return [("contains_" + name(field), String(decoding: JSONValue.array([element]).jsonBytes, as: UTF8.self))]
        case .and(let parts):
            return parts.flatMap(filters)
        default:
            return []
        }
    }
}
