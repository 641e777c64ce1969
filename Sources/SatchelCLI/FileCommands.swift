import ArgumentParser
import Foundation
import Satchel

struct BlobCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "blob",
        abstract: "Write a blob attribute's bytes to stdout (or --out FILE).",
        discussion: "Exits 1, with one line on stderr, when the object has no such blob (or only its URL: not downloaded yet)."
    )

    @OptionGroup var store: StoreOptions
    @Argument(help: "The model.") var model: String
    @Argument(help: "The object's id.") var id: String
    @Argument(help: "The blob attribute.") var attribute: String
    @Option(help: ArgumentHelp("Write the bytes to this file instead of stdout.", valueName: "file")) var out: String?

    func run() throws {
        let data: Data = try store.withStore { store in
            let model = try store.existingModel(named: model)
            guard let object = try model.find(id) else {
                throw SatchelError(.notFound, "no object '\(id)' in model '\(model.name)'", model: model.name, objectID: id)
            }
            let value = object[attribute]
            guard let reference = value?.stringValue, BlobStore.isReference(value) else {
                let what = value.map { "holds \($0), not a downloaded blob" } ?? "has no attribute '\(attribute)'"
                throw SatchelError(.notFound, "object '\(id)' of '\(model.name)' \(what)", model: model.name, objectID: id)
            }
            guard let data = try store.blobs.data(for: reference) else {
                throw SatchelError(
                    .notFound, "the blob of '\(attribute)' of object '\(id)' is missing from the store", model: model.name, objectID: id)
            }
            return data
        }
        if let out {
            try data.write(to: URL(fileURLWithPath: out))
        } else {
            FileHandle.standardOutput.write(data)
        }
    }
}

struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write every object of a model as JSON lines (to stdout, or FILE); 'import' of the file gives the same objects."
    )

    @OptionGroup var store: StoreOptions
    @Argument(help: "The model.") var model: String
    @Argument(help: "The file to write (default: stdout).") var file: String?

    func run() throws {
        try store.withStore { store in
            let model = try store.existingModel(named: model)
            if let file {
                let written = try model.export(to: URL(fileURLWithPath: file))
                Output.note("exported \(written)")
            } else {
                try model.export { FileHandle.standardOutput.write($0) }
            }
        }
    }
}

struct CompactCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compact",
        abstract:
            "Compact the store's LevelDB databases (space from deleted and overwritten data comes back); prints the bytes on disk before and after."
    )

    @OptionGroup var store: StoreOptions

    func run() throws {
        let directory = try store.path()
        let before = Self.bytes(under: directory)
        try store.withStore { try $0.compact() }
        Output.line("compacted: \(before) bytes before, \(Self.bytes(under: directory)) after")
    }

    /// The size of the files under `path`.
    static func bytes(under path: String) -> Int {
        guard let files = FileManager.default.enumerator(atPath: path) else { return 0 }
        var total = 0
        for case let file as String in files {
            total += (try? FileManager.default.attributesOfItem(atPath: path + "/" + file)[.size] as? Int) ?? 0
        }
        return total
    }
}
