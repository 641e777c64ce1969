/// A SOQL query checked against the org's describes and ready to run: names resolved
/// (case-insensitively), literals checked against their fields' types, as Salesforce does
/// before it reads a row.
///
/// Semantics follow SOQL: text comparisons (`=`, `<`, `LIKE`, `ORDER BY`) ignore case; `!=`
/// and `NOT IN` match nulls; datetimes compare as instants whatever offset the literal was
/// written with; `ORDER BY` puts nulls first unless `NULLS LAST`; rows that tie on every
/// `ORDER BY` key come in `Id` order (which is also the order without `ORDER BY`).
struct SOQLPlan {
    typealias Field = SalesforceFixture.Field
    typealias Literal = SOQLQuery.Literal

    indirect enum Predicate {
        case and([Predicate])
        case or([Predicate])
        case not(Predicate)
        case test(Field, SOQLQuery.Operator, [Literal])
    }

    /// A selected field of a parent record (`Parent.Name`): it comes nested, under the
    /// relationship's name, as `{"attributes":{…},"Name":…}` (null without a parent).
    struct Related {
        let relationship: String
        let reference: Field
        let target: Schema
        let field: Field
    }

    let schema: Schema
    /// The selected fields, in `SELECT` order.
    let fields: [Field]
    /// The selected fields of parent records.
    let related: [Related]
    let count: Bool
    let predicate: Predicate?
    let order: [(field: Field, descending: Bool, nullsLast: Bool)]
    let limit: Int?
    let offset: Int?

    /// Checks a parsed query against the schemas of `store`.
    init(_ query: SOQLQuery, store: RecordStore) throws(APIError) {
        let text = query.query
        guard let schema = store.schema(query.object.text) else {
            throw SOQLError.at(
                query.object.offset, in: text,
                "sObject type '\(query.object.text)' is not supported. If you are attempting to use a custom object, be sure to append the '__c' after the entity name. Please reference your WSDL or the describe call for the appropriate names.",
                code: "INVALID_TYPE")
        }
        guard schema.queryable else {
            throw APIError(400, "INVALID_TYPE_FOR_OPERATION", "entity type \(schema.name) does not support query")
        }
        func resolve(_ name: SOQLQuery.Name) throws(APIError) -> Field {
            guard let field = schema.field(name.text) else {
                throw SOQLError.at(
                    name.offset, in: text,
                    "No such column '\(name.text)' on entity '\(schema.name)'. If you are attempting to use a custom field, be sure to append the '__c' after the custom field name. Please reference your WSDL or the describe call for the appropriate names.",
                    code: "INVALID_FIELD")
            }
            return field
        }
        var fields: [Field] = []
        var related: [Related] = []
        for name in query.fields {
            let parts = name.text.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            if parts.count == 2 {
                guard let reference = schema.fields.first(where: { $0.relationshipName?.lowercased() == parts[0].lowercased() }),
                    let target = reference.referenceTo.first.flatMap({ store.schema($0) }), let field = target.field(parts[1])
                else {
                    throw SOQLError.at(
                        name.offset, in: text,
                        "Didn't understand relationship '\(parts[0])' in field path. If you are attempting to use a custom relationship, be sure to append the '__r' after the custom relationship name. Please reference your WSDL or the describe call for the appropriate names.",
                        code: "INVALID_FIELD")
                }
                related.append(Related(relationship: reference.relationshipName!, reference: reference, target: target, field: field))
                continue
            }
            let field = try resolve(name)
            if fields.contains(where: { $0.name == field.name }) { throw APIError.invalidField("duplicate field selected: \(field.name)") }
            fields.append(field)
        }
        var order: [(field: Field, descending: Bool, nullsLast: Bool)] = []
        for item in query.order {
            let field = try resolve(item.field)
            guard !["base64", "multipicklist"].contains(field.type), !(field.type == "textarea" && field.length > 255) else {
                throw SOQLError.at(item.field.offset, in: text, "field '\(field.name)' can not be sorted in a query call", code: "INVALID_FIELD")
            }
            order.append((field, item.descending, item.nullsLast))
        }
        if let offset = query.offset, offset > 2000 {
            throw APIError(400, "NUMBER_OUTSIDE_VALID_RANGE", "Maximum SOQL offset allowed is 2000")
        }
        self.schema = schema
        self.fields = fields
        self.related = related
        count = query.count
        predicate = try query.condition.map { condition throws(APIError) in try Self.predicate(condition, text: text, resolve: resolve) }
        self.order = order
        limit = query.limit
        offset = query.offset
    }

    // MARK: - Checking conditions

    private static func predicate(
        _ condition: SOQLQuery.Condition, text: String, resolve: (SOQLQuery.Name) throws(APIError) -> Field
    ) throws(APIError) -> Predicate {
        switch condition {
        case .and(let terms):
            var predicates: [Predicate] = []
            for term in terms { predicates.append(try predicate(term, text: text, resolve: resolve)) }
            return .and(predicates)
        case .or(let terms):
            var predicates: [Predicate] = []
            for term in terms { predicates.append(try predicate(term, text: text, resolve: resolve)) }
            return .or(predicates)
        case .not(let term): return .not(try predicate(term, text: text, resolve: resolve))
        case .comparison(let comparison):
            let field = try resolve(comparison.field)
            let at = comparison.field.offset
            func operatorError(_ message: String) -> APIError {
                SOQLError.at(at, in: text, message, code: "INVALID_QUERY_FILTER_OPERATOR")
            }
            if field.type == "base64" || (field.type == "textarea" && field.length > 255) {
                throw SOQLError.at(at, in: text, "field '\(field.name)' can not be filtered in a query call", code: "INVALID_FIELD")
            }
            let op = comparison.op
            if op == .like, !Coercion.textTypes.contains(field.type) || field.type == "multipicklist" {
                throw operatorError("invalid operator on \(field.type) field: LIKE")
            }
            if op == .includes || op == .excludes, field.type != "multipicklist" {
                throw operatorError("includes or excludes operator only valid on multipicklist field")
            }
            if [.less, .lessOrEqual, .greater, .greaterOrEqual].contains(op), field.type == "boolean" || field.type == "multipicklist" {
                throw operatorError("invalid operator on \(field.type) field")
            }
            var literals: [Literal] = []
            for (literal, offset) in comparison.values {
                literals.append(try check(literal, for: field, op: comparison.op, at: offset, text: text))
            }
            return .test(field, comparison.op, literals)
        }
    }

    /// A literal suited to its field (an id literal in its 18-character form), or the error
    /// Salesforce gives for one that is not.
    private static func check(_ literal: Literal, for field: Field, op: SOQLQuery.Operator, at offset: Int, text: String) throws(APIError) -> Literal
    {
        if literal == .null {
            guard [.equal, .notEqual, .in, .notIn].contains(op) else {
                throw SOQLError.at(offset, in: text, "unexpected token: 'null'")
            }
            return literal
        }
        func typeError(_ type: String, quoted: Bool) -> APIError {
            SOQLError.at(
                offset, in: text,
                "value of filter criterion for field '\(field.name)' must be of type \(type) and should \(quoted ? "" : "not ")be enclosed in quotes",
                code: "INVALID_FIELD")
        }
        switch field.type {
        case "id", "reference":
            guard case .string(let value) = literal else { throw typeError("id", quoted: true) }
            if op == .like { return literal }
            guard let id = SalesforceID.canonical(value) else {
                throw SOQLError.at(offset, in: text, "invalid ID field: \(value)", code: "INVALID_QUERY_FILTER_OPERATOR")
            }
            return .string(id)
        case "boolean":
            guard case .bool = literal else { throw typeError("boolean", quoted: false) }
        case "int", "double", "currency", "percent":
            guard case .number = literal else { throw typeError("double", quoted: false) }
        case "date":
            guard case .date(let days) = literal else { throw typeError("date", quoted: false) }
            // Stored dates are `YYYY-MM-DD`: compared as text once the literal is too.
            return .string(SalesforceTime.formatDate(days: days))
        case "datetime":
            guard case .dateTime(let instant) = literal else { throw typeError("dateTime", quoted: false) }
            // Stored datetimes are canonical UTC text, whose order is the instants' order.
            return .string(SalesforceTime.format(instant))
        default:
            guard case .string = literal else { throw typeError("string", quoted: true) }
        }
        return literal
    }

    // MARK: - Running

    /// The rows of `rows` that match, in order, after `OFFSET` and `LIMIT`.
    func run(_ rows: [(id: String, fields: [String: JSON])]) -> [(id: String, fields: [String: JSON])] {
        var matching = rows.filter { row in predicate.map { Self.matches($0, row.fields) } ?? true }
        if !order.isEmpty {
            // A stable sort of rows already in Id order: ties stay in Id order.
            matching = matching.enumerated().sorted { a, b in
                for key in order {
                    let result = Self.orderCompare(a.element.fields[key.field.name] ?? .null, b.element.fields[key.field.name] ?? .null, key)
                    if result != 0 { return result < 0 }
                }
                return a.offset < b.offset
            }.map(\.element)
        }
        if let offset { matching = Array(matching.dropFirst(offset)) }
        if let limit { matching = Array(matching.prefix(limit)) }
        return matching
    }

    private static func matches(_ predicate: Predicate, _ row: [String: JSON]) -> Bool {
        switch predicate {
        case .and(let terms): return terms.allSatisfy { matches($0, row) }
        case .or(let terms): return terms.contains { matches($0, row) }
        case .not(let term): return !matches(term, row)
        case .test(let field, let op, let literals):
            let value = row[field.name] ?? .null
            switch op {
            case .equal: return equal(value, literals[0], field)
            case .notEqual: return !equal(value, literals[0], field)
            case .in: return literals.contains { equal(value, $0, field) }
            case .notIn: return !literals.contains { equal(value, $0, field) }
            case .like:
                guard let text = value.string, case .string(let pattern) = literals[0] else { return false }
                return like(Array(text.lowercased()), Array(pattern.lowercased()))
            case .includes, .excludes:
                let present = Set((value.string ?? "").split(separator: ";").map { $0.lowercased() })
                let any = literals.contains { literal in
                    guard case .string(let wanted) = literal else { return false }
                    return wanted.split(separator: ";").allSatisfy { present.contains($0.lowercased()) }
                }
                return op == .includes ? any : !any
            case .less, .lessOrEqual, .greater, .greaterOrEqual:
                guard let result = compare(value, literals[0], field) else { return false }
                switch op {
                case .less: return result < 0
                case .lessOrEqual: return result <= 0
                case .greater: return result > 0
                default: return result >= 0
                }
            }
        }
    }

    private static func equal(_ value: JSON, _ literal: Literal, _ field: Field) -> Bool {
        if literal == .null { return value.isNull }
        return compare(value, literal, field) == 0
    }

    /// How a stored value compares with a checked literal (nil when the value is null). Date
    /// and datetime literals arrive as the server's own text (see `check`).
    private static func compare(_ value: JSON, _ literal: Literal, _ field: Field) -> Int? {
        switch (literal, value) {
        case (.null, _), (_, .null): return nil
        case (.string(let wanted), .string(let text)):
            let wanted = plain(wanted)
            if ["id", "reference", "date"].contains(field.type) { return order(text, wanted) }
            if field.type == "datetime" {
                guard !isCanonical(text), let stored = SalesforceTime.parse(text), let instant = SalesforceTime.parse(wanted) else {
                    return order(text, wanted)
                }
                return order(stored, instant)
            }
            return order(text.lowercased(), wanted.lowercased())
        case (.number(let wanted), _):
            guard let number = value.number else { return nil }
            return order(number, wanted)
        case (.bool(let wanted), .bool(let bool)): return bool == wanted ? 0 : 1
        default: return nil
        }
    }

    /// How two stored values of one `ORDER BY` key compare, nulls placed as the key says.
    private static func orderCompare(_ a: JSON, _ b: JSON, _ key: (field: Field, descending: Bool, nullsLast: Bool)) -> Int {
        switch (a.isNull, b.isNull) {
        case (true, true): return 0
        case (true, false): return key.nullsLast ? 1 : -1
        case (false, true): return key.nullsLast ? -1 : 1
        default: break
        }
        var result: Int
        switch (a, b) {
        case (.string(let x), .string(let y)):
            switch key.field.type {
            case "datetime" where isCanonical(x) && isCanonical(y): result = order(x, y)
            case "datetime": result = order(SalesforceTime.parse(x) ?? 0, SalesforceTime.parse(y) ?? 0)
            case "id", "reference", "date": result = order(x, y)
            default: result = order(x.lowercased(), y.lowercased())
            }
        case (.bool(let x), .bool(let y)): result = x == y ? 0 : (x ? 1 : -1)
        default: result = order(a.number ?? 0, b.number ?? 0)
        }
        return key.descending ? -result : result
    }

    /// Whether a datetime is in the server's own form (`2024-05-01T10:00:00.000+0000`), whose
    /// text order is the order of the instants.
    private static func isCanonical(_ text: String) -> Bool { text.utf8.count == 28 && text.hasSuffix("+0000") }

    private static func order<T: Comparable>(_ a: T, _ b: T) -> Int { a < b ? -1 : a == b ? 0 : 1 }

    /// A string literal with its escaped `%` and `_` back as plain characters.
    private static func plain(_ text: String) -> String {
        String(text.map { $0 == SOQLLexer.literalPercent ? "%" : $0 == SOQLLexer.literalUnderscore ? "_" : $0 })
    }

    /// `LIKE`: `%` any run, `_` any one character; escaped ones match themselves.
    private static func like(_ text: [Character], _ pattern: [Character]) -> Bool {
        var previous = [Bool](repeating: false, count: text.count + 1)
        previous[0] = true
        for char in pattern {
            var row = [Bool](repeating: false, count: text.count + 1)
            if char == "%" {
                row[0] = previous[0]
                for i in stride(from: 1, through: text.count, by: 1) { row[i] = row[i - 1] || previous[i] }
            } else {
                let wanted: Character? = char == "_" ? nil : char == SOQLLexer.literalPercent ? "%" : char == SOQLLexer.literalUnderscore ? "_" : char
                for i in stride(from: 1, through: text.count, by: 1) {
                    row[i] = previous[i - 1] && (wanted == nil || text[i - 1] == wanted)
                }
            }
            previous = row
        }
        return previous[text.count]
    }
}
