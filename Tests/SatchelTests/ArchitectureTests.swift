import Foundation
import SatchelTestSupport
import Testing

/// docs/ARCHITECTURE.md against the code: the imports each target may make, the core's `package`
/// surface drawn on the seam, and a line for every source file.
@Suite("ARCHITECTURE.md")
struct ArchitectureTests {
    static let root = Fixtures.directory.deletingLastPathComponent()

    static func document() throws -> String {
        try String(contentsOf: root.appendingPathComponent("docs/ARCHITECTURE.md"), encoding: .utf8)
    }

    /// The Swift files under `folder` (relative to the repository), recursively.
    static func swiftFiles(_ folder: String) -> [URL] {
        let base = root.appendingPathComponent(folder)
        guard let walker = FileManager.default.enumerator(at: base, includingPropertiesForKeys: nil) else { return [] }
        return walker.compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }.sorted { $0.path < $1.path }
    }

    /// The modules a file imports (`import X`, with any attribute or access level before it).
    static func imports(_ file: URL) throws -> Set<String> {
        var modules = Set<String>()
        for line in try String(contentsOf: file, encoding: .utf8).split(separator: "\n") {
            let words = line.split(separator: " ").map(String.init)
            guard let index = words.firstIndex(of: "import"), index + 1 < words.count,
                words[..<index].allSatisfy({
                    ["@testable", "public", "package", "internal", "@preconcurrency", "private", "fileprivate"].contains($0)
                })
            else { continue }
            modules.insert(String(words[index + 1].split(separator: ".").first ?? ""))
        }
        return modules
    }

    /// Modules of the toolchain every target may import (Foundation's parts, the C library).
    static let toolchain: Set<String> = ["Swift", "Foundation", "FoundationNetworking", "FoundationEssentials", "Glibc", "Darwin", "Dispatch"]
    /// Names the table uses for packages, as the modules they give.
    static let packageModules: [String: [String]] = [
        "swift-log": ["Logging"], "swift-argument-parser": ["ArgumentParser"], "Swift Testing": ["Testing"],
        "FlyingFox": ["FlyingFox", "FlyingSocks"],
    ]

    @Test("each target imports only what the layers table says it may")
    func imports() throws {
        let text = try Self.document()
        var checked = 0
        for line in text.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 6 else { continue }
            let folders = cells[2].split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: " `")) }
            guard folders.allSatisfy({ $0.hasPrefix("Sources/") || $0.hasPrefix("Tests/") || $0.hasPrefix("Plugins/") }) else { continue }
            var allowed = Self.toolchain
            let mayImport = cells[4]
            for (name, modules) in Self.packageModules where mayImport.contains(name) { allowed.formUnion(modules) }
            // Every word of the cell that could be a module: `Satchel`, Foundation, ZIPFoundation…
            for word in mayImport.split(whereSeparator: { !$0.isLetter && !$0.isNumber }) { allowed.insert(String(word)) }
            for folder in folders {
                for file in Self.swiftFiles(folder) {
                    let extra = try Self.imports(file).subtracting(allowed)
                    let fits = extra.isEmpty
                    #expect(
                        fits,
                        "\(file.path.replacingOccurrences(of: Self.root.path + "/", with: "")) imports \(extra.sorted()), which the table does not allow"
                    )
                    checked += 1
                }
            }
        }
        #expect(checked > 150, "the table's rows were read (\(checked) files)")
    }

    @Test("of the libraries, only the core's Storage/ imports CLevelDB and CLevelDBEncryption (the benchmark's baselines use the first too)")
    func levelDBSeam() throws {
        for file in Self.swiftFiles("Sources")
        where try !file.path.contains("/Sources/SatchelBench/") && !Self.imports(file).isDisjoint(with: ["CLevelDB", "CLevelDBEncryption"]) {
            #expect(file.path.contains("/Sources/Satchel/Storage/"), "\(file.path)")
        }
    }

    @Test("the core's package surface is at most 32 declarations, and the seam's drawing names each")
    func packageSurface() throws {
        let text = try Self.document()
        let seam = try #require(
            text.range(of: "## The seam between the store and the engine").flatMap { start in
                text.range(of: "## The core, file by file").map { String(text[start.lowerBound..<$0.lowerBound]) }
            })
        var names: [String] = []
        for file in Self.swiftFiles("Sources/Satchel") {
            for line in try String(contentsOf: file, encoding: .utf8).split(separator: "\n") {
                let words = line.split(separator: " ").map(String.init)
                guard words.first == "package", words.count > 2, words[1] != "import" else { continue }
                let declaration = words.drop { !["func", "enum", "struct", "class", "var", "let", "typealias", "init"].contains($0) }
                guard let keyword = declaration.first else { continue }
                let name = keyword == "init" ? "init" : String(declaration.dropFirst().first?.prefix { $0.isLetter || $0.isNumber } ?? "")
                names.append(name)
            }
        }
        #expect(names.count <= 32, "\(names.count) package declarations: \(names)")
        for name in Set(names) { #expect(seam.contains(name), "the seam's drawing does not name \(name)") }
    }

    @Test("the file-by-file map names every source file")
    func fileMap() throws {
        let text = try Self.document()
        for folder in [
            "Sources/Satchel", "Sources/SatchelSync", "Sources/SatchelSyncTesting", "Sources/SatchelKinto", "Sources/SatchelParse",
            "Sources/SatchelSalesforce", "Sources/SatchelRhoConnect",
        ] {
            for file in Self.swiftFiles(folder) {
                let mentioned = text.contains(file.lastPathComponent)
                #expect(mentioned, "docs/ARCHITECTURE.md does not mention \(folder)/…/\(file.lastPathComponent)")
            }
        }
    }
}
