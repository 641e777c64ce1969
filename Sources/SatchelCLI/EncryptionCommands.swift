import ArgumentParser
import Foundation
import Satchel

struct EncryptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "encrypt",
        abstract: "Encrypt the store with the key in --key-file (64 hexadecimal digits).",
        discussion: """
            The store is copied into DIR.converting encrypted with a new data key sealed under the key, the copy \
            checked, then the two directories exchanged at once and the plain store removed: killed at any moment, \
            DIR holds the old store or the encrypted one. Afterwards every command needs --key-file (or \
            SATCHEL_KEY_FILE). Blob files are sealed too, under their names. The store must not be open elsewhere.
            """
    )

    @OptionGroup var store: StoreOptions

    func run() throws {
        let path = try store.path()
        guard let key = try store.key() else { throw ValidationError("encrypt needs --key-file FILE: the key to encrypt the store with") }
        try Store.encrypt(path: path, key: key)
        Output.line("encrypted \(path)")
    }
}

struct DecryptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decrypt",
        abstract: "Decrypt the store encrypted with the key in --key-file: afterwards it opens without a key.",
        discussion: "As encrypt, the other way: a checked copy exchanged at once. The store must not be open elsewhere."
    )

    @OptionGroup var store: StoreOptions

    func run() throws {
        let path = try store.path()
        guard let key = try store.key() else { throw ValidationError("decrypt needs --key-file FILE: the store's key") }
        try Store.decrypt(path: path, key: key)
        Output.line("decrypted \(path)")
    }
}

struct RekeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rekey",
        abstract: "Encrypt the store under the key in --new-key-file instead of the one in --key-file.",
        discussion: """
            A new data key is made and every file rewritten (a checked copy exchanged at once, as encrypt does), \
            so that neither the old key nor a copy of the old key file opens what the store holds from now on. \
            With --key-only, only the store's small key file is rewritten: the old key no longer opens the store, \
            but a copy of the old key file with the old key still would.
            """
    )

    @OptionGroup var store: StoreOptions
    @Option(help: ArgumentHelp("The new key: a file holding 64 hexadecimal digits.", valueName: "file")) var newKeyFile: String
    @Flag(help: "Rewrite the key file only (the data key stays).") var keyOnly = false

    func run() throws {
        let path = try store.path()
        guard let key = try store.key() else { throw ValidationError("rekey needs --key-file FILE: the store's key now") }
        let newKey = try StoreOptions.readKey(newKeyFile, option: "--new-key-file")
        if keyOnly {
            try Store.changeEncryptionKey(path: path, from: key, to: newKey)
        } else {
            try Store.rekey(path: path, from: key, to: newKey)
        }
        Output.line("rekeyed \(path)\(keyOnly ? " (key file only)" : "")")
    }
}
