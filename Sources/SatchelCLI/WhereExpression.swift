import ArgumentParser
import Satchel

/// The expression of a `--where` option of `satchel find` (and `search`, `aggregate`):
///
/// ```
/// EXPR       := TERM ("or" TERM)*
/// TERM       := FACTOR ("and" FACTOR)*
/// FACTOR     := "not" FACTOR | "(" EXPR ")" | COMPARISON
/// COMPARISON := ATTR OP VALUE | ATTR "in" LIST | ATTR "exists" | ATTR "missing"
/// OP         := = == != < <= > >= ^= (begins with) ~= (contains)
/// LIST       := VALUE ("," VALUE)* | "(" VALUE ("," VALUE)* ")"
/// ```
///
/// `not` binds tighter than `and`, which binds tighter than `or`. A VALUE is a double-quoted JSON
/// string, or a word read as JSON when it parses (`10`, `-2.5`, `true`, `null`, `[1,2]`) and as a
/// string otherwise (`Acme`). A value holding spaces, parentheses, commas, operator characters
/// or one of the words `and or not in exists missing` is written in double quotes
/// (`name="Acme or not"`). An ATTR is a path (`address.city`, `items[].product`), or one
/// attribute's name written as a JSON string, whatever it holds (`"unit price"`, `"a.b"`, `"in"`).
///
/// A mistake is a usage error naming the column where it is, never a silent other question.
struct WhereExpression {
    let condition: Condition

    static let keywords: Set<String> = ["and", "or", "not", "in", "exists", "missing"]
    static let operatorList = "= == != < <= > >= ^= ~= in exists missing"

    init(parsing text: String) throws {
        var parser = Parser(text: text)
        condition = try parser.parse()
    }

    /// Every `--where` option, and-ed.
    static func condition(_ texts: [String]) throws -> Condition {
        try texts.map { try WhereExpression(parsing: $0).condition }.reduce(Condition.all, &&)
    }

    enum Token: Equatable {
        case word(String)
        /// A double-quoted string: a value, or one attribute's name where an attribute goes.
        case quoted(String)
        case symbol(String)
        case open, close, comma
        case end

        var shown: String {
            switch self {
            case .word(let word): "'\(word)'"
            case .quoted(let text): "\"\(text)\""
            case .symbol(let symbol): "'\(symbol)'"
            case .open: "'('"
            case .close: "')'"
            case .comma: "','"
            case .end: "the end"
            }
        }
    }

    struct Parser {
        let text: String
        let scalars: [Unicode.Scalar]
        var tokens: [(token: Token, column: Int)] = []
        var position = 0
        /// How deep the parentheses and `not`s around the current token go.
        var depth = 0
        /// The deepest nesting taken: deeper, the parser's recursion would overflow its stack.
        static let maximumDepth = 200

        init(text: String) {
            self.text = text
            scalars = Array(text.unicodeScalars)
        }

        func failure(_ column: Int, _ message: String) -> ValidationError {
            ValidationError("--where '\(text)': column \(column): \(message)")
        }

        static let operators = ["==", "!=", "<=", ">=", "^=", "~=", "=", "<", ">"]
        static let operatorCharacters: Set<Unicode.Scalar> = ["=", "!", "<", ">", "^", "~"]

        mutating func tokenize() throws {
            var i = 0
            while i < scalars.count {
                let c = scalars[i]
                let column = i + 1
                if c == " " || c == "\t" || c == "\n" {
                    i += 1
                    continue
                }
                switch c {
                case "(":
                    tokens.append((.open, column))
                    i += 1
                case ")":
                    tokens.append((.close, column))
                    i += 1
                case ",":
                    tokens.append((.comma, column))
                    i += 1
                case "\"":
                    let end = try closingQuote(from: i)
                    let literal = String(String.UnicodeScalarView(scalars[i...end]))
                    guard case .string(let value)? = try? JSONValue(parsing: literal) else {
                        throw failure(column, "\(literal) is not a valid JSON string")
                    }
                    tokens.append((.quoted(value), column))
                    i = end + 1
                default:
                    if Self.operatorCharacters.contains(c) {
                        guard let symbol = Self.operators.first(where: { matches($0, at: i) }) else {
                            throw failure(column, "'\(c)' is not an operator (operators: \(WhereExpression.operatorList))")
                        }
                        tokens.append((.symbol(symbol), column))
                        i += symbol.unicodeScalars.count
                    } else if c == "[" || c == "{" {
                        let end = try closingBracket(from: i)
                        tokens.append((.word(String(String.UnicodeScalarView(scalars[i...end]))), column))
                        i = end + 1
                    } else {
                        var end = i
                        while end < scalars.count, !Self.endsWord(scalars[end]) { end += 1 }
                        tokens.append((.word(String(String.UnicodeScalarView(scalars[i..<end]))), column))
                        i = end
                    }
                }
            }
            tokens.append((.end, scalars.count + 1))
        }

        static func endsWord(_ c: Unicode.Scalar) -> Bool {
            c == " " || c == "\t" || c == "\n" || c == "(" || c == ")" || c == "," || c == "\"" || operatorCharacters.contains(c)
        }

        func matches(_ symbol: String, at i: Int) -> Bool {
            let s = Array(symbol.unicodeScalars)
            return i + s.count <= scalars.count && Array(scalars[i..<i + s.count]) == s
        }

        func closingQuote(from start: Int) throws -> Int {
            var i = start + 1
            while i < scalars.count {
                if scalars[i] == "\\" {
                    i += 2
                    continue
                }
                if scalars[i] == "\"" { return i }
                i += 1
            }
            throw failure(start + 1, "a quoted value that is never closed")
        }

        /// The end of a JSON array or object written as a value (brackets balanced, strings skipped).
        func closingBracket(from start: Int) throws -> Int {
            var depth = 0
            var i = start
            while i < scalars.count {
                switch scalars[i] {
                case "\"": i = try closingQuote(from: i)
                case "[", "{": depth += 1
                case "]", "}":
                    depth -= 1
                    if depth == 0 { return i }
                default: break
                }
                i += 1
            }
            throw failure(start + 1, "a '\(scalars[start])' that is never closed")
        }

        var current: (token: Token, column: Int) { tokens[position] }

        mutating func advance() -> (token: Token, column: Int) {
            defer { position += 1 }
            return tokens[position]
        }

        mutating func parse() throws -> Condition {
            try tokenize()
            guard tokens.count > 1 else { throw failure(1, "an empty condition") }
            let condition = try expression()
            guard case .end = current.token else {
                let hint: String
                if case .word = current.token {
                    hint = " (write a value holding spaces in double quotes, as in name=\"Acme Corp\")"
                } else {
                    hint = ""
                }
                throw failure(current.column, "expected 'and', 'or' or the end, found \(current.token.shown)\(hint)")
            }
            return condition
        }

        mutating func expression() throws -> Condition {
            var condition = try term()
            while current.token == .word("or") {
                _ = advance()
                condition = condition || (try term())
            }
            return condition
        }

        mutating func term() throws -> Condition {
            var condition = try factor()
            while current.token == .word("and") {
                _ = advance()
                condition = condition && (try factor())
            }
            return condition
        }

        /// One level deeper into parentheses or `not`s, refused past ``maximumDepth``.
        mutating func enter() throws {
            guard depth < Self.maximumDepth else {
                throw failure(current.column, "parentheses and 'not's nested deeper than \(Self.maximumDepth) levels")
            }
            depth += 1
        }

        mutating func factor() throws -> Condition {
            switch current.token {
            case .word("not"):
                try enter()
                defer { depth -= 1 }
                _ = advance()
                return !(try factor())
            case .open:
                try enter()
                defer { depth -= 1 }
                let open = advance()
                let condition = try expression()
                guard case .close = current.token else {
                    throw failure(current.column, "expected ')' to close the '(' at column \(open.column), found \(current.token.shown)")
                }
                _ = advance()
                return condition
            default:
                return try comparison()
            }
        }

        mutating func comparison() throws -> Condition {
            let (token, column) = advance()
            let field: Field
            let attribute: String
            switch token {
            case .word(let word) where !WhereExpression.keywords.contains(word):
                attribute = word
                do { field = try Names.path(word) } catch { throw failure(column, error.message) }
            case .quoted(let name):
                // One attribute's name, whatever it holds: `"unit price"`, `"a.b"`, `"in"`.
                attribute = "\"\(name)\""
                do { field = try Names.attribute(name) } catch { throw failure(column, error.message) }
            case .word(let keyword):
                throw failure(
                    column, "expected an attribute, found \(token.shown) (an attribute so named is written in double quotes: \"\(keyword)\")")
            default:
                throw failure(column, "expected an attribute, found \(token.shown)")
            }
            let (op, opColumn) = advance()
            switch op {
            case .word("exists"): return field.exists(true)
            case .word("missing"): return field.exists(false)
            case .word("in"): return field.isIn(try list(ids: field == .id))
            case .symbol(let symbol):
                let value = try self.value(after: symbol, column: opColumn, id: field == .id)
                switch symbol {
                case "=", "==": return field == value
                case "!=": return field != value
                case "<": return field < value
                case "<=": return field <= value
                case ">": return field > value
                case ">=": return field >= value
                case "^=":
                    // beginsWith applies to strings; a value that reads as another JSON type matches nothing.
                    // (On this path still: a path the model's arrays cross is refused, as for
                    // any operand, not answered — a black-box probe: `not a.b ^= 1` answered.)
                    guard case .string(let prefix) = value else { return field.exists(true) && .none }
                    return field.beginsWith(prefix)
                default: return field.contains(value)
                }
            default:
                throw failure(opColumn, "expected an operator after '\(attribute)' (\(WhereExpression.operatorList)), found \(op.shown)")
            }
        }

        /// The value after `what`; compared with the id (`id`), one that reads as a number, a
        /// boolean or null is its text: every id is a string (a black-box probe: `object=12345`
        /// matched nothing, in silence).
        mutating func value(after what: String, column: Int, id: Bool = false) throws -> JSONValue {
            let (token, valueColumn) = advance()
            switch token {
            case .quoted(let text): return .string(text)
            case .word(let word):
                if WhereExpression.keywords.contains(word) {
                    throw failure(valueColumn, "'\(word)' is a keyword: write it in double quotes to compare with it (\"\(word)\")")
                }
                if let json = try? JSONValue(parsing: word) {
                    if id, json.arrayValue == nil, json.objectValue == nil { return .string(word) }
                    return json
                }
                if word.hasPrefix("[") || word.hasPrefix("{") { throw failure(valueColumn, "\(word) is not valid JSON") }
                return .string(word)
            case .end:
                throw failure(valueColumn, "expected a value after '\(what)' (write \"\" for the empty string)")
            default:
                throw failure(
                    valueColumn, "expected a value after '\(what)', found \(token.shown) (quote a value that starts so, as in name=\"<b>\")")
            }
        }

        mutating func list(ids: Bool) throws -> [JSONValue] {
            let parenthesized = current.token == .open
            if parenthesized { _ = advance() }
            var values = [try value(after: "in", column: current.column, id: ids)]
            while current.token == .comma {
                _ = advance()
                values.append(try value(after: ",", column: current.column, id: ids))
            }
            if parenthesized {
                guard case .close = current.token else {
                    throw failure(current.column, "expected ',' or ')' in the list, found \(current.token.shown)")
                }
                _ = advance()
            }
            return values
        }
    }
}
