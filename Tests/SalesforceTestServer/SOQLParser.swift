/// A parsed SOQL query, names as written (the evaluator resolves them against the describe).
///
/// ```
/// SELECT f1, f2, … | COUNT() FROM Object
///   [WHERE condition]
///   [ORDER BY f [ASC|DESC] [NULLS FIRST|LAST], …]
///   [LIMIT n] [OFFSET n]
/// ```
struct SOQLQuery {
    /// A name and where it was written.
    struct Name {
        var text: String
        var offset: Int
    }

    struct Order {
        var field: Name
        var descending = false
        /// Salesforce's default: nulls first, ascending or not.
        var nullsLast = false
    }

    enum Literal: Equatable {
        case string(String)
        case number(Double)
        case bool(Bool)
        case null
        case date(Int64)
        case dateTime(Int64)
    }

    enum Operator: String {
        case equal = "=", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
        case like = "LIKE", `in` = "IN", notIn = "NOT IN", includes = "INCLUDES", excludes = "EXCLUDES"
    }

    struct Comparison {
        var field: Name
        var op: Operator
        /// One value, or the list of `IN`, `NOT IN`, `INCLUDES`, `EXCLUDES`.
        var values: [(literal: Literal, offset: Int)]
    }

    indirect enum Condition {
        case and([Condition])
        case or([Condition])
        case not(Condition)
        case comparison(Comparison)
    }

    var query: String
    var fields: [Name] = []
    /// `SELECT COUNT()`: only `totalSize` is answered.
    var count = false
    var object = Name(text: "", offset: 0)
    var condition: Condition?
    var order: [Order] = []
    var limit: Int?
    var offset: Int?
}

/// A recursive-descent parser of the SOQL subset above. As in Salesforce, `AND` and `OR` may
/// not be mixed at one level without parentheses, keywords are case-insensitive, and any
/// other syntax is `MALFORMED_QUERY` with the place it went wrong.
struct SOQLParser {
    private static let keywords: Set<String> = [
        "SELECT", "FROM", "WHERE", "AND", "OR", "NOT", "ORDER", "BY", "ASC", "DESC", "NULLS", "FIRST", "LAST", "LIMIT",
        "OFFSET", "IN", "LIKE", "INCLUDES", "EXCLUDES", "TRUE", "FALSE", "NULL", "GROUP", "HAVING", "WITH", "FOR", "USING",
    ]

    private let query: String
    private let tokens: [SOQLToken]
    private var index = 0

    init(_ query: String) throws(APIError) {
        self.query = query
        var lexer = SOQLLexer(query)
        tokens = try lexer.tokens()
    }

    /// Parses the whole query.
    mutating func parse() throws(APIError) -> SOQLQuery {
        var result = SOQLQuery(query: query)
        try expect("SELECT")
        if isWord("COUNT"), case .symbol("(")? = peek(1)?.kind {
            index += 2
            try expectSymbol(")")
            result.count = true
        } else {
            repeat { result.fields.append(try name()) } while acceptSymbol(",")
        }
        try expect("FROM")
        result.object = try objectName()
        if accept("WHERE") { result.condition = try condition() }
        if accept("ORDER") {
            try expect("BY")
            repeat {
                var item = SOQLQuery.Order(field: try name())
                if accept("DESC") { item.descending = true } else { _ = accept("ASC") }
                if accept("NULLS") {
                    if accept("LAST") { item.nullsLast = true } else { try expect("FIRST") }
                }
                result.order.append(item)
            } while acceptSymbol(",")
        }
        if accept("LIMIT") { result.limit = try integer() }
        if accept("OFFSET") { result.offset = try integer() }
        guard case .end = current.kind else { throw unexpected() }
        return result
    }

    // MARK: - Conditions

    /// `a AND b AND …`, `a OR b OR …`, or one term: never both operators at one level.
    private mutating func condition() throws(APIError) -> SOQLQuery.Condition {
        let first = try term()
        if isWord("AND") {
            var terms = [first]
            while accept("AND") { terms.append(try term()) }
            if isWord("OR") { throw unexpected() }
            return .and(terms)
        }
        if isWord("OR") {
            var terms = [first]
            while accept("OR") { terms.append(try term()) }
            if isWord("AND") { throw unexpected() }
            return .or(terms)
        }
        return first
    }

    /// `NOT term`, `( condition )`, or a comparison.
    private mutating func term() throws(APIError) -> SOQLQuery.Condition {
        if accept("NOT") { return .not(try term()) }
        if acceptSymbol("(") {
            let inner = try condition()
            try expectSymbol(")")
            return inner
        }
        let field = try name()
        let op: SOQLQuery.Operator
        switch current.kind {
        case .symbol(let symbol) where ["=", "!=", "<>", "<", "<=", ">", ">="].contains(symbol):
            index += 1
            op = symbol == "<>" ? .notEqual : SOQLQuery.Operator(rawValue: symbol)!
        case .word(let word):
            switch word.uppercased() {
            case "LIKE": op = .like
            case "IN": op = .in
            case "INCLUDES": op = .includes
            case "EXCLUDES": op = .excludes
            case "NOT":
                index += 1
                guard isWord("IN") else { throw unexpected() }
                op = .notIn
            default: throw unexpected()
            }
            index += 1
        default: throw unexpected()
        }
        if [.in, .notIn, .includes, .excludes].contains(op) {
            try expectSymbol("(")
            var values: [(literal: SOQLQuery.Literal, offset: Int)] = []
            repeat { values.append(try literal()) } while acceptSymbol(",")
            try expectSymbol(")")
            return .comparison(SOQLQuery.Comparison(field: field, op: op, values: values))
        }
        return .comparison(SOQLQuery.Comparison(field: field, op: op, values: [try literal()]))
    }

    private mutating func literal() throws(APIError) -> (literal: SOQLQuery.Literal, offset: Int) {
        let token = current
        let value: SOQLQuery.Literal
        switch token.kind {
        case .string(let text): value = .string(text)
        case .number(let text):
            guard let number = Double(text) else { throw unexpected() }
            value = .number(number)
        case .date(let days): value = .date(days)
        case .dateTime(let instant): value = .dateTime(instant)
        case .word(let word):
            switch word.uppercased() {
            case "TRUE": value = .bool(true)
            case "FALSE": value = .bool(false)
            case "NULL": value = .null
            default: throw unexpected()
            }
        default: throw unexpected()
        }
        index += 1
        return (value, token.offset)
    }

    // MARK: - Tokens

    private var current: SOQLToken { tokens[index] }

    private func peek(_ ahead: Int) -> SOQLToken? { index + ahead < tokens.count ? tokens[index + ahead] : nil }

    private func isWord(_ keyword: String) -> Bool {
        if case .word(let word) = current.kind { word.uppercased() == keyword } else { false }
    }

    private mutating func accept(_ keyword: String) -> Bool {
        guard isWord(keyword) else { return false }
        index += 1
        return true
    }

    private mutating func expect(_ keyword: String) throws(APIError) {
        guard accept(keyword) else { throw unexpected() }
    }

    private mutating func acceptSymbol(_ symbol: String) -> Bool {
        guard case .symbol(symbol) = current.kind else { return false }
        index += 1
        return true
    }

    private mutating func expectSymbol(_ symbol: String) throws(APIError) {
        guard acceptSymbol(symbol) else { throw unexpected() }
    }

    /// The object after `FROM`: any word, keywords included (Salesforce's standard `Order`
    /// object is queried as `FROM Order`).
    private mutating func objectName() throws(APIError) -> SOQLQuery.Name {
        guard case .word(let word) = current.kind else { throw unexpected() }
        index += 1
        return SOQLQuery.Name(text: word, offset: tokens[index - 1].offset)
    }

    /// A field or object name (not a keyword).
    private mutating func name() throws(APIError) -> SOQLQuery.Name {
        guard case .word(let word) = current.kind, !Self.keywords.contains(word.uppercased()) else { throw unexpected() }
        index += 1
        return SOQLQuery.Name(text: word, offset: tokens[index - 1].offset)
    }

    private mutating func integer() throws(APIError) -> Int {
        guard case .number(let text) = current.kind, let value = Int(text), value >= 0 else { throw unexpected() }
        index += 1
        return value
    }

    private func unexpected() -> APIError {
        SOQLError.at(current.offset, in: query, "unexpected token: '\(current.text)'")
    }
}
