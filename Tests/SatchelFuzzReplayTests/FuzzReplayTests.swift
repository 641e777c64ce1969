import Foundation
import Satchel
import SatchelFuzzTargets
import SatchelSync
import Testing

/// The files of Tests/Fuzz, found from this source file's location.
enum FuzzFiles {
    /// Tests/Fuzz.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz")

    /// The files of `Corpus` or `Regressions` for `target`, in name order.
    static func files(_ folder: String, _ target: FuzzTarget) -> [URL] {
        let directory = root.appendingPathComponent(folder).appendingPathComponent(target.rawValue)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted().map { directory.appendingPathComponent($0) }
    }

    /// What `target`'s parsers make of the file.
    static func outcomes(_ target: FuzzTarget, _ file: URL) throws -> [FuzzOutcome] {
        try Data(contentsOf: file).withUnsafeBytes { target.outcomes($0) }
    }
}

/// A finding of the fuzzers, kept under Tests/Fuzz/Regressions: the input, and the typed error
/// the fixed parser gives it now.
struct Regression: Sendable, CustomTestStringConvertible {
    var target: FuzzTarget
    /// The file's name under `Regressions/<target>/`.
    var file: String
    /// The parser that trapped, hung or broke a property (`key.decode`).
    var parser: String
    /// The code of the error it now throws (`SatchelError.Code` or `SyncError.Code`, by name);
    /// nil when it takes the input without an error (a leak inside Foundation: `scripts/fuzz.sh`
    /// replays every finding under LeakSanitizer, which this test run does not have).
    var code: String?
    /// Words of the error's message.
    var message: String = ""

    var testDescription: String { "\(target.rawValue)/\(file)" }

    /// Every finding, in the order they were found.
    static let all: [Regression] = [
        // A number element whose bits are a NaN (no encoder writes one) decoded to a NaN, a value
        // JSON cannot hold and that equals nothing, itself included.
        Regression(target: .key, file: "nan-number.key", parser: "key.decode", code: "corruption", message: "not a finite number"),
        // A byte order mark went unnoticed when the first read returned fewer than its 3 bytes
        // (a pipe, a slow disk): the same file imported or failed depending on how it was read.
        Regression(
            target: .importReader, file: "bom-in-short-chunks.json", parser: "import.chunked", code: "malformedJSON",
            message: "line 1, column 3 (item 1): expected a string key in an object"),
        // Arrays nested 5,000 deep: the decoder recursed once per level and overflowed the stack
        // (a store's check, and any read of such a key, crashed). No encoder nests deeper than
        // JSON values may (256 levels).
        Regression(target: .key, file: "deep-nesting.key", parser: "key.decode", code: "corruption", message: "nesting deeper than 256 levels"),
        // A `LastModifiedDate` with 63 fraction digits: ICU's date parser, behind Foundation's
        // ISO8601DateFormatter, divided by zero on it (SIGFPE, in a release build too) when a
        // pull compared it with the cursor's second. A server's datetime is now parsed by
        // Date.ISO8601FormatStyle, and one that is not a datetime is refused.
        Regression(
            target: .salesforce, file: "long-fraction.json", parser: "salesforce.query", code: "protocolViolation",
            message: "`LastModifiedDate` is missing or not a datetime"),
        // A `Date` header of non-ASCII bytes: Foundation's DateFormatter leaked 160 bytes on
        // each such text. HTTP dates are now read into ISO 8601 for Date.ISO8601FormatStyle.
        Regression(target: .salesforce, file: "non-ascii-date-header.bin", parser: "salesforce.date", code: nil),
        // A key file whose reserved bytes (13–15) were not zero was read as if they were: the
        // same file written back differed from what was read. They are now checked.
        Regression(target: .encryption, file: "reserved-bytes.bin", parser: "encryption.records", code: "corruption", message: "is damaged"),
    ]
}

@Suite("Fuzz corpora and findings, replayed")
struct FuzzReplayTests {
    @Test("every seed is read without a finding; seeds named ok-<parser>-… are accepted", arguments: FuzzTarget.allCases)
    func corpus(_ target: FuzzTarget) throws {
        let files = FuzzFiles.files("Corpus", target)
        #expect(files.count >= 5, "the seed corpus of \(target.rawValue) is missing")
        for file in files {
            let outcomes = try FuzzFiles.outcomes(target, file)
            #expect(!outcomes.isEmpty)
            for outcome in outcomes {
                #expect(outcome.finding == nil, "\(file.lastPathComponent): \(outcome.finding ?? "")")
            }
            // `ok-pull-records.json` of kinto is a valid answer for `kinto.pull`.
            let name = file.lastPathComponent
            guard name.hasPrefix("ok-"), let what = name.dropFirst(3).split(separator: "-").first else { continue }
            let parser = "\(target.rawValue).\(what)"
            let accepted = outcomes.first { $0.parser == parser }
            #expect(accepted != nil, "\(name): no parser \(parser)")
            #expect(accepted?.error == nil, "\(name): \(parser) refuses a valid input: \(accepted?.error.map { "\($0)" } ?? "")")
        }
    }

    @Test("every finding now gets its typed error (or, a leak's input, none)", arguments: Regression.all)
    func regression(_ regression: Regression) throws {
        let url = FuzzFiles.root.appendingPathComponent("Regressions").appendingPathComponent(regression.target.rawValue)
            .appendingPathComponent(regression.file)
        let outcomes = try FuzzFiles.outcomes(regression.target, url)
        for outcome in outcomes {
            #expect(outcome.finding == nil, "\(outcome.finding ?? "")")
        }
        let outcome = try #require(outcomes.first { $0.parser == regression.parser })
        guard regression.code != nil else {
            #expect(outcome.error == nil, "\(regression.parser) refuses the input: \(outcome.error.map { "\($0)" } ?? "")")
            return
        }
        let error = try #require(outcome.error, "\(regression.parser) accepts the input")
        let (code, message): (String, String) =
            switch error {
            case let error as SatchelError: (error.code.description, error.message)
            case let error as SyncError: (error.code.description, error.message)
            default: ("", "\(error)")
            }
        #expect(code == regression.code, "\(error)")
        #expect(message.contains(regression.message), "\(error)")
    }

    @Test("every file under Regressions has its expectation, and every expectation its file")
    func regressionsListed() {
        let files = Set(
            FuzzTarget.allCases.flatMap { target in FuzzFiles.files("Regressions", target).map { "\(target.rawValue)/\($0.lastPathComponent)" } })
        let listed = Set(Regression.all.map(\.testDescription))
        #expect(files.subtracting(listed).isEmpty, "findings without an expectation: \(files.subtracting(listed).sorted())")
        #expect(listed.subtracting(files).isEmpty, "expectations without a file: \(listed.subtracting(files).sorted())")
    }
}
