import Foundation
import SatchelTestSupport
import Testing

/// docs/adapters/WRITING.md against the protocol it describes: every requirement of
/// `SyncBackend` and every `PushOutcome` is on the page, and nothing else is.
@Suite("docs/adapters/WRITING.md")
struct WritingGuideTests {
    static let root = Fixtures.directory.deletingLastPathComponent()

    /// `name` or `name(label:label:)` of each `func`/`var` line of `text`.
    static func signatures(_ text: Substring) -> Set<String> {
        var result = Set<String>()
        for line in text.split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("var ") {
                result.insert(String(trimmed.dropFirst(4).prefix { $0.isLetter || $0.isNumber }))
            } else if trimmed.hasPrefix("func ") {
                let name = trimmed.dropFirst(5).prefix { $0 != "(" }
                let parameters = trimmed.drop { $0 != "(" }.dropFirst().prefix { $0 != ")" }
                let labels = parameters.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).prefix { $0 != " " && $0 != ":" } + ":" }
                result.insert("\(name)(\(labels.joined()))")
            }
        }
        return result
    }

    @Test("the requirements table lists exactly SyncBackend's requirements; the outcomes table every PushOutcome")
    func matchesTheProtocol() throws {
        let page = try String(contentsOf: Self.root.appendingPathComponent("docs/adapters/WRITING.md"), encoding: .utf8)
        let source = try String(contentsOf: Self.root.appendingPathComponent("Sources/SatchelSync/SyncBackend.swift"), encoding: .utf8)
        let start = try #require(source.range(of: "public protocol SyncBackend: Sendable {"))
        let end = try #require(source.range(of: "\n}\n", range: start.upperBound..<source.endIndex))
        let required = Self.signatures(source[start.upperBound..<end.lowerBound])
        #expect(required.count == 18, "\(required.sorted())")

        let table = try #require(
            page.range(of: "<!-- requirements -->").flatMap { a in page.range(of: "<!-- /requirements -->").map { page[a.upperBound..<$0.lowerBound] }
            })
        var documented = Set<String>()
        for line in table.split(separator: "\n") where line.hasPrefix("| `") {
            documented.insert(String(line.dropFirst(3).prefix { $0 != "`" }))
        }
        #expect(documented == required)

        let outcomes = try #require(source.range(of: "public enum PushOutcome").map { source[$0.upperBound...].prefix { $0 != "}" } })
        for line in outcomes.split(separator: "\n") where line.trimmingCharacters(in: .whitespaces).hasPrefix("case ") {
            let name = line.trimmingCharacters(in: .whitespaces).dropFirst(5).prefix { $0.isLetter }
            #expect(page.contains("`.\(name)"), "the page does not name PushOutcome.\(name)")
        }
    }
}
