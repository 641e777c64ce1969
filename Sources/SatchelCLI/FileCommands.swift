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
        let data: Data? = try store.withStore { store in
            let model = try store.existingModel(named: model)
            guard let object = try model.find(id) else {
                throw SatchelError(.notFound, "no object '\(id)' in model '\(model.name)'", model: model.name, objectID: id)
            }
            let value = object[attribute]
            guard let reference = value?.stringValue, BlobStore.isReference(value) else {
                let what = value.map { "holds \($0), not a downloaded blob" } ?? "has no attribute '\(attribute)'"
                throw SatchelError(.notFound, "object '\(id)' of '\(model.name)' \(what)", model: model.name, objectID: id)
            }
            let missing = SatchelError(
                .notFound, "the blob of '\(attribute)' of object '\(id)' is missing from the store", model: model.name, objectID: id)
            if let out {
                // Whole or not at all: a failure leaves an earlier file there as it was.
                guard try store.blobs.write(reference, to: URL(fileURLWithPath: out)) else { throw missing }
                return nil
            }
            guard let data = try store.blobs.data(for: reference) else { throw missing }
            return data
        }
        if let data { Output.write(data) }
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
                try model.export { Output.write($0) }
            }
            // Said, not silent (a black-box probe): the file holds blob references, not bytes.
            let blobs = try model.definition.blobAttributes
            if !blobs.isEmpty {
                Output.note(
                    "note: blob attributes (\(blobs.joined(separator: ", "))) are exported as references; their bytes stay in this store (satchel blob reads them, backup copies them)"
                )
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

struct BackupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Copy the store, as of one moment (whole transactions only), into a new store at DIR2.",
        discussion: """
            The store stays usable meanwhile (other processes cannot open it while this one does). The copy is \
            written to DIR2.incomplete and renamed to DIR2 when whole: a backup that fails or is killed leaves no \
            store at DIR2. Shows progress on a terminal; prints one line with what was copied.
            """
    )

    @OptionGroup var store: StoreOptions
    @Argument(help: ArgumentHelp("The new directory for the copy.", valueName: "dir2")) var destination: String

    func run() throws {
        let bar = Output.stderrIsTerminal ? ProgressBar() : nil
        let copied = try store.withStore { store in
            try store.backup(to: destination) { progress in
                let total = max(progress.estimatedBytes, progress.bytes, 1)
                bar?.draw(fraction: Double(progress.bytes) / Double(total), label: "\(progress.keys) keys, \(progress.bytes >> 20) MiB")
            }
        }
        bar?.finish()
        Output.line("backed up: \(copied.keys) keys (\(copied.bytes) bytes) and \(copied.blobs) blob files to \(destination)")
    }
}

struct RestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Replace the store with a copy of the backup at DIR2 (which is left as it is).",
        discussion: """
            The copy is checked before anything changes, then swapped in at once: killed at any moment, the store's \
            directory holds the old store or the restored one. The store it replaced is kept beside it (its path is \
            printed): it may hold work newer than the backup. The store must not be open elsewhere. A sync since the \
            backup may have pushed its pending changes: every model that synced pulls its whole collection at its next \
            sync, and a pending create is looked up where the server allows (Parse, Salesforce, Kinto) rather than made \
            twice; on RhoConnect it is made again.
            """
    )

    @OptionGroup var store: StoreOptions
    @Argument(help: ArgumentHelp("The backup to restore.", valueName: "dir2")) var backup: String

    func run() throws {
        let path = try store.path()
        if let replaced = try Store.restore(from: backup, to: path, configuration: store.configuration()) {
            Output.line("restored \(path) from \(backup); the store it replaced is kept at \(replaced)")
        } else {
            Output.line("restored \(path) from \(backup)")
        }
    }
}
