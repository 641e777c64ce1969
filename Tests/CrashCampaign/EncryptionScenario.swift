import Foundation
import Satchel
import SatchelTestSupport

/// A store turned encrypted, given a new key and turned plain again, each conversion killed at
/// random moments.
extension Campaign {
    /// The conversions the scenario cycles through, each with the key the store opens with
    /// before and after it (nil: none).
    private enum Conversion: String, CaseIterable {
        case encrypt, rekey, decrypt
    }

    /// `satchel encrypt`, `rekey` and `decrypt` of a store of `encryptObjects` objects (an
    /// index, a local model, a blob), in turn, each killed at a random moment and then run to
    /// its end. After each kill the store opens with exactly one of the keys before and after
    /// the conversion, passes `check` with it, and holds every object as it was; nothing is
    /// left beside it once it has been opened.
    mutating func encryptionScenario() throws -> Tally {
        var tally = Tally()
        let started = ContinuousClock.now
        let directory = try freshDirectory("encrypt")
        let file = directory + "/items.jsonl"
        try Self.writeItems(settings.encryptObjects, to: file)
        let db = directory + "/store"
        try newItemStore(db)
        let source = try withStore(db) { store in
            _ = try store.importObjects(from: URL(fileURLWithPath: file), into: try store.model("Item"))
            _ = try store.register(ModelDefinition(name: "Setting", partition: .local)).put(["object": "theme", "value": "dark"])
            let photo = try store.blobs.put(Data("a photo's bytes".utf8))
            _ = try store.model("Item").put(["object": "with-photo", "photo": .string(photo)])
            return try Self.digest(store)
        }
        let keys = [directory + "/first.key", directory + "/second.key"]
        for key in keys { try Data((try EncryptionKey.random().hex + "\n").utf8).write(to: URL(fileURLWithPath: key)) }

        // Where the store is: no key, the first, the second.
        var current: String? = nil
        var round = 0
        var lengths: [Conversion: Double] = [:]
        while tally.kills < settings.kills {
            let conversion = Conversion.allCases[round % 3]
            round += 1
            let next: String? = conversion == .decrypt ? nil : keys[round % 2]
            var arguments = ["--db", db, conversion.rawValue, "--key-file", (conversion == .encrypt ? next : current)!]
            if conversion == .rekey { arguments += ["--new-key-file", next!] }
            // The conversion's length, unkilled, measured once on a copy (so that kills land within it).
            if lengths[conversion] == nil {
                let probe = directory + "/probe"
                try? FileManager.default.removeItem(atPath: probe)
                try FileManager.default.copyItem(atPath: db, toPath: probe)
                lengths[conversion] = try satchelOK(["--db", probe] + arguments.dropFirst(2)).seconds
                try? FileManager.default.removeItem(atPath: probe)
            }
            let run = try satchel(arguments, killAfter: moment(within: lengths[conversion] ?? 1))
            if run.killed { tally.kills += 1 } else { tally.finished += 1 }
            do {
                current = try verifyConversion(db, conversion, before: current, after: next, source: source, killed: run.killed)
            } catch {
                tally.failures.append("\(conversion.rawValue), kill \(tally.kills): \(error)")
                return tally
            }
            if current != next {
                // Killed before the exchange: the conversion run again finishes.
                try satchelOK(arguments)
                current = try verifyConversion(db, conversion, before: current, after: next, source: source, killed: false)
            }
        }
        tally.seconds = Self.seconds(ContinuousClock.now - started)
        return tally
    }

    /// The key the store now opens with (the one before the conversion or the one after,
    /// never both, never neither), after checking the store with it.
    private func verifyConversion(
        _ db: String, _ conversion: Conversion, before: String?, after: String?, source: (objects: Int, hash: UInt64), killed: Bool
    ) throws -> String? {
        func opens(_ key: String?) -> Bool {
            let run = try? satchel(["--db", db] + (key.map { ["--key-file", $0] } ?? []) + ["stats"])
            return run?.status == 0
        }
        let withBefore = opens(before)
        let withAfter = before == after ? withBefore : opens(after)
        try require(withBefore != withAfter, "after \(conversion.rawValue) the store opens with the key before: \(withBefore), after: \(withAfter)")
        try require(killed || withAfter, "the finished \(conversion.rawValue) left the store with the key before it")
        let key = withAfter ? after : before
        let check = try satchel(["--db", db] + (key.map { ["--key-file", $0] } ?? []) + ["check"])
        try require(check.status == 0, "satchel check failed: \(check.stdout.suffix(300)) \(check.stderr.suffix(300))")
        var configuration = Store.Configuration()
        configuration.createIfMissing = false
        configuration.encryptionKey = try key.map { try EncryptionKey(hex: String(contentsOfFile: $0, encoding: .utf8)) }
        let store = try Store(path: db, configuration: configuration)
        defer { try? store.close() }
        let now = try Self.digest(store)
        try require(now == source, "the store holds \(now.objects) objects (digest \(now.hash)), it held \(source.objects)")
        let photo = try store.model("Item").find("with-photo")?.attributes["photo"]?.stringValue ?? ""
        try require(try store.blobs.data(for: photo) == Data("a photo's bytes".utf8), "the blob does not read back")
        try require(!FileManager.default.fileExists(atPath: db + ".converting"), "the conversion's copy is still beside the store once it opened")
        return key
    }
}
