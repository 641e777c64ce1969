import ArgumentParser
import Foundation
import Satchel
import SatchelSync
import Synchronization

/// `satchel`: the command-line front end of a Satchel store.
@main
struct SatchelCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "satchel",
        abstract: "An embedded document store with sync, on LevelDB.",
        discussion: """
            Every command works on the store directory given by --db (or $SATCHEL_DB). Commands that write objects \
            (put, import, sync) create it when missing, and restore makes it from the backup; the others need it to exist. Objects print as JSON, one per \
            line, keys sorted, the id under "object".
            """,
        version: SatchelCommand.version,
        subcommands: [
            ImportCommand.self, IndexCommand.self, PutCommand.self, UpdateCommand.self, DeleteCommand.self, FindCommand.self,
            AggregateCommand.self, StatsCommand.self, CheckCommand.self, RepairCommand.self, SyncCommand.self, SearchCommand.self, VerifyCommand.self,
            ErrorsCommand.self,
            ResolveCommand.self,
            LogoutCommand.self, ResetCommand.self, BlobCommand.self, ExportCommand.self, CompactCommand.self, BackupCommand.self, RestoreCommand.self,
            MigrateCommand.self, EncryptCommand.self, DecryptCommand.self, RekeyCommand.self,
            PicklistCommand.self, DemoCommand.self,
        ]
    )

    /// `--db` may come before the subcommand (`satchel --db DIR find …`); ArgumentParser hands the
    /// value to the subcommand's option group of the same type.
    @OptionGroup var store: StoreOptions

    /// This build's version (the newest entry of CHANGELOG.md).
    static let version = "0.1.0"

    /// Runs the command; any error becomes one line on stderr and a non-zero exit.
    static func main() async {
        Output.holdClosedStandardDescriptors()
        if let position = argumentNotUTF8() {
            // `CommandLine.arguments` would hold it with U+FFFD in place of its bad bytes: another
            // value than the one given (two model names would become one).
            Output.error("argument \(position) is not valid UTF-8 (see 'satchel help')")
            Foundation.exit(ExitCode.validationFailure.rawValue)
        }
        if let word = unknownCommand(in: Array(CommandLine.arguments.dropFirst())) {
            let hint = Names.suggestion(for: word, among: commandNames).map { "; did you mean '\($0)'?" } ?? ""
            Output.error("'\(word)' is not a satchel command\(hint) (see 'satchel help')")
            Foundation.exit(ExitCode.validationFailure.rawValue)
        }
        if let option = repeatedOption(in: Array(CommandLine.arguments.dropFirst())) {
            Output.error("\(option) is given more than once; it takes one value (see 'satchel help')")
            Foundation.exit(ExitCode.validationFailure.rawValue)
        }
        if lacksCommand(Array(CommandLine.arguments.dropFirst())) {
            Output.error("no command given (see 'satchel help')")
            Foundation.exit(ExitCode.validationFailure.rawValue)
        }
        do {
            var command = try parseAsRoot()
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
            try Output.finish()
        } catch let error as SatchelError {
            try? Output.finish()
            Output.error(error.message)
            Foundation.exit(1)
        } catch let error as SyncError {
            try? Output.finish()
            Output.error(error.description)
            Foundation.exit(1)
        } catch let exit as ExitCode {
            // What was printed before the exit code (`check`'s lines) must reach stdout whole.
            do { try Output.finish() } catch {
                Output.error((error as? SatchelError)?.message ?? "\(error)")
                Foundation.exit(exit.rawValue == 0 ? 1 : exit.rawValue)
            }
            Foundation.exit(exit.rawValue)
        } catch {
            try? Output.finish()
            // Help and version requests print in full; usage errors keep to one line, as every
            // other failure does.
            let code = exitCode(for: error)
            if code == .success {
                // Printed as any output is, so that help that cannot be written fails (a
                // black-box probe: `help find > /dev/full` exited 0).
                Output.line(fullMessage(for: error))
                do { try Output.finish() } catch {
                    Output.error((error as? SatchelError)?.message ?? "\(error)")
                    Foundation.exit(1)
                }
                Foundation.exit(0)
            }
            // Its own line breaks (an argument holding one, echoed) become spaces: the reason after
            // them is kept (a black-box probe: a --where with a newline lost it). What follows
            // a blank line, or `Usage:`, is ArgumentParser's help, left to `satchel help`.
            var text = message(for: error)
            for end in ["\n\n", "\nUsage:"] { if let range = text.range(of: end) { text = String(text[..<range.lowerBound]) } }
            let message = text.split(whereSeparator: \.isNewline).joined(separator: " ")
            Output.error((message.isEmpty ? "invalid arguments" : message) + " (see 'satchel help')")
            Foundation.exit(code.rawValue)
        }
    }
}

extension SatchelCommand {
    /// The position (from 1) of the first argument whose bytes are not UTF-8, if any.
    static func argumentNotUTF8() -> Int? {
        for index in 1..<Int(CommandLine.argc) {
            guard let argument = CommandLine.unsafeArgv[index] else { continue }
            if String(validatingCString: argument) == nil { return index }
        }
        return nil
    }

    /// The subcommands' names, and `help`.
    static var commandNames: [String] { configuration.subcommands.compactMap { $0.configuration.commandName } + ["help"] }

    /// Whether `arguments` hold no command, only the store (`satchel --db DIR`, or nothing):
    /// ArgumentParser would print the whole help and exit 0.
    static func lacksCommand(_ arguments: [String]) -> Bool {
        var index = 0
        while index < arguments.count {
            if arguments[index] == "--db" {
                index += 2
            } else if arguments[index].hasPrefix("--db=") {
                index += 1
            } else {
                return false
            }
        }
        return true
    }

    /// The first word of `arguments` in a subcommand's place, when it names none (`satchel fnd`):
    /// ArgumentParser would report it as unexpected arguments of the root command.
    static func unknownCommand(in arguments: [String]) -> String? {
        var index = 0
        while index < arguments.count {
            let word = arguments[index]
            if word == "--db" {
                index += 2  // the option and its value
                continue
            }
            if word.hasPrefix("-") { return nil }  // --db=DIR, --help, --version: ArgumentParser's
            // `satchel help fnd`: ArgumentParser would print the whole help and exit 0 (a
            // black-box probe).
            if word == "help", index + 1 < arguments.count, !arguments[index + 1].hasPrefix("-"),
                !commandNames.contains(arguments[index + 1])
            {
                return arguments[index + 1]
            }
            return commandNames.contains(word) ? nil : word
        }
        return nil
    }
}

extension SatchelCommand {
    /// The options that may be given more than once (each occurrence adds a value).
    static let repeatableOptions: Set<String> = ["--where", "--order", "--group-by", "--sum", "--min", "--max", "--avg", "--model"]

    /// The first option of `arguments` given twice that takes one value or is a flag
    /// (`--limit 5 --limit 10`, `--db A find --db B`): ArgumentParser would keep the last one
    /// silently. Words after `--` are values, not options.
    static func repeatedOption(in arguments: [String]) -> String? {
        var seen: Set<Substring> = []
        for word in arguments {
            if word == "--" { return nil }
            guard word.hasPrefix("--"), word.count > 2 else { continue }
            let name = word.prefix { $0 != "=" }
            if repeatableOptions.contains(String(name)) { continue }
            if !seen.insert(name).inserted { return String(name) }
        }
        return nil
    }
}

/// Options every command shares.
struct StoreOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The store directory (default: $SATCHEL_DB).", valueName: "dir"))
    var db: String?
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The key of an encrypted store: a file holding 64 hexadecimal digits (default: $SATCHEL_KEY_FILE).", valueName: "file"))
    var keyFile: String?

    /// The key `--key-file` (else `$SATCHEL_KEY_FILE`) names, nil when neither does.
    func key() throws -> EncryptionKey? {
        if let keyFile, !keyFile.isEmpty { return try Self.readKey(keyFile, option: "--key-file") }
        if let file = ProcessInfo.processInfo.environment["SATCHEL_KEY_FILE"], !file.isEmpty {
            return try Self.readKey(file, option: "SATCHEL_KEY_FILE")
        }
        return nil
    }

    /// The key in `file`: 64 hexadecimal digits and at most one trailing newline (LF or CRLF). The error
    /// names the file and what is wrong with it, never its content.
    static func readKey(_ file: String, option: String) throws -> EncryptionKey {
        guard let data = FileManager.default.contents(atPath: file) else {
            throw SatchelError(.invalidArgument, "\(option): cannot read the key file \(file)")
        }
        guard data.count <= 200 else {
            throw SatchelError(.invalidArgument, "\(option): \(file) does not hold a key (64 hexadecimal digits)")
        }
        do {
            // Decoded as it is: Foundation's UTF-8 reading would drop a byte order mark.
            return try EncryptionKey(hex: String(decoding: data, as: UTF8.self))
        } catch {
            throw SatchelError(.invalidArgument, "\(option): \(file): \(error.message)")
        }
    }

    /// The store's configuration: the key, and whether a missing store is created.
    func configuration(creating: Bool = false) throws -> Store.Configuration {
        var configuration = Store.Configuration()
        configuration.createIfMissing = creating
        configuration.encryptionKey = try key()
        return configuration
    }

    /// The store's directory: `--db`, else `$SATCHEL_DB`; neither is a usage error (a store
    /// silently made in the current directory answers no question right).
    func path() throws -> String {
        if let db, !db.isEmpty { return db }
        if let path = ProcessInfo.processInfo.environment["SATCHEL_DB"], !path.isEmpty { return path }
        throw ValidationError("no store given: pass --db DIR (or set SATCHEL_DB)")
    }

    /// Opens the store, runs `body`, and closes the store even when `body` fails. Only commands
    /// that write objects (`creating`) make a store that does not exist; the others fail with
    /// `storeMissing`.
    func withStore<T>(creating: Bool = false, _ body: (Store) throws -> T) throws -> T {
        let store = try open(creating: creating)
        defer { try? store.close() }
        return try body(store)
    }

    func open(creating: Bool) throws -> Store {
        try Store(path: try path(), configuration: try configuration(creating: creating))
    }
}

extension Store {
    /// The model named `name`, or an error naming the models the store has, nearest first: a
    /// question about a model the store has never seen gets no silent empty answer.
    func existingModel(named name: String) throws -> Model {
        if let model = existingModel(name) { return model }
        let names = Names.nearestFirst(to: name, among: models.map(\.name))
        // Each quoted: a model may be named "" or hold a comma (a black-box probe).
        let known = names.isEmpty ? "the store has no models" : "the store has \(names.map { "'\(Names.shown($0))'" }.joined(separator: ", "))"
        throw SatchelError(.notFound, "no model named '\(Names.shown(name))': \(known)", model: name)
    }
}

/// Writing to stdout and stderr.
enum Output {
    /// What is written to stdout, in blocks: a write that fails (a full disk, a closed stdout)
    /// is kept, and ``finish()`` makes it the command's error, not a silent exit 0.
    private struct StandardOutput: ~Copyable {
        var buffer: [UInt8] = []
        var failure: String?

        mutating func drain() {
            defer { buffer.removeAll(keepingCapacity: true) }
            guard failure == nil, !buffer.isEmpty else { return }
            failure = buffer.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let written = Foundation.write(STDOUT_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
                    if written < 0 && errno == EINTR { continue }
                    guard written > 0 else { return String(cString: strerror(errno)) }
                    offset += written
                }
                return nil
            }
        }
    }

    private static let standardOutput = Mutex(StandardOutput())
    /// A terminal gets each line as it comes (a sync's notifications); a pipe or a file blocks.
    private static let lineBuffered = isatty(STDOUT_FILENO) == 1

    /// With `now`, the line goes out at once whatever stdout is: a sync's notifications, each
    /// saying what has landed (a black-box probe: piped, they came in one block at the end, and
    /// none from a sync that was stopped).
    static func line(_ text: String, now: Bool = false) {
        standardOutput.withLock { output in
            output.buffer.append(contentsOf: text.utf8)
            output.buffer.append(10)
            if now || lineBuffered || output.buffer.count >= 1 << 16 { output.drain() }
        }
    }

    /// Bytes to stdout as they are (an export, a blob).
    static func write(_ data: Data) {
        standardOutput.withLock { output in
            output.buffer.append(contentsOf: data)
            if output.buffer.count >= 1 << 16 { output.drain() }
        }
    }

    /// Holds each standard descriptor the process was started without (`>&-`) with `/dev/null`,
    /// read-only: else the next file opened (a LevelDB file of the store) would take its number,
    /// and what is printed would be written into it. Held so, a write fails (`EBADF`), and the
    /// command says it could not write.
    static func holdClosedStandardDescriptors() {
        for descriptor in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] where fcntl(descriptor, F_GETFD) == -1 && errno == EBADF {
            let held = open("/dev/null", O_RDONLY)
            if held >= 0 && held != descriptor {
                dup2(held, descriptor)
                close(held)
            }
        }
    }

    /// Writes what is left; throws when a write to stdout failed.
    static func finish() throws {
        let failure = standardOutput.withLock { output in
            output.drain()
            return output.failure
        }
        // Said whole: the command ran to its end, and a write it made stays made (a black-box
        // probe: a put whose output was lost said only that, and a retry made a second object).
        if let failure {
            throw SatchelError(
                .io, "cannot write to standard output: \(failure) (the command ran to its end: what it changed in the store stays changed)")
        }
    }

    /// The one line of a failure, on stderr.
    /// An error's one line on stderr: line breaks a server's message brought become spaces.
    static func error(_ message: String) { note(message.split(whereSeparator: \.isNewline).joined(separator: " ")) }

    /// A line on stderr, where scripts reading stdout do not see it.
    static func note(_ message: String) { standardError("satchel: \(message)\n") }

    static func progress(_ text: String) { standardError(text) }

    /// Text to stderr, unbuffered; a failure has nowhere to be told.
    private static func standardError(_ text: String) {
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Foundation.write(STDERR_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return }
                offset += written
            }
        }
    }

    static var stderrIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }
}

/// Reads a JSON object argument.
func parseObjectArgument(_ text: String) throws -> JSONObject {
    try JSONObject(parsing: text)
}

extension StoreOptions {
    /// Runs `body`, a command that may create the store and register models, so that when it
    /// fails it leaves no trace (see ``StoreFootprint``).
    func leavingNoTrace<T>(_ body: () throws -> T) throws -> T {
        let footprint = try StoreFootprint(path: path(), key: key())
        do { return try body() } catch {
            footprint.erase(after: error)
            throw error
        }
    }

    /// `leavingNoTrace` for an async command.
    func leavingNoTrace<T>(_ body: () async throws -> T) async throws -> T {
        let footprint = try StoreFootprint(path: path(), key: key())
        do { return try await body() } catch {
            footprint.erase(after: error)
            throw error
        }
    }
}

/// What a store directory held before a command that may create it: what the command made is
/// undone when it fails. A store the command created goes whole (with the parent directories
/// it made); in a store that existed, the models it registered that still hold nothing are
/// unregistered. What a failed command did write (a sync's pages that landed) stays.
struct StoreFootprint {
    /// The outermost directory the command would create, when the store did not exist.
    let created: String?
    /// The models of the existing store (empty for an empty directory).
    let models: Set<String>
    /// The directory existed and held nothing: whatever is in it afterwards, the command made.
    let emptyDirectory: Bool
    let path: String
    let key: EncryptionKey?

    init(path: String, key: EncryptionKey?) {
        self.path = path
        self.key = key
        let fileManager = FileManager.default
        var missing: String?
        var candidate = URL(fileURLWithPath: path).standardizedFileURL
        while !fileManager.fileExists(atPath: candidate.path) && candidate.path != "/" {
            missing = candidate.path
            candidate.deleteLastPathComponent()
        }
        created = missing
        if missing == nil, let store = Self.open(path, key: key) {
            models = Set(store.models.map(\.name))
            try? store.close()
        } else {
            models = []
        }
        emptyDirectory = missing == nil && ((try? fileManager.contentsOfDirectory(atPath: path))?.isEmpty ?? false)
    }

    /// Undoes what the failed command made — unless it failed because another process holds
    /// the store: that process made it (two commands racing to create one store), or uses it.
    func erase(after error: any Error) {
        if (error as? SatchelError)?.code == .locked { return }
        let fileManager = FileManager.default
        if let created {
            try? fileManager.removeItem(atPath: created)
        } else if emptyDirectory {
            for entry in (try? fileManager.contentsOfDirectory(atPath: path)) ?? [] {
                try? fileManager.removeItem(atPath: URL(fileURLWithPath: path).appendingPathComponent(entry).path)
            }
        } else if let store = Self.open(path, key: key) {
            defer { try? store.close() }
            // `unregister` refuses a model that holds anything.
            for model in store.models where !models.contains(model.name) { try? store.unregister(model.name) }
        }
    }

    private static func open(_ path: String, key: EncryptionKey?) -> Store? {
        var configuration = Store.Configuration()
        configuration.createIfMissing = false
        configuration.encryptionKey = key
        return try? Store(path: path, configuration: configuration)
    }
}
