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
                throw SatchelError(.notFound, "the blob of '\(attribute)' of object '\(id)' is missing from the store", model: model.name, objectID: id)
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
            var text = ""
            var written = 0
            let handle: FileHandle
            if let file {
                guard FileManager.default.createFile(atPath: file, contents: nil) else {
                    throw SatchelError(.invalidArgument, "cannot write '\(file)'")
                }
                handle = try FileHandle(forWritingTo: URL(fileURLWithPath: file))
            } else {
                handle = FileHandle.standardOutput
            }
            defer { if file != nil { try? handle.close() } }
            // A cursor: one object in memory at a time, whatever the model's size.
            let cursor = try model.cursor(Query())
            while let object = try cursor.next() {
                text += object.description
                text += "\n"
                written += 1
                if text.utf8.count >= 1 << 20 {
                    handle.write(Data(text.utf8))
                    text = ""
                }
            }
            handle.write(Data(text.utf8))
            if file != nil { Output.note("exported \(written)") }
        }
    }
}
