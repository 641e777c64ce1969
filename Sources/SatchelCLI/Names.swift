import ArgumentParser
import Satchel

/// Suggestions for a mistyped name: a model, a subcommand; and the paths options take.
enum Names {
    /// The path `text` names (`address.city`, `items[].product`), or why it is not one: an empty
    /// name along it (`a..b`, `.a`, `a.`), or `[]` anywhere but at the end of a name
    /// (`items[]product`), are mistakes, never a question about such a name. Written as a JSON
    /// string (`"unit price"`, `"a.b"`), `text` is one attribute's name, whatever it holds
    /// (``attribute(_:)``): so a name with a dot, a space, a comma or an operator is reached (not
    /// one ending in `[]`, which a path reads as an array's elements: refused).
    static func path(_ text: String) throws(ValidationError) -> Field {
        if text.hasPrefix("\"") {
            if text == "\"\"" { return try attribute("") }
            do { return try Field(written: text) } catch { throw ValidationError(error.message) }
        }
        let field = Field(text)
        // `items[0]` among them: a position in an array, which a path does not take (it would
        // read an attribute so named, and answer nothing: a black-box probe).
        if let wrong = field.malformation { throw ValidationError(wrong) }
        return field
    }

    /// The attribute named `name`, one name even when it holds a dot; one ending in `[]` is
    /// refused (a path reads that as an array's elements: a black-box probe found `"i[]"=2`
    /// asked of the elements of `i`).
    static func attribute(_ name: String) throws(ValidationError) -> Field {
        guard !name.isEmpty else { throw ValidationError("\"\" names no attribute: an attribute's name is not empty") }
        do { return try Field(written: String(decoding: JSONValue.string(name).jsonBytes, as: UTF8.self)) } catch {
            throw ValidationError(error.message)
        }
    }

    /// `name` as a line of text shows it: as it is, or, when it holds a control character (a
    /// line break among them), starts with a double quote or holds a single one, as a JSON
    /// string, escaped (black-box probes: a model named "A\nB" split a `stats` line, and read as
    /// "A B" in an error; one named `"a\nb"` read as the first, `x', 'y` as two models).
    static func shown(_ name: String) -> String {
        let plain =
            !name.hasPrefix("\"") && !name.contains("'")
            && !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0 == "\u{2028}" || $0 == "\u{2029}" })
        return plain ? name : JSONValue.string(name).description
    }

    /// `names`, the nearest to `name` first (by edit distance, letter case aside; ties by name).
    static func nearestFirst(to name: String, among names: [String]) -> [String] {
        names.map { (name: $0, distance: distance(name.lowercased(), $0.lowercased())) }
            .sorted { $0.distance != $1.distance ? $0.distance < $1.distance : $0.name < $1.name }
            .map(\.name)
    }

    /// The name in `names` within a third of `name`'s length of it (two edits at least), if any.
    static func suggestion(for name: String, among names: [String]) -> String? {
        guard let nearest = nearestFirst(to: name, among: names).first else { return nil }
        return distance(name.lowercased(), nearest.lowercased()) <= max(2, name.count / 3) ? nearest : nil
    }

    /// The Levenshtein distance between two strings, by Unicode scalars.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a.unicodeScalars), b = Array(b.unicodeScalars)
        if a.isEmpty { return b.count }
        var previous = Array(0...b.count)
        var current = previous
        for i in 1...a.count {
            current[0] = i
            for j in stride(from: 1, through: b.count, by: 1) {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
