import Foundation
import Satchel
import Synchronization

/// The first pass of an import (``Store/importObjects(from:into:batchSize:progress:)``) on the
/// bytes as a file: the item reader (a JSON array or JSON lines) and the checks of each item,
/// for a schemaless model and for a fixed-schema model with choices.
///
/// The reader reads the file in chunks (1 MiB in an import); it is run again with chunks of a few
/// bytes, so that items, whitespace and the byte order mark fall across chunk boundaries, and
/// must say the same.
enum ImportTarget {
    /// A property-bag model: any object with an id or an attribute passes.
    static let schemaless = ModelDefinition(name: "Fuzz")

    /// A fixed-schema model of every attribute type, with a picklist and a dependent one.

    static let typed: ModelDefinition = {
        var definition = ModelDefinition(
            name: "Typed",
            kind: .fixedSchema([
                "name": .string, "n": .integer, "x": .number, "ok": .boolean, "tags": .array, "meta": .object, "any": .any,
                "size": .string, "tier": .string,
            ]))
        definition.choices = [
            "size": AttributeChoices(values: ["S", "M", "L"]),
            "tier": AttributeChoices(values: ["Gold", "Bronze"], controller: "size", validFor: ["S": ["Bronze"], "L": ["Gold", "Bronze"]]),
        ]
        return definition
    }()

    /// Numbers temporary files apart: replay tests run targets in parallel.
    static let counter = Atomic<Int>(0)

    /// Where the inputs are written: in memory when the system has a RAM disk (thousands of files
    /// a second come and go), else the temporary directory.
    static let directory: URL = {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: "/dev/shm", isDirectory: &isDirectory), isDirectory.boolValue,
            FileManager.default.isWritableFile(atPath: "/dev/shm")
        {
            return URL(fileURLWithPath: "/dev/shm")
        }
        return FileManager.default.temporaryDirectory
    }()

    /// The file's items checked for the schemaless model (in 1 MiB chunks and in chunks of a
    /// few bytes, which must agree) and for the typed one.
    static func outcomes(_ bytes: UnsafeRawBufferPointer) -> [FuzzOutcome] {
        let serial = counter.add(1, ordering: .relaxed).newValue
        let url = directory.appendingPathComponent("satchel-fuzz-import-\(ProcessInfo.processInfo.processIdentifier)-\(serial).json")
        defer { try? FileManager.default.removeItem(at: url) }
        do {
            try Data(bytes).write(to: url)
        } catch {
            return [FuzzOutcome(parser: "import.file", error: error)]
        }
        func check(_ definition: ModelDefinition, chunkSize: Int? = nil, split: Bool = false) -> Result<Int, any Error> {
            Result {
                if let chunkSize {
                    try Store.checkImportItems(of: url, definition: definition, chunkSize: chunkSize, splitFrom: split ? 0 : .max)
                } else {
                    try Store.checkImportItems(of: url, definition: definition, splitFrom: .max)
                }
            }
        }
        let whole = check(schemaless)
        // Chunks of a few bytes, their size chosen by the input's length: boundaries fall all
        // over a small input, and a large one still takes some 32 reads, not thousands.
        let chunkSize = max(1, bytes.count / 32) + bytes.count % 7
        let chunked = check(schemaless, chunkSize: chunkSize)
        var outcomes = [FuzzOutcome(parser: "import.schemaless", error: whole.error)]
        var agreement = FuzzOutcome(parser: "import.chunked", error: chunked.error)
        if describe(whole) != describe(chunked) {
            agreement.violation = "with \(chunkSize)-byte chunks the reader says \(describe(chunked)), with 1 MiB \(describe(whole))"
        }
        outcomes.append(agreement)
        // Two threads, the second from an item that seems to start halfway: one reader's answer.
        let split = check(schemaless, chunkSize: 1 << 20, split: true)
        var halves = FuzzOutcome(parser: "import.split", error: split.error)
        if describe(whole) != describe(split) {
            halves.violation = "checked in two halves the reader says \(describe(split)), in one \(describe(whole))"
        }
        outcomes.append(halves)
        outcomes.append(FuzzOutcome(parser: "import.typed", error: check(typed).error))
        return outcomes
    }

    /// The item count, or the error's code and message.
    static func describe(_ result: Result<Int, any Error>) -> String {
        switch result {
        case .success(let count): "\(count) items"
        case .failure(let error as SatchelError): "\(error.code): \(error.message)"
        case .failure(let error): "\(error)"
        }
    }
}

extension Result {
    /// The error, when this is a failure.
    var error: Failure? {
        if case .failure(let error) = self { error } else { nil }
    }
}
