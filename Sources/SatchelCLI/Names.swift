import ArgumentParser
import Satchel

/// Suggestions for a mistyped name: a model, a subcommand; and the paths options take.
enum Names {
    /// The path `text` names (`address.city`, `items[].product`), or why it is not one: an empty
    /// name along it (`a..b`, `.a`, `a.`), or `[]` anywhere but at the end of a name
    /// (`items[]product`), are mistakes, never a question about such a name.
    static func path(_ text: String) throws(ValidationError) -> Field {
        let names = text.split(separator: ".", omittingEmptySubsequences: false)
        if names.contains(where: \.isEmpty) {
            throw ValidationError("'\(text)' has an empty name: a path is names joined by dots, e.g. address.city")
        }
        for name in names where name == "[]" || (name.hasSuffix("[]") ? name.dropLast(2) : name[...]).contains("[]") {
            throw ValidationError("'\(text)': [] ends the name of an array, as in items[].product")
        }
        // `items[0]`: a position in an array, which a path does not take (it would read an
        // attribute so named, and answer nothing: a black-box probe).
        for name in names {
            guard name.hasSuffix("]"), let open = name.lastIndex(of: "["), open > name.startIndex else { continue }
            let inside = name[name.index(after: open)..<name.index(before: name.endIndex)]
            if !inside.isEmpty && inside.allSatisfy(\.isNumber) {
                throw ValidationError(
                    "'\(text)': a path takes no position in an array (\(name)): write \(name[..<open])[] to reach every element")
            }
        }
        return Field(text)
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
