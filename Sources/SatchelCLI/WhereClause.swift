import Satchel

/// One `--where` condition of `satchel find`: `ATTR OP VALUE` in one argument.
///
/// OP is one of `=` `!=` `<` `<=` `>` `>=` `^=` (prefix) `~=` (contains) or `in` (a comma list,
/// written with spaces around it: `brand in Acme,Globex`). The first operator in the text splits
/// it, so attribute names cannot contain operator characters. Spaces around the attribute and the
/// value are ignored. VALUE is read as JSON when it parses, else as a string (`price=10` is the
/// number 10, `name=Widget` and `name="10"` are strings); each element of an `in` list is read
/// the same way on its own.
struct WhereClause: Equatable {
    enum Operator: String, CaseIterable {
        case equal = "=", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
        case beginsWith = "^=", contains = "~=", oneOf = "in"
    }

    var attribute: String
    var op: Operator
    var value: JSONValue

    /// Symbolic operators, longest first so `<=` wins over `<` at the same place.
    private static let symbols: [Operator] = [.notEqual, .lessOrEqual, .greaterOrEqual, .beginsWith, .contains, .equal, .less, .greater]

    init(attribute: String, op: Operator, value: JSONValue) {
        self.attribute = attribute
        self.op = op
        self.value = value
    }

    init(parsing text: String) throws {
        let scalars = Array(text.unicodeScalars)
        var found: (index: Int, length: Int, op: Operator)?
        var i = 0
        search: while i < scalars.count {
            for op in Self.symbols {
                let symbol = Array(op.rawValue.unicodeScalars)
                if i + symbol.count <= scalars.count && Array(scalars[i..<i + symbol.count]) == symbol {
                    found = (i, symbol.count, op)
                    break search
                }
            }
            // " in " with spaces around it.
            let word = Array(" in ".unicodeScalars)
            if i + word.count <= scalars.count && Array(scalars[i..<i + word.count]) == word {
                found = (i, word.count, .oneOf)
                break search
            }
            i += 1
        }
        guard let found else {
            throw SatchelError(.invalidArgument, "condition '\(text)' has no operator (use = != < <= > >= ^= ~= or in)")
        }
        var attributeText = String(String.UnicodeScalarView(scalars[..<found.index]))
        var valueText = String(String.UnicodeScalarView(scalars[(found.index + found.length)...]))
        attributeText = attributeText.trimmingSpaces
        valueText = valueText.trimmingSpaces
        guard !attributeText.isEmpty else { throw SatchelError(.invalidArgument, "condition '\(text)' has no attribute") }
        attribute = attributeText
        op = found.op
        if op == .oneOf {
            value = .array(valueText.split(separator: ",", omittingEmptySubsequences: false).map { Self.readValue(String($0).trimmingSpaces) })
        } else {
            value = Self.readValue(valueText)
        }
    }

    /// The clause as a condition, with Satchel's semantics (DESIGN §3).
    var condition: Condition {
        let field = Field(attribute)
        switch op {
        case .equal: return field == value
        case .notEqual: return field != value
        case .less: return field < value
        case .lessOrEqual: return field <= value
        case .greater: return field > value
        case .greaterOrEqual: return field >= value
        case .beginsWith:
            // beginsWith applies to strings; a value that reads as another JSON type matches nothing.
            guard case .string(let prefix) = value else { return .none }
            return field.beginsWith(prefix)
        case .contains: return field.contains(value)
        case .oneOf: return field.isIn(value.arrayValue ?? [value])
        }
    }

    /// JSON when it parses, else the text as a string.
    static func readValue(_ text: String) -> JSONValue {
        (try? JSONValue(parsing: text)) ?? .string(text)
    }
}

extension String {
    var trimmingSpaces: String {
        var scalars = Substring(self).unicodeScalars
        while let first = scalars.first, first == " " { scalars.removeFirst() }
        while let last = scalars.last, last == " " { scalars.removeLast() }
        return String(scalars)
    }
}
