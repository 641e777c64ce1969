import Foundation

/// Turns the README's Swift tours into test code, so that the tests run the README's own lines
/// and the two cannot drift apart: `ReadmeTourGenerator README.md OUTPUT.swift`.
///
/// It takes the first ```swift block of each section in `tours`, hoists their imports, replaces
/// the few placeholders a reader fills in (a store path, a file, the server) with the test's
/// (each must appear, or the generation fails), and writes `storeTour`, the first tour alone, and
/// `syncTour`, both in order as a reader runs them, into an extension of the test target's
/// `ReadmeTour`. `print` inside them records the line on the tour instead.
enum Generator {
    static let tours = ["The Swift API in a minute", "Sync in a minute"]
    static let placeholders: [(text: String, replacement: String)] = [
        ("\"/path/to/MyApp.satchel\"", "tour.storePath"),
        ("\"/path/to/MyApp-backup.satchel\"", "tour.backupPath"),
        ("\"/path/to/Secret.satchel\"", "tour.secretPath"),
        ("URL(fileURLWithPath: \"products.json\")", "tour.productsFile"),
        ("InMemoryBackend()", "tour.server"),
    ]

    /// One tour: where it is, its imports, and its other lines.
    struct Tour {
        var section: String
        var firstLine: Int
        var imports: [String]
        var body: [String]
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The first ```swift block under the heading `## section` of `lines`.
    static func tour(_ section: String, in lines: [String]) throws -> Tour {
        guard let heading = lines.firstIndex(of: "## \(section)") else { throw Failure(description: "README.md has no section '## \(section)'") }
        var index = heading + 1
        while index < lines.count, !lines[index].hasPrefix("## ") {
            if lines[index] == "```swift" {
                guard let end = lines[(index + 1)...].firstIndex(of: "```") else {
                    throw Failure(description: "the Swift block of '\(section)' never ends")
                }
                let code = lines[(index + 1)..<end]
                return Tour(
                    section: section, firstLine: index + 2, imports: code.filter { $0.hasPrefix("import ") },
                    body: code.filter { !$0.hasPrefix("import ") })
            }
            index += 1
        }
        throw Failure(description: "the section '\(section)' has no ```swift block")
    }

    /// `_ = name` for each top-level `let` / `var` of `body`: a tour names values to show them,
    /// and an unused value must not be a warning.
    static func uses(_ body: [String]) -> [String] {
        body.compactMap { line -> String? in
            for keyword in ["let ", "var "] where line.hasPrefix(keyword) {
                let name = line.dropFirst(keyword.count).prefix { $0.isLetter || $0.isNumber || $0 == "_" }
                return name.isEmpty ? nil : "_ = \(name)"
            }
            return nil
        }
    }

    static func function(_ name: String, isAsync: Bool, _ tours: [Tour]) -> String {
        let sources = tours.map { "README.md line \($0.firstLine) (\"\($0.section)\")" }.joined(separator: ", then ")
        var text = "    /// \(sources).\n"
        text += "    static func \(name)(_ tour: ReadmeTour) \(isAsync ? "async " : "")throws {\n"
        text += "        @Sendable func print(_ items: Any..., separator: String = \" \", terminator: String = \"\\n\") {\n"
        text += "            tour.record(items.map { \"\\($0)\" }.joined(separator: separator))\n"
        text += "        }\n"
        for part in tours {
            text += "        // README.md, \"\(part.section)\"\n"
            for line in part.body {
                let replaced = placeholders.reduce(line) { $0.replacingOccurrences(of: $1.text, with: $1.replacement) }
                text += replaced.isEmpty ? "\n" : "        \(replaced)\n"
            }
        }
        let names = tours.flatMap { uses($0.body) }
        if !names.isEmpty { text += "        // Values the README names only to show them.\n" }
        for use in names { text += "        \(use)\n" }
        text += "    }\n"
        return text
    }

    static func generate(readme: String) throws -> String {
        let lines = readme.components(separatedBy: "\n")
        let parts = try tours.map { try tour($0, in: lines) }
        let everything = parts.flatMap(\.body).joined(separator: "\n")
        for placeholder in placeholders where !everything.contains(placeholder.text) {
            throw Failure(
                description: "the README's tours no longer contain \(placeholder.text), which the tests replace with \(placeholder.replacement)")
        }
        var imports = ["import Foundation"]
        for line in parts.flatMap(\.imports) where !imports.contains(line) { imports.append(line) }
        var output = "// Generated from README.md by the ReadmeTour build plugin (Tests/ReadmeTourGenerator): edit the\n"
        output += "// README, not this file.\n"
        output += imports.joined(separator: "\n") + "\n\n"
        output += "extension ReadmeTour {\n"
        output += function("storeTour", isAsync: true, [parts[0]])
        output += "\n"
        output += function("syncTour", isAsync: true, parts)
        output += "}\n"
        return output
    }
}

let arguments = CommandLine.arguments
do {
    guard arguments.count == 3 else { throw Generator.Failure(description: "usage: ReadmeTourGenerator README.md OUTPUT.swift") }
    let readme = try String(contentsOfFile: arguments[1], encoding: .utf8)
    try Generator.generate(readme: readme).write(toFile: arguments[2], atomically: true, encoding: .utf8)
} catch {
    FileHandle.standardError.write(Data("ReadmeTourGenerator: error: \(error)\n".utf8))
    exit(1)
}
