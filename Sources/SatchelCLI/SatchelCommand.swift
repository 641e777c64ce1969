import ArgumentParser
import Foundation
import Satchel
import SatchelSync

/// `satchel`: the command-line front end of a Satchel store.
@main
struct SatchelCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "satchel",
        abstract: "An embedded document store with sync, on LevelDB.",
        discussion: """
            Every command works on the store directory given by --db (default: $SATCHEL_DB, else ./satchel.db), \
            created when missing. Documents print as JSON, one per line, keys sorted, the id under "object".
            """,
        subcommands: [
            ImportCommand.self, IndexCommand.self, PutCommand.self, UpdateCommand.self, DeleteCommand.self, FindCommand.self,
            StatsCommand.self, CheckCommand.self, RepairCommand.self, SyncCommand.self, ErrorsCommand.self, ResolveCommand.self,
            LogoutCommand.self, ResetCommand.self, DemoCommand.self,
        ]
    )

    /// `--db` may come before the subcommand (`satchel --db DIR find …`); ArgumentParser hands the
    /// value to the subcommand's option group of the same type.
    @OptionGroup var store: StoreOptions

    /// Runs the command; any error becomes one line on stderr and a non-zero exit.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch let error as SatchelError {
            Output.error(error.message)
            Foundation.exit(1)
        } catch let error as SyncError {
            Output.error(error.description)
            Foundation.exit(1)
        } catch let exit as ExitCode {
            Foundation.exit(exit.rawValue)
        } catch {
            // Help and version requests print in full; usage errors keep to one line, as every
            // other failure does.
            let code = exitCode(for: error)
            if code == .success { exit(withError: error) }
            let message = message(for: error).split(separator: "\n").first.map(String.init) ?? "invalid arguments"
            Output.error(message + " (see 'satchel help')")
            Foundation.exit(code.rawValue)
        }
    }
}

/// Options every command shares.
struct StoreOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The store directory.", valueName: "dir"))
    var db: String?

    var path: String { db ?? ProcessInfo.processInfo.environment["SATCHEL_DB"] ?? "satchel.db" }

    /// Opens the store, runs `body`, and closes the store even when `body` fails.
    func withStore<T>(_ body: (Store) throws -> T) throws -> T {
        let store = try Store(path: path)
        defer { try? store.close() }
        return try body(store)
    }
}

/// Writing to stdout and stderr.
enum Output {
    static func line(_ text: String) { print(text) }

    static func error(_ message: String) {
        FileHandle.standardError.write(Data("satchel: \(message)\n".utf8))
    }

    static func progress(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }

    static var stderrIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }
}

/// Reads a JSON object argument.
func parseObjectArgument(_ text: String) throws -> JSONObject {
    try JSONObject(parsing: text)
}
