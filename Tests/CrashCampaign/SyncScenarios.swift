import Foundation
import RhoConnectTestServer
import Satchel
import SatchelSync

/// The scenarios that talk to a server: a first pull of many objects from the in-memory server
/// `satchel sync --backend memory` keeps in a file, and a push of many local changes to the
/// loopback RhoConnect server running in this process, each killed mid-sync.
extension Campaign {
    // MARK: - Pull

    /// The in-memory server's state file, read as the server would.
    static func loadServer(_ file: String) throws -> InMemoryBackend {
        try InMemoryBackend(savedState: try JSONObject(parsing: try Data(contentsOf: URL(fileURLWithPath: file))))
    }

    static func saveServer(_ server: InMemoryBackend, to file: String) async throws {
        try Data(await server.savedState().jsonBytes).write(to: URL(fileURLWithPath: file), options: .atomic)
    }

    /// `satchel sync --backend memory` pulling `pullObjects` objects in pages of 1,000, killed
    /// mid-pull, then killed again as it resumes after the server changed (updates, deletes,
    /// creates). After each kill: `check` passes, and every object the store holds is the
    /// server's copy, whole (a page lands with its cursor or not at all). The sync run to its
    /// end then holds exactly the server's objects: deletes included.
    mutating func pullScenario() async throws -> Tally {
        var tally = Tally()
        let started = ContinuousClock.now
        let directory = try freshDirectory("pull")
        let file = directory + "/server.json"
        let server = InMemoryBackend()
        for k in 0..<settings.pullObjects { _ = await server.put("Item", Self.item(k), id: Self.itemID(k)) }
        try await Self.saveServer(server, to: file)
        let db = directory + "/store"
        let command = [
            "--db", db, "sync", "--backend", "memory", "--url", file, "--user", "u", "--password", "p", "--model", "Item", "--page-size", "1000",
        ]

        let full = try satchelOK(command)
        try await verifyPull(db, file, complete: true)
        var episode = 0
        while tally.kills < settings.kills {
            episode += 1
            try? FileManager.default.removeItem(atPath: db)
            for (round, fraction) in [1.0, 0.6].enumerated() where tally.kills < settings.kills {
                if round == 1 { try await changeServer(file, episode: episode) }
                let run = try satchel(command, killAfter: moment(within: full.seconds, fraction: fraction))
                if run.killed { tally.kills += 1 } else { tally.finished += 1 }
                do { try await verifyPull(db, file, complete: !run.killed) } catch { tally.failures.append("pull, kill \(tally.kills): \(error)") }
            }
            try satchelOK(command)
            do { try await verifyPull(db, file, complete: true) } catch { tally.failures.append("pull, after kill \(tally.kills): \(error)") }
        }
        tally.seconds = Self.seconds(ContinuousClock.now - started)
        return tally
    }

    /// The server changes meanwhile: 100 updates, 100 deletes and 100 creates.
    func changeServer(_ file: String, episode: Int) async throws {
        let server = try Self.loadServer(file)
        let ids = await server.objects("Item").keys.sorted()
        for id in ids.prefix(100) { await server.update("Item", id, ["episode": .int(Int64(episode))]) }
        for id in ids.suffix(100) { await server.delete("Item", id) }
        for k in 0..<100 { _ = await server.put("Item", ["episode": .int(Int64(episode)), "k": .int(Int64(k))], id: "new-\(episode)-\(k)") }
        try await Self.saveServer(server, to: file)
    }

    func verifyPull(_ db: String, _ file: String, complete: Bool) async throws {
        // A run killed before it created the store, or while LevelDB created it, wrote nothing:
        // nothing to check (the next run must open it, and is checked when it has).
        if !complete {
            if !FileManager.default.fileExists(atPath: db) { return }
            let run = try satchel(["--db", db, "check"])
            if run.status != 0 && run.stderr.contains("does not exist (create_if_missing is false)") { return }
        }
        try checkStore(db)
        let remote = await (try Self.loadServer(file)).objects("Item")
        try withStore(db) { store in
            guard let model = store.existingModel("Item") else {
                try require(!complete, "the store has no Item model after a complete sync")
                return
            }
            var local: [String: JSONObject] = [:]
            try model.forEach { local[$0.id] = $0.attributes }
            for (id, attributes) in local {
                // Objects pulled before the server changed them are the server's earlier copy:
                // whole, and of an object the server had.
                guard let copy = remote[id] else {
                    try require(!complete, "\(id) is here, and the server deleted it")
                    continue
                }
                try require(!complete || copy == attributes, "\(id) differs from the server's copy: \(attributes) / \(copy)")
                try require(attributes["name"] != nil || attributes["episode"] != nil, "\(id) is not whole: \(attributes)")
            }
            if complete {
                try require(local.count == remote.count, "\(local.count) objects here, \(remote.count) on the server")
                try require(try store.pendingChanges().isEmpty, "pending changes after a pull")
            }
        }
    }

    // MARK: - Push

    /// `satchel sync --backend rhoconnect` pushing `pushChanges` local changes (two fifths
    /// creates, two fifths updates, a fifth deletes, made through the library before the sync,
    /// plus creates the CLI acknowledged between runs) to the loopback RhoConnect server, killed
    /// mid-push, again as it resumes. After each kill: `check` passes; no change is lost (each
    /// is on the server, or still pending or in flight here); no create is on the server twice.
    /// The sync run to its end leaves nothing pending, no error, every create on the server once,
    /// and the store equal to the server.
    mutating func pushScenario() async throws -> Tally {
        var tally = Tally()
        let started = ContinuousClock.now
        let directory = try freshDirectory("push")
        let server = try await RhoConnectServer.start(Fixture())
        defer { Task { await server.stop() } }
        // Enough server objects for an episode's updates and deletes twice over (the first
        // episode makes its changes twice); each episode puts them back.
        let serverObjects = max(3_000, settings.pushChanges * 6 / 5)
        func seedServer() async {
            for k in 0..<serverObjects { await server.put("Item", user: "ann", id: "s\(k)", ["name": "server \(k)", "edit": "none"]) }
        }
        let db = directory + "/store"
        let command = ["--db", db, "sync", "--backend", "rhoconnect", "--url", server.url.absoluteString, "--model", "Item"]
        var episode = 0
        var seconds: Double?
        while tally.kills < settings.kills {
            episode += 1
            await seedServer()
            try? FileManager.default.removeItem(atPath: db)
            try satchelOK(command + ["--user", "ann", "--password", "secret"])
            var expected = try makeLocalChanges(db, episode: episode)
            if seconds == nil {
                // The first episode measures a whole push, then makes its changes again.
                seconds = try satchelOK(command).seconds
                try await verifyPush(db, server, expected, complete: true)
                expected = try makeLocalChanges(db, episode: -episode)
            }
            for (round, fraction) in [1.0, 0.6].enumerated() where tally.kills < settings.kills {
                // A create the CLI acknowledged before the run: it must reach the server once.
                let tag = "cli-\(episode)-\(round)"
                try satchelOK(["--db", db, "put", "Item", #"{"tag":"\#(tag)","name":"from the CLI"}"#])
                expected.creates.append(tag)
                let run = try satchel(command, killAfter: moment(within: seconds ?? 1, fraction: fraction))
                if run.killed { tally.kills += 1 } else { tally.finished += 1 }
                do { try await verifyPush(db, server, expected, complete: !run.killed) } catch {
                    tally.failures.append("push, kill \(tally.kills): \(error)")
                }
            }
            try satchelOK(command)
            do { try await verifyPush(db, server, expected, complete: true) } catch {
                tally.failures.append("push, after kill \(tally.kills): \(error)")
            }
        }
        tally.seconds = Self.seconds(ContinuousClock.now - started)
        return tally
    }

    /// What a push episode changed here, to find on the server.
    struct LocalChanges {
        var creates: [String] = []
        var updates: [String: String] = [:]
        var deletes: [String] = []
    }

    /// Creates, updates and deletes through the library (the app's own writes), as
    /// `pushChanges` changes.
    func makeLocalChanges(_ db: String, episode: Int) throws -> LocalChanges {
        var changes = LocalChanges()
        let total = settings.pushChanges
        try withStore(db) { store in
            let model = try store.model("Item")
            let existing = try model.findAll().map(\.id).filter { $0.hasPrefix("s") }.sorted()
            let updates = total * 2 / 5, deletes = total / 5, creates = total - updates - deletes
            try require(existing.count >= updates + deletes, "only \(existing.count) server objects to change")
            try store.bulkUpdate { tx in
                for k in 0..<creates {
                    let tag = "e\(episode)-c\(k)"
                    _ = try tx.create(["tag": .string(tag), "name": .string("created \(k)")], in: model)
                    changes.creates.append(tag)
                }
                for id in existing.prefix(updates) {
                    let value = "e\(episode)"
                    _ = try tx.update(id, with: ["edit": .string(value)], in: model)
                    changes.updates[id] = value
                }
                for id in existing.suffix(deletes) {
                    _ = try tx.delete(id, in: model)
                    changes.deletes.append(id)
                }
            }
        }
        return changes
    }

    func verifyPush(_ db: String, _ server: RhoConnectServer, _ expected: LocalChanges, complete: Bool) async throws {
        try checkStore(db)
        let remote = await server.objects("Item", user: "ann")
        var tags: [String: Int] = [:]
        for attributes in remote.values { if let tag = attributes["tag"] { tags[tag, default: 0] += 1 } }
        try withStore(db) { store in
            let model = try store.model("Item")
            let fates = try store.changeFates(model: "Item")
            var localTags: [String: String] = [:]
            try model.forEach { object in if let tag = object.attributes["tag"]?.stringValue { localTags[tag] = object.id } }
            for tag in expected.creates {
                try require((tags[tag] ?? 0) <= 1, "create \(tag) is on the server \(tags[tag]!) times")
                if tags[tag] == 1 { continue }
                try require(!complete, "create \(tag) never reached the server")
                guard let id = localTags[tag], fates[id] != nil else { throw Finding("create \(tag) is lost: not on the server, not pending here") }
            }
            for (id, value) in expected.updates where remote[id]?["edit"] != value {
                try require(!complete, "update of \(id) never reached the server")
                try require(fates[id] != nil, "update of \(id) is lost: not on the server, not pending here")
            }
            for id in expected.deletes where remote[id] != nil {
                try require(!complete, "delete of \(id) never reached the server")
                try require(fates[id] != nil, "delete of \(id) is lost: not on the server, not pending here")
            }
            if complete {
                try require(
                    fates.isEmpty,
                    "\(fates.count) changes still here after a complete sync, such as \(fates.sorted { $0.key < $1.key }.prefix(2).map { "\($0.key): \($0.value)" })"
                )
                var local: [String: [String: String]] = [:]
                try model.forEach { object in
                    local[object.id] = object.attributes.reduce(into: [:]) { $0[$1.key] = $1.value.stringValue ?? $1.value.description }
                }
                try require(local == remote, "the store and the server differ: \(local.count) objects here, \(remote.count) there")
            }
        }
    }
}
