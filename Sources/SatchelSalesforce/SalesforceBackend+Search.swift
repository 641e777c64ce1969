import Foundation
public import Satchel
public import SatchelSync

extension SalesforceBackend {
    /// The org's records of the model that match `condition` as far as SOQL can say it (and-ed
    /// with the model's server filter), in `Id` order, following `nextRecordsUrl`; the engine
    /// holds the answer to the whole condition.
    public func search(_ request: PullRequest, matching condition: Condition) async throws -> PullPage {
        let what = "search of \(request.model.name)"
        let describe = try await describeForPull(request)
        let answer: SyncHTTPClient.Response
        if let next = request.cursor?["next"]?.stringValue {
            guard next.hasPrefix("/services/data/") else {
                throw SyncError(.protocolViolation, "\(what): the next page is not on this server (\(next))")
            }
            answer = try await send("GET", try SyncHTTPClient.url(configuration.url, String(next.dropFirst())), session: request.session, what: what)
        } else {
            var soql = Self.soql(describe, request.configuration, since: nil, limited: false)
            soql = String(soql[..<soql.range(of: " ORDER BY ", options: .backwards)!.lowerBound])
            if let clause = Self.clause(condition, describe: describe).text {
                soql += soql.contains(" WHERE ") ? " AND (\(clause))" : " WHERE \(clause)"
            }
            soql += " ORDER BY Id"
            let options = ["Sforce-Query-Options": "batchSize=\(min(2000, max(200, request.pageSize)))"]
            answer = try await send(
                "GET", try await api("query", [("q", soql)], session: request.session), headers: options, session: request.session, what: what)
        }
        try check(answer, what)
        var page = PullPage()
        try readQueryAnswer(answer, into: &page, cursor: nil, blobFields: Set(describe.blobFields), what: what)
        page.nextCursor = Cursor(page.nextCursor).next.map { ["next": .string($0)] }
        return page
    }

    /// Every record of the model, for the drift check: a search matching everything.
    public func serverObjects(_ request: PullRequest) async throws -> PullPage { try await search(request, matching: .all) }

    /// `condition` as a SOQL condition (nil text: every record), and whether it says exactly
    /// that — else it matches more. SOQL compares text without regard to case, so an equality,
    /// `IN` or `LIKE` on text matches more, and a range on text (whose order differs from
    /// Satchel's byte order) is left out, as are fields describe does not list, values that do
    /// not fit a field's type, and negations of what does not translate exactly. Dates and
    /// datetimes go as SOQL's unquoted literals.
    static func clause(_ condition: Condition, describe: SalesforceDescribe) -> (text: String?, exact: Bool) {
        let types = Dictionary(describe.fields.map { ($0.name.lowercased(), $0.type) }, uniquingKeysWith: { first, _ in first })
        func field(_ field: Field) -> (name: String, type: String)? {
            guard field.components.count == 1 else { return nil }
            let name = field == .id ? "Id" : field.components[0]
            guard let type = types[name.lowercased()],
                name.utf8.allSatisfy({ $0 == 95 || (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) })
            else { return nil }
            return (name, type)
        }
        /// A value as a literal of a field's type, and whether comparing with it is exact.
        func literal(_ value: JSONValue, _ type: String) -> (text: String, exact: Bool)? {
            switch (type, value) {
            case ("date", .string(let text)) where text.utf8.count == 10 && instant(text + "T00:00:00Z") != nil: return (text, true)
            case ("datetime", .string(let text)):
                // SOQL's forms are `…Z` and `…±hh:mm`, in whole seconds; Salesforce's own values
                // read `…000+0000`: the instant goes in UTC, unless it has a fraction SOQL cannot say.
                guard let date = instant(text), date.timeIntervalSince1970.rounded(.down) == date.timeIntervalSince1970 else { return nil }
                return (soqlDate(date), true)
            case ("date", _), ("datetime", _): return nil
            case ("boolean", .bool(let flag)): return (flag ? "TRUE" : "FALSE", true)
            case ("int", .int(let n)), ("double", .int(let n)), ("currency", .int(let n)), ("percent", .int(let n)): return (String(n), true)
            case ("double", .double(let d)), ("currency", .double(let d)), ("percent", .double(let d)): return ("\(d)", true)
            case ("int", _), ("double", _), ("currency", _), ("percent", _), ("boolean", _): return nil
            case (_, .string(let text)): return ("'" + escape(text) + "'", false)
            default: return nil
            }
        }
        func isText(_ type: String) -> Bool { !["date", "datetime", "boolean", "int", "double", "currency", "percent"].contains(type) }
        func like(_ text: String) -> String {
            escape(text).replacingOccurrences(of: "%", with: "\\%").replacingOccurrences(of: "_", with: "\\_")
        }
        switch condition.expression {
        case .all:
            return (nil, true)
        case .compare(let f, let op, let value):
            guard let (name, type) = field(f), let (text, exact) = literal(value, type) else { return (nil, false) }
            switch op {
            case .equal: return ("\(name) = \(text)", exact)
            // Text compares without regard to case: `!= 'ab'` would leave out "AB" too.
            case .notEqual: return (exact ? "\(name) != \(text) AND \(name) != null" : "\(name) != null", exact)
            default:
                guard !isText(type) else { return (nil, false) }
                let symbol = op == .less ? "<" : op == .lessOrEqual ? "<=" : op == .greater ? ">" : ">="
                return ("\(name) \(symbol) \(text)", exact)
            }
        case .isIn(let f, let values):
            guard let (name, type) = field(f), !values.isEmpty else { return (nil, false) }
            let literals = values.map { literal($0, type) }
            guard literals.allSatisfy({ $0 != nil }) else { return (nil, false) }
            return ("\(name) IN (\(literals.map { $0!.text }.joined(separator: ", ")))", literals.allSatisfy { $0!.exact })
        case .beginsWith(let f, let prefix):
            guard let (name, type) = field(f), isText(type), type != "multipicklist" else { return (nil, false) }
            return ("\(name) LIKE '\(like(prefix))%'", false)
        case .contains(let f, .string(let text)):
            guard let (name, type) = field(f), isText(type), type != "multipicklist" else { return (nil, false) }
            return ("\(name) LIKE '%\(like(text))%'", false)
        case .contains:
            return (nil, false)
        case .exists(let f, let present):
            guard let (name, _) = field(f) else { return (nil, false) }
            return ("\(name) \(present ? "!=" : "=") null", true)
        case .and(let parts):
            let translated = parts.map { clause($0, describe: describe) }
            let texts = translated.compactMap(\.text)
            return (texts.isEmpty ? nil : texts.map { "(\($0))" }.joined(separator: " AND "), translated.allSatisfy(\.exact))
        case .or(let parts):
            let translated = parts.map { clause($0, describe: describe) }
            guard translated.allSatisfy({ $0.text != nil }) else { return (nil, translated.allSatisfy(\.exact)) }
            return (translated.map { "(\($0.text!))" }.joined(separator: " OR "), translated.allSatisfy(\.exact))
        case .not(let inner):
            let translated = clause(inner, describe: describe)
            guard translated.exact else { return (nil, false) }
            guard let text = translated.text else { return ("Id = null", true) }
            return ("NOT (\(text))", true)
        }
    }
}
