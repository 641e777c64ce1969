import Foundation
public import Satchel
public import SatchelSync

extension ParseBackend {
    /// The server's objects of the model that match `condition` as far as Parse's `where` can
    /// say it (and the model's server filter), a page at a time by an `objectId` keyset; the
    /// engine holds the answer to the whole condition.
    public func search(_ request: PullRequest, matching condition: Condition) async throws -> PullPage {
        let what = "search of \(request.model.name)"
        let types = ParseMapping.WireTypes(metadata: request.metadata)
        var conditions: [JSONValue] = []
        if let filter = request.configuration.serverFilter { conditions.append(.object(filter)) }
        if let query = Self.query(condition, model: request.model, types: types).query { conditions.append(query) }
        if let last = request.cursor?["objectId"]?.stringValue { conditions.append(["objectId": ["$gt": .string(last)]]) }
        var query: [(String, String)] = []
        if let all = Self.and(conditions) { query.append(("where", Self.text(all))) }
        query += [("order", "objectId"), ("limit", String(max(1, request.pageSize)))]
        query += Self.keys(request.configuration)
        let answer = try await send(
            "GET", try endpoint("classes/\(SyncHTTPClient.escape(request.model.name))", query), session: request.session, what: what)
        try check(answer, what)
        var page = PullPage()
        var last = request.cursor?["objectId"]?.stringValue
        for value in try Self.results(answer, what) {
            guard let decoded = ParseMapping.decode(value, requireUpdatedAt: false) else {
                throw SyncError(.protocolViolation, "\(what): an object without a string `objectId`")
            }
            if let last, decoded.object.id <= last { throw SyncError(.protocolViolation, "\(what): the server did not sort by objectId") }
            last = decoded.object.id
            page.upserts.append(decoded.object)
        }
        // Only an empty page ends it: a server with a `maxLimit` sends fewer rows than asked.
        page.done = page.upserts.isEmpty
        page.nextCursor = last.map { ["objectId": .string($0)] }
        return page
    }

    /// `condition` as a Parse `where` (nil: every object), and whether it says exactly that —
    /// else it matches more. `$exists` translates exactly; comparisons, `$in` and prefixes
    /// (`$regex` on a quoted prefix) match more (MongoDB matches an array by its elements), `!=`
    /// goes as the field's presence only, and and/or/not become `$and`, `$or` and `$nor` (a
    /// `not` only of what is exact); `contains` becomes a
    /// `$regex` on the quoted text (which also matches an array holding a string that contains
    /// it: more), or an equality, which matches arrays holding the value. Dates and pointers go
    /// in the wire types the model's attributes have. What Parse cannot say is left to the
    /// engine (matching more): a path into arrays (`items[].p`) or into objects (`a.b`), or with
    /// a name Parse's keys cannot spell, and a prefix or a substring of a `Date`, `File` or pointer, which a
    /// `$regex` never matches (a pointer's substring becomes an equality with the pointer).
    static func query(_ condition: Condition, model: ModelDefinition, types: ParseMapping.WireTypes) -> (query: JSONValue?, exact: Bool) {
        func name(_ field: Field) -> String { field == .id ? "objectId" : field.description }
        func type(_ field: Field) -> ParseMapping.WireType? {
            guard field.components.count == 1, field != .id else { return nil }
            let attribute = field.components[0]
            return ParseMapping.serverFields.contains(attribute) ? .date : types.type(of: attribute, in: model)
        }
        func wire(_ field: Field, _ value: JSONValue) -> JSONValue {
            guard field.components.count == 1, field != .id else { return value }
            return ParseMapping.wire(value, attribute: field.components[0], type: type(field))
        }
        // A dotted path too: MongoDB's reaches into the arrays on its way, where one here is
        // refused when it meets an array, which the engine can only do with every object read.
        if let field = field(of: condition.expression), field != .id, field.components.count > 1 || !field.components.allSatisfy(isKey) {
            return (nil, false)
        }
        switch condition.expression {
        case .all:
            return (nil, true)
        case .compare(_, let op, let bound) where op != .equal && op != .notEqual && (bound.arrayValue != nil || bound.objectValue != nil):
            // A range of arrays (element by element here): MongoDB's ranges read arrays otherwise.
            return (nil, false)
        // MongoDB matches an array when one of its elements does (`v == 1` holds for `[1, 2]`), where
        // an array is one whole value here: comparisons match more, and so their negations are
        // left to the engine. `$ne` leaves out such arrays (fewer): only the field's presence goes.
        case .compare(let field, let op, let value):
            let operand = wire(field, value)
            switch op {
            case .equal: return ([name(field): operand], false)
            case .notEqual: return ([name(field): ["$exists": true]], false)
            case .less: return ([name(field): ["$lt": operand]], false)
            case .lessOrEqual: return ([name(field): ["$lte": operand]], false)
            case .greater: return ([name(field): ["$gt": operand]], false)
            case .greaterOrEqual: return ([name(field): ["$gte": operand]], false)
            }
        case .isIn(let field, let values):
            return ([name(field): ["$in": .array(values.map { wire(field, $0) })]], false)
        case .beginsWith(let field, let prefix):
            guard type(field) == nil else { return (nil, false) }
            return ([name(field): ["$regex": .string("^" + quoted(prefix))]], false)
        case .contains(let field, .string(let text)):
            switch type(field) {
            case nil: return ([name(field): ["$regex": .string(quoted(text))]], false)
            case .pointer(let className)?, .pointers(let className)?: return ([name(field): ParseMapping.pointer(className, text)], false)
            case .date?, .file?: return (nil, false)
            }
        case .contains(let field, let value):
            return ([name(field): wire(field, value)], false)
        case .exists(let field, let present):
            return ([name(field): ["$exists": .bool(present)]], true)
        case .and(let parts):
            let translated = parts.map { query($0, model: model, types: types) }
            let queries = translated.compactMap(\.query)
            return (and(queries), translated.allSatisfy(\.exact))
        case .or(let parts):
            let translated = parts.map { query($0, model: model, types: types) }
            // One branch that matches everything makes the whole `or` match everything.
            guard translated.allSatisfy({ $0.query != nil }) else { return (nil, translated.allSatisfy(\.exact)) }
            return (["$or": .array(translated.compactMap(\.query))], translated.allSatisfy(\.exact))
        case .not(let inner):
            let translated = query(inner, model: model, types: types)
            // Only what matches exactly can be negated; a negated superset would be a subset.
            guard translated.exact else { return (nil, false) }
            guard let inner = translated.query else { return (["objectId": ["$in": []]], true) }
            return (["$nor": [inner]], true)
        }
    }

    /// The field a condition that is no combination of others tests.
    static func field(of expression: Condition.Expression) -> Field? {
        switch expression {
        case .compare(let field, _, _), .isIn(let field, _), .beginsWith(let field, _), .contains(let field, _), .exists(let field, _): field
        case .all, .and, .or, .not: nil
        }
    }

    /// Whether `name` is a key Parse accepts in a query (`^[A-Za-z][A-Za-z0-9_]*$` between dots).
    static func isKey(_ name: String) -> Bool {
        guard let first = name.utf8.first, (65...90).contains(first) || (97...122).contains(first) else { return false }
        return name.utf8.allSatisfy { (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) || $0 == 95 }
    }

    /// `text` as a regular expression matching it literally (`\Q…\E`, with any `\E` in it
    /// closed and reopened).
    static func quoted(_ text: String) -> String {
        "\\Q" + text.replacingOccurrences(of: "\\E", with: "\\E\\\\E\\Q") + "\\E"
    }
}
