import ArgumentParser
import Satchel

/// One `--where` condition of `satchel find`: `ATTR OP VALUE` in one argument.
///
/// OP is one of `=` (or `==`) `!=` `<` `<=` `>` `>=` `^=` (prefix) `~=` (contains) or `in` (a
/// comma list, written with spaces around it: `brand in Acme,Globex`). The first operator in the
/// text splits it, so attribute names cannot contain operator characters. Spaces around the
/// attribute and the value are ignored. VALUE is read as JSON when it parses, else as a string
/// (`price=10` is the number 10, `name=Widget` and `name="10"` are strings); each element of an
/// `in` list is read the same way on its own.
///
/// A mistake is a usage error, never a silent other question: a VALUE (or list element) that is
/// empty or starts with an operator character (`price<<100`, `brand= =Acme`) must be written as a
/// JSON string (`name=""`, `name="<b>"`).
struct WhereClause: Equatable {
    enum Operator: String, CaseIterable {
        case equal = "=", doubleEqual = "==", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
        case beginsWith = "^=", contains = "~=", oneOf = "in"
    }

    var attribute: String
    var op: Operator
    var value: JSONValue

    /// Symbolic operators, longest first so `<=` wins over `<` at the same place.
    private static let symbols: [Operator] = [
        .doubleEqual, .notEqual, .lessOrEqual, .greaterOrEqual, .beginsWith, .contains, .equal, .less, .greater,
    ]
    /// The characters operators are made of: a value starting with one is a typo.
    private static let operatorCharacters: Set<Unicode.Scalar> = ["=", "!", "<", ">", "^", "~"]
    static let operatorList = "= == != < <= > >= ^= ~= in"

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
            throw ValidationError("condition '\(text)' has no operator (use \(Self.operatorList))")
        }
        var attributeText = String(String.UnicodeScalarView(scalars[..<found.index]))
        var valueText = String(String.UnicodeScalarView(scalars[(found.index + found.length)...]))
        attributeText = attributeText.trimmingSpaces
        valueText = valueText.trimmingSpaces
        guard !attributeText.isEmpty else { throw ValidationError("condition '\(text)' has no attribute") }
        attribute = attributeText
        op = found.op == .doubleEqual ? .equal : found.op
        if op == .oneOf {
            let elements = valueText.split(separator: ",", omittingEmptySubsequences: false).map { String($0).trimmingSpaces }
            value = .array(try elements.map { try Self.readValue($0, in: text) })
        } else {
            value = try Self.readValue(valueText, in: text)
        }
    }

    /// The clause as a condition, with Satchel's query semantics (docs/QUERIES.md).
    var condition: Condition {
        let field = Field(attribute)
        switch op {
        case .equal, .doubleEqual: return field == value
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

    /// JSON when it parses, else the text as a string; empty text, or text that starts with an
    /// operator character, must be quoted.
    static func readValue(_ text: String, in clause: String) throws -> JSONValue {
        if let json = try? JSONValue(parsing: text) { return json }
        guard let first = text.unicodeScalars.first else {
            throw ValidationError("condition '\(clause)' has an empty value (write \"\" for the empty string)")
        }
        if operatorCharacters.contains(first) {
            throw ValidationError(
                "condition '\(clause)': the value '\(text)' starts with an operator character (operators: \(operatorList); quote a value that starts so, as in name=\"\(text)\")"
            )
        }
        return .string(text)
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
