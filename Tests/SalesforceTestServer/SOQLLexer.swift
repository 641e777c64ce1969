/// A SOQL token and where it starts in the query (a character offset, for the `ERROR at
/// Row:R:Column:C` of Salesforce's messages).
struct SOQLToken {
    enum Kind: Equatable {
        /// A name or a keyword (keywords are recognised case-insensitively by the parser).
        case word(String)
        /// A `'quoted'` string, escapes resolved; an escaped `%` or `_` is kept apart as
        /// ``SOQLLexer/literalPercent`` / ``SOQLLexer/literalUnderscore`` so `LIKE` can tell
        /// it from a wildcard.
        case string(String)
        /// A number as written (`12`, `-3.5`).
        case number(String)
        /// An unquoted date literal `2024-05-01`: its day number.
        case date(Int64)
        /// An unquoted datetime literal `2024-05-01T10:00:00Z` (any offset): its instant.
        case dateTime(Int64)
        /// `,` `(` `)` `=` `!=` `<>` `<` `<=` `>` `>=`.
        case symbol(String)
        case end
    }

    var kind: Kind
    var offset: Int
    /// The token as written.
    var text: String
}

/// Splits SOQL into tokens. Keywords are case-insensitive; string literals take backslash
/// escapes (`\'`, `\"`, `\\`, `\n`, `\r`, `\t`, `\b`, `\f`, `\uXXXX`, and `\%`, `\_` for
/// `LIKE`); date and datetime literals are unquoted.
struct SOQLLexer {
    /// An escaped `%` in a string literal (a literal percent sign for `LIKE`).
    static let literalPercent: Character = "\u{E000}"
    /// An escaped `_` in a string literal.
    static let literalUnderscore: Character = "\u{E001}"

    let query: String
    private let chars: [Character]
    private var index = 0

    init(_ query: String) {
        self.query = query
        chars = Array(query)
    }

    /// Every token of the query, ending with `.end`.
    mutating func tokens() throws(APIError) -> [SOQLToken] {
        var tokens: [SOQLToken] = []
        while true {
            while index < chars.count, chars[index].isWhitespace { index += 1 }
            guard index < chars.count else {
                tokens.append(SOQLToken(kind: .end, offset: chars.count, text: "<EOF>"))
                return tokens
            }
            tokens.append(try next())
        }
    }

    private mutating func next() throws(APIError) -> SOQLToken {
        let start = index
        let char = chars[index]
        if char == "'" { return try string() }
        if char.isNumber || (char == "-" && index + 1 < chars.count && chars[index + 1].isNumber)
            || (char == "." && index + 1 < chars.count && chars[index + 1].isNumber)
        {
            return try numberOrDate()
        }
        if char.isLetter || char == "_" {
            while index < chars.count, chars[index].isLetter || chars[index].isNumber || chars[index] == "_" || chars[index] == "." { index += 1 }
            let text = String(chars[start..<index])
            return SOQLToken(kind: .word(text), offset: start, text: text)
        }
        for symbol in ["!=", "<>", "<=", ">=", "=", "<", ">", ",", "(", ")"] where matches(symbol) {
            index += symbol.count
            return SOQLToken(kind: .symbol(symbol), offset: start, text: symbol)
        }
        index += 1
        throw SOQLError.at(start, in: query, "unexpected token: '\(char)'")
    }

    private func matches(_ symbol: String) -> Bool {
        let symbol = Array(symbol)
        return index + symbol.count <= chars.count && Array(chars[index..<index + symbol.count]) == symbol
    }

    private mutating func string() throws(APIError) -> SOQLToken {
        let start = index
        index += 1
        var value = ""
        while index < chars.count {
            let char = chars[index]
            index += 1
            if char == "'" { return SOQLToken(kind: .string(value), offset: start, text: String(chars[start..<index])) }
            guard char == "\\" else {
                value.append(char)
                continue
            }
            guard index < chars.count else { break }
            let escape = chars[index]
            index += 1
            switch escape {
            case "'", "\"", "\\": value.append(escape)
            case "n": value.append("\n")
            case "r": value.append("\r")
            case "t": value.append("\t")
            case "b": value.append("\u{08}")
            case "f": value.append("\u{0C}")
            case "%": value.append(Self.literalPercent)
            case "_": value.append(Self.literalUnderscore)
            case "u":
                guard index + 4 <= chars.count, let code = UInt32(String(chars[index..<index + 4]), radix: 16),
                    let scalar = Unicode.Scalar(code)
                else {
                    throw SOQLError.at(start, in: query, "Invalid string literal '\(String(chars[start..<index]))'. Illegal escape sequence '\\u'")
                }
                index += 4
                value.unicodeScalars.append(scalar)
            default:
                throw SOQLError.at(
                    start, in: query,
                    "Invalid string literal '\(String(chars[start..<min(index, chars.count)]))'. Illegal escape sequence '\\\(escape)'")
            }
        }
        throw SOQLError.at(start, in: query, "unexpected token: '\(String(chars[start..<chars.count]))'")
    }

    /// A number, or an unquoted `YYYY-MM-DD` date or datetime literal.
    private mutating func numberOrDate() throws(APIError) -> SOQLToken {
        let start = index
        if isDateAhead() {
            index += 10
            if index < chars.count, chars[index] == "T" || chars[index] == "t" {
                while index < chars.count, chars[index].isNumber || ":.+-TtZz".contains(chars[index]) { index += 1 }
                let text = String(chars[start..<index])
                // SOQL's forms: `…T01:02:03Z`, `…+01:00`, `…-08:00`; no fraction, no `+0000`.
                let bytes = Array(text.utf8)
                let shaped =
                    (bytes.count == 20 && (bytes[19] == UInt8(ascii: "Z") || bytes[19] == UInt8(ascii: "z")))
                    || (bytes.count == 25 && (bytes[19] == UInt8(ascii: "+") || bytes[19] == UInt8(ascii: "-")) && bytes[22] == UInt8(ascii: ":"))
                guard shaped, let instant = SalesforceTime.parse(text) else {
                    throw SOQLError.at(start, in: query, "line 1:\(start) no viable alternative at character '\(text)'")
                }
                return SOQLToken(kind: .dateTime(instant), offset: start, text: text)
            }
            let text = String(chars[start..<index])
            guard let days = SalesforceTime.parseDate(text) else {
                throw SOQLError.at(start, in: query, "line 1:\(start) no viable alternative at character '\(text)'")
            }
            return SOQLToken(kind: .date(days), offset: start, text: text)
        }
        if chars[index] == "-" { index += 1 }
        while index < chars.count, chars[index].isNumber { index += 1 }
        if index < chars.count, chars[index] == "." {
            index += 1
            while index < chars.count, chars[index].isNumber { index += 1 }
        }
        let text = String(chars[start..<index])
        if index < chars.count, chars[index].isLetter || chars[index] == "_" {
            throw SOQLError.at(start, in: query, "unexpected token: '\(text)\(chars[index])'")
        }
        return SOQLToken(kind: .number(text), offset: start, text: text)
    }

    private func isDateAhead() -> Bool {
        guard index + 10 <= chars.count else { return false }
        let pattern = Array("dddd-dd-dd")
        for (offset, kind) in pattern.enumerated() {
            let char = chars[index + offset]
            if kind == "d" ? !(char.isASCII && char.isNumber) : char != "-" { return false }
        }
        return true
    }
}

/// SOQL errors as Salesforce words them: the query, a caret under the offending place, and
/// `ERROR at Row:R:Column:C`, then the message.
enum SOQLError {
    static func at(_ offset: Int, in query: String, _ message: String, code: String = "MALFORMED_QUERY") -> APIError {
        let chars = Array(query)
        var row = 1
        var lineStart = 0
        for (index, char) in chars.prefix(offset).enumerated() where char == "\n" {
            row += 1
            lineStart = index + 1
        }
        let lineEnd = chars[lineStart...].firstIndex(of: "\n") ?? chars.count
        let line = String(chars[lineStart..<lineEnd])
        let column = offset - lineStart + 1
        let caret = String(repeating: " ", count: max(0, column - 1)) + "^"
        return APIError(400, code, "\n\(line)\n\(caret)\nERROR at Row:\(row):Column:\(column)\n\(message)")
    }
}
