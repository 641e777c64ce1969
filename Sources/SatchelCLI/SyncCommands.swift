import ArgumentParser
import Foundation
import Logging
import Satchel
import SatchelKinto
import SatchelParse
import SatchelRhoConnect
import SatchelSalesforce
import SatchelSync

/// Which server to talk to, and as whom.
struct BackendOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The server's kind: rhoconnect (a RhoConnect server), kinto (a Kinto server), parse (a Parse Server), salesforce (a Salesforce org), or memory (an in-memory server kept in the --url file).",
            valueName: "name"))
    var backend: String?
    @Option(
        help: ArgumentHelp(
            "Where the server is: for rhoconnect its root (http://HOST:PORT/); for kinto its /v1 root (http://HOST:PORT/v1); for parse its mount (http://HOST:PORT/parse); for salesforce the instance root (https://HOST); for memory the file holding its state (created when missing).",
            valueName: "url"))
    var url: String?
    @Option(help: "The user to log in as (needed only when no session is stored).") var user: String?
    @Option(
        help: ArgumentHelp(
            "The user's password (stored with the session only for kinto, which asks for it on every request). Visible to other users of this machine in the process list: prefer --password-stdin or SATCHEL_PASSWORD.",
            valueName: "password"))
    var password: String?
    @Flag(name: .customLong("password-stdin"), help: "Read the password from the first line of standard input.") var passwordFromStdin = false
    @Option(help: ArgumentHelp("The Kinto bucket holding one collection per model (created when missing).", valueName: "bucket")) var bucket: String?
    @Option(name: .customLong("app-id"), help: ArgumentHelp("The Parse application id (X-Parse-Application-Id).", valueName: "id")) var appID: String?
    @Option(
        name: .customLong("rest-key"),
        help: ArgumentHelp("The Parse REST API key, when the server checks one (or SATCHEL_REST_KEY).", valueName: "key"))
    var restKey: String?
    @Option(
        name: .customLong("create-protection"),
        help: ArgumentHelp(
            "How a Parse create whose answer was lost is kept from making a second object: request-id (the default: X-Parse-Request-Id, for a server with idempotency on), object-id (the local id as objectId, for a server with allowCustomObjectId), field=NAME (a client-id field NAME, an ordinary attribute) or none.",
            valueName: "protection"))
    var createProtection: String?
    @Option(
        help: ArgumentHelp(
            "A Salesforce access token (stored as the session; instead of --user and --password). Prefer --token-stdin or SATCHEL_TOKEN.",
            valueName: "token"))
    var token: String?
    @Flag(name: .customLong("token-stdin"), help: "Read the Salesforce access token from the first line of standard input.") var tokenFromStdin =
        false
    @Flag(help: "Allow plain http:// to a server that is not on this machine (passwords, sessions and data then cross the network unencrypted).")
    var insecure = false

    /// Secrets off the command line: `--password-stdin` and `--token-stdin` read standard input;
    /// `SATCHEL_PASSWORD` (with `--user`), `SATCHEL_TOKEN` (Salesforce) and `SATCHEL_REST_KEY`
    /// (Parse) stand in for options not given.
    mutating func validate() throws {
        if passwordFromStdin && tokenFromStdin { throw ValidationError("--password-stdin and --token-stdin cannot both read standard input") }
        if passwordFromStdin {
            if password != nil { throw ValidationError("--password and --password-stdin go one at a time") }
            password = try Self.readSecret("--password-stdin", what: "password")
        }
        if tokenFromStdin {
            if token != nil { throw ValidationError("--token and --token-stdin go one at a time") }
            token = try Self.readSecret("--token-stdin", what: "access token")
        }
        let environment = ProcessInfo.processInfo.environment
        if password == nil, user != nil, let secret = environment["SATCHEL_PASSWORD"] { password = secret }
        if token == nil, backend == "salesforce", user == nil, let secret = environment["SATCHEL_TOKEN"], !secret.isEmpty { token = secret }
        if restKey == nil, backend == "parse", let secret = environment["SATCHEL_REST_KEY"], !secret.isEmpty { restKey = secret }
        // An option of another backend is a mistake, said as --token's is (a black-box probe:
        // --bucket and --app-id were ignored in silence).
        for (given, option, owner) in [
            (createProtection != nil, "--create-protection", "parse"), (appID != nil, "--app-id", "parse"),
            (restKey != nil, "--rest-key", "parse"), (bucket != nil, "--bucket", "kinto"),
        ] where given && backend != owner {
            throw ValidationError("\(option) goes with --backend \(owner)")
        }
    }

    /// The first line of standard input, without its line end.
    static func readSecret(_ flag: String, what: String) throws -> String {
        guard let line = readLine(strippingNewline: true) else { throw ValidationError("\(flag): standard input is empty; write the \(what) to it") }
        let secret = line.hasSuffix("\r") ? String(line.dropLast()) : line
        guard !secret.isEmpty else { throw ValidationError("\(flag): the first line of standard input is empty; write the \(what) on it") }
        return secret
    }

    /// `--create-protection` read.
    static func createProtection(_ text: String?) throws -> ParseBackend.CreateProtection {
        switch text {
        case nil, "request-id"?: return .requestIDs
        case "object-id"?: return .customObjectIDs
        case "none"?: return .none
        case let text? where text.hasPrefix("field="):
            let field = String(text.dropFirst(6))
            guard !field.isEmpty else { throw ValidationError("--create-protection field=NAME needs the field's name") }
            return .clientIDField(field)
        case let text?:
            throw ValidationError("--create-protection takes request-id, object-id, field=NAME or none (not '\(text)')")
        }
    }

    var isGiven: Bool { backend != nil || url != nil }

    /// The backend.
    func connect() throws -> any SyncBackend {
        guard let backend else {
            if url != nil { throw ValidationError("--url needs --backend") }
            return DisconnectedBackend()
        }
        guard let url, !url.isEmpty else { throw ValidationError("--backend \(backend) needs --url") }
        switch backend {
        case "memory":
            return try MemoryServer(file: URL(fileURLWithPath: url))
        case "rhoconnect":
            guard let root = Self.httpURL(url) else {
                throw ValidationError("--url for rhoconnect is the server's root, such as http://127.0.0.1:9292/ (not '\(url)')")
            }
            var configuration = RhoConnectBackend.Configuration(url: root)
            configuration.allowInsecureHTTP = insecure
            return RhoConnectBackend(configuration: configuration)
        case "kinto":
            guard let root = Self.httpURL(url) else {
                throw ValidationError("--url for kinto is the server's /v1 root, such as http://127.0.0.1:8888/v1 (not '\(url)')")
            }
            guard let bucket, !bucket.isEmpty else {
                throw ValidationError("--backend kinto needs --bucket B: the bucket holding one collection per model")
            }
            // Kinto checks the password on every request: the stored session keeps it, so that
            // a stored session is enough here as with the other backends.
            var configuration = KintoBackend.Configuration(url: root, bucket: bucket)
            configuration.remembersPassword = true
            configuration.allowInsecureHTTP = insecure
            return KintoBackend(configuration: configuration)
        case "parse":
            guard let mount = Self.httpURL(url) else {
                throw ValidationError("--url for parse is the server's mount, such as http://127.0.0.1:1337/parse (not '\(url)')")
            }
            guard let appID, !appID.isEmpty else { throw ValidationError("--backend parse needs --app-id ID: the app's application id") }
            var configuration = ParseBackend.Configuration(url: mount, applicationID: appID, restKey: restKey)
            configuration.createProtection = try Self.createProtection(createProtection)
            configuration.allowInsecureHTTP = insecure
            return ParseBackend(configuration: configuration)
        case "salesforce":
            guard let root = Self.httpURL(url) else {
                throw ValidationError("--url for salesforce is the org's instance root, such as https://acme.my.salesforce.com (not '\(url)')")
            }
            var configuration = SalesforceBackend.Configuration(url: root)
            configuration.allowInsecureHTTP = insecure
            return SalesforceBackend(configuration: configuration)
        default:
            throw ValidationError("unknown backend '\(backend)' (available: rhoconnect, kinto, parse, salesforce, memory)")
        }
    }

    /// `text` as an http(s) URL with a host.
    static func httpURL(_ text: String) -> URL? {
        guard let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil else { return nil }
        return url
    }

    /// Logs `engine` in when credentials are given; otherwise a session must be stored. A
    /// command that only reads the server (`reading`: `verify`, `search`) refuses another user's
    /// credentials than the stored session's: that login would replace the store's data first.
    func logIn(_ engine: SyncEngine, reading command: String? = nil) async throws {
        func checkUser(_ user: String) async throws {
            guard let command, let stored = await engine.storedUser, stored != user else { return }
            throw ValidationError(
                "the store holds \(stored)'s data, and a login as \(user) would replace it: \(command) changes nothing (sync as \(user) first, or leave out the credentials)"
            )
        }
        if let token {
            guard let salesforce = engine.backend as? SalesforceBackend else { throw ValidationError("--token goes with --backend salesforce") }
            if user != nil || password != nil { throw ValidationError("--token replaces --user and --password") }
            let session = try await salesforce.session(accessToken: token)
            try await checkUser(session.user)
            try await engine.logIn(session: session)
            return
        }
        switch (user, password) {
        case let (user?, password?):
            try await checkUser(user)
            try await engine.logIn(Credentials(user: user, password: password))
        case (nil, nil):
            if await !engine.isLoggedIn {
                let credentials = engine.backend is SalesforceBackend ? "--token (or --token-stdin, or SATCHEL_TOKEN)" : "--user and --password"
                throw SyncError(.notLoggedIn, "no session is stored: pass \(credentials)")
            }
        default: throw ValidationError("--user and --password go together")
        }
    }
}

/// Stands in when no backend is given: every call fails, so only local work is done.
struct DisconnectedBackend: SyncBackend {
    var name: String { "none" }
    var capabilities: SyncCapabilities { SyncCapabilities() }

    private func unavailable() -> SyncError { SyncError(.notSupported, "no server given: pass --backend and --url") }

    func logIn(_ credentials: Credentials) async throws -> SyncSession { throw unavailable() }
    func logOut(_ session: SyncSession) async throws { throw unavailable() }
    func resetClient(_ session: SyncSession) async throws -> SyncSession { throw unavailable() }
    func pull(_ request: PullRequest) async throws -> PullPage { throw unavailable() }
    func push(_ request: PushRequest) async throws -> [PushResult] { throw unavailable() }
}

/// Runs `body` with a store and an engine on the backend the options name; only a sync makes a
/// store that does not exist (`creating`).
func withEngine<T>(
    _ options: StoreOptions, _ backendOptions: BackendOptions, pageSize: Int? = nil, creating: Bool = false, verbose: Bool = false,
    _ body: (SyncEngine) async throws -> T
) async throws -> T {
    let backend = try backendOptions.connect()
    let store = try options.open(creating: creating)
    defer { try? store.close() }
    var configuration = SyncEngine.Configuration()
    if let pageSize { configuration.pageSize = pageSize }
    if verbose {
        // The engine's log lines on stderr, where scripts reading stdout do not see them.
        configuration.logger = Logger(label: "satchel.sync") { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .debug
            return handler
        }
    }
    return try await body(SyncEngine(store: store, backend: backend, configuration: configuration))
}

/// `sync --on-conflict`: the resolver of every model synced.
enum ConflictChoice: String, ExpressibleByArgument, CaseIterable {
    case keepLocal = "keep-local"
    case takeServer = "take-server"
}

struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Run one sync cycle; print each notification as a line of JSON.",
        discussion: """
            A status line has "status"; an object line has "model" and the ids the sync "created", "updated" or \
            "deleted" here, and "renamed" (a create's id → the server's). \
            Exit 0: complete. Exit 3: complete, but the server refused some records (see 'satchel errors'). \
            Any other non-zero exit: the cycle failed (network, authentication, protocol), or is not complete because \
            the server could not take some changes this time (pending for the next sync); nothing was lost.
            """
    )

    @OptionGroup var store: StoreOptions
    @OptionGroup var server: BackendOptions
    @Option(
        name: .customLong("model"),
        help: ArgumentHelp(
            "A model to sync (repeatable; default: every model), with the store's models its associations point at; one the store lacks is made a property bag.",
            valueName: "model"))
    var models: [String] = []
    @Option(help: "Objects per page asked of the server.") var pageSize: Int?
    @Flag(help: "Replace each model's data with the server's bulk snapshot.") var bulk = false
    @Flag(help: "Pull everything again, deleting what the server no longer has.") var full = false
    @Flag(help: "Print the engine's log lines (retries, failed calls, resets) on stderr.") var verbose = false
    @Option(
        help: ArgumentHelp(
            "How true conflicts (an attribute changed here and on a server that checks versions) are decided: keep-local or take-server (default: kept as refused changes; see 'satchel errors'). Changes to different attributes merge either way.",
            valueName: "choice"))
    var onConflict: ConflictChoice?
    @Option(
        help: ArgumentHelp(
            "A JSON file with MM_RSF's sync objects list ([{\"name\": \"Account\", \"filter\": …, \"onlyList\": […], …}]): stored, and used by later syncs until another is given.",
            valueName: "file"))
    var objects: String?

    func validate() throws {
        if bulk && full { throw ValidationError("--bulk and --full do not go together") }
        if let pageSize, pageSize < 1 { throw ValidationError("--page-size must be positive") }
        if server.backend == nil { throw ValidationError("sync needs --backend and --url") }
        // No server names a collection, class or source so (a black-box probe: RhoConnect was
        // asked for the source "").
        if models.contains("") { throw ValidationError("--model '' names no model a server has: give a model's name") }
    }

    func run() async throws {
        let syncObjects = try objects.map(Self.readSyncObjects)
        // A failed sync leaves no store and no model it made.
        let report = try await store.leavingNoTrace {
            // A model named here that the store does not know yet is a property bag to sync.
            try store.withStore(creating: true) { store in
                for name in models + (syncObjects?.map(\.name) ?? []) where store.existingModel(name) == nil {
                    _ = try store.register(ModelDefinition(name: name))
                }
            }
            return try await withEngine(store, server, pageSize: pageSize, creating: true, verbose: verbose) { engine in
                await engine.setEventHandler { event in
                    switch event {
                    case .sync(let notification): Output.line(notification.description, now: true)
                    // The objects a page or a push's results changed, as the engine notifies them
                    // (a black-box probe: a create renamed to its server id said nothing).
                    case .objects(let set) where !set.isEmpty: Output.line(Self.line(set), now: true)
                    default: break
                    }
                }
                var names = models
                if let syncObjects {
                    // A new list replaces the stored one: models it leaves out go back to the default.
                    for model in engine.store.models where !syncObjects.contains(where: { $0.name == model.name }) {
                        if try await engine.configuration(of: model.name) != ModelSyncConfiguration() {
                            try await engine.configure(model.name, ModelSyncConfiguration())
                        }
                    }
                    for (name, configuration) in syncObjects { try await engine.configure(name, configuration) }
                    if names.isEmpty { names = syncObjects.map(\.name) }
                }
                if let onConflict {
                    let answer: SyncConflict.Answer = onConflict == .keepLocal ? .keepLocal : .takeServer
                    for model in engine.store.models { await engine.setConflictResolver(for: model.name) { _ in answer } }
                }
                try await server.logIn(engine)
                let report = try await engine.sync(models: names.isEmpty ? nil : names, mode: full ? .full : bulk ? .bulk : .incremental)
                // A model named "" syncs with no server: its changes are said to stay, not passed
                // over in silence (a black-box probe).
                if names.isEmpty, let unnamed = engine.store.existingModel(""), try unnamed.definition.syncType != .none {
                    let statistics = try unnamed.statistics()
                    let pending = statistics.pendingCreates + statistics.pendingUpdates + statistics.pendingDeletes
                    if pending > 0 {
                        Output.line("model '' (the empty name): \(pending) pending change(s) stay here: no server names a model so")
                    }
                }
                return report
            }
        }
        let postponed = "\(report.postponed) change(s) not taken by the server this time (see the error lines): pending for the next sync"
        let refused = "the server refused \(report.refused) change(s): kept with its copy until resolved (satchel errors, satchel resolve)"
        // Postponed changes leave the cycle incomplete: exit 1, whatever else the server refused
        // (a black-box probe: exit 3, "complete but refused", hid them), the refusals said beside.
        if report.postponed > 0 { throw SyncError(.server, report.refused > 0 ? refused + "; " + postponed : postponed) }
        if report.refused > 0 {
            // One line on stderr, as for every non-zero exit (a black-box probe: there was none).
            Output.note(refused)
            throw ExitCode(3)
        }
    }
}

extension SyncCommand {
    /// An object notification as one line of JSON, keys sorted: the model, and the ids the sync
    /// created, updated or deleted here and renamed (old id → new id), each only when there are
    /// some; `"wiped":true` when the model's synced data went whole.
    static func line(_ set: ChangeSet) -> String {
        var object: JSONObject = ["model": .string(set.model)]
        for (name, ids) in [("created", set.created), ("updated", set.updated), ("deleted", set.deleted)] where !ids.isEmpty {
            object[name] = .array(ids.map(JSONValue.string))
        }
        if !set.renamed.isEmpty { object["renamed"] = .object(JSONObject(set.renamed.map { ($0.key, JSONValue.string($0.value)) })) }
        if set.wiped { object["wiped"] = true }
        return object.description
    }

    /// MM_RSF's sync objects from `path`: a JSON array of objects, each with a `name`.
    static func readSyncObjects(_ path: String) throws -> [(name: String, configuration: ModelSyncConfiguration)] {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch { throw ValidationError("--objects: cannot read '\(path)'") }
        let list: [JSONValue]
        do {
            guard let array = try JSONValue(parsing: data).arrayValue else {
                throw ValidationError("--objects: '\(path)' is not a JSON array of sync objects")
            }
            list = array
        } catch let error as ValidationError {
            throw error
        } catch {
            throw ValidationError("--objects: '\(path)' is not JSON (\(error))")
        }
        return try list.enumerated().map { index, item in
            guard let entry = item.objectValue, let name = entry["name"]?.stringValue, !name.isEmpty else {
                throw ValidationError("--objects: sync object \(index + 1) has no \"name\"")
            }
            do {
                return (name, try ModelSyncConfiguration(syncObject: entry))
            } catch let error as SatchelError {
                throw ValidationError("--objects: sync object '\(name)': \(error.message)")
            }
        }
    }
}

struct PicklistCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "picklist",
        abstract: "A Salesforce picklist's active values, one per line (from the metadata the last sync stored).",
        discussion: "With --controller, a dependent picklist's values valid for that value of its controlling field (true or false for a checkbox)."
    )

    @OptionGroup var store: StoreOptions
    @Argument(help: "The model (the sObject).") var model: String
    @Argument(help: "The picklist field.") var field: String
    @Option(help: ArgumentHelp("A value of the controlling field.", valueName: "value")) var controller: String?

    func run() async throws {
        let opened = try store.open(creating: false)
        defer { try? opened.close() }
        let values: [String] = try await {
            let handle = try opened.existingModel(named: model)
            let metadata = try await SyncEngine(store: opened, backend: DisconnectedBackend()).serverMetadata(handle.name)
            guard let describe = metadata?["describe"].flatMap(SalesforceDescribe.init) else {
                throw SatchelError(
                    .notFound, "no Salesforce metadata is stored for '\(handle.name)': sync it with --backend salesforce first", model: handle.name)
            }
            let picklists = describe.fields.filter { ["picklist", "multipicklist"].contains($0.type) }.map(\.name)
            guard let list = describe.picklist(field, controller: controller) else {
                if let controller, let values = describe.controllerValues(of: field), let controllerName = describe.field(field)?.controllerName {
                    throw SatchelError(
                        .notFound,
                        "'\(controller)' is not a value of '\(controllerName)', the field controlling '\(field)' (its values: \(values.joined(separator: ", ")))",
                        model: handle.name)
                }
                let known = picklists.isEmpty ? "it has none" : "its picklists: \(picklists.joined(separator: ", "))"
                throw SatchelError(.notFound, "'\(field)' is not a picklist of '\(handle.name)' (\(known))", model: handle.name)
            }
            if controller != nil, describe.field(field)?.controllerName == nil {
                throw ValidationError("'\(field)' of '\(handle.name)' is not a dependent picklist: leave out --controller")
            }
            return list
        }()
        for value in values { Output.line(value) }
    }
}

struct ErrorsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "errors",
        abstract: "List the stored per-record sync errors, one JSON object per line."
    )

    @OptionGroup var store: StoreOptions
    @Argument(help: "Only this model's errors.") var model: String?

    func run() throws {
        try store.withStore { store in
            if let model { _ = try store.existingModel(named: model) }
            for error in try store.refusedChanges(model: model) { Output.line(error.json.description) }
        }
    }
}

struct ResolveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resolve",
        abstract: "Resolve a stored sync error; the next sync acts on it.",
        discussion: """
            Create errors: delete or recreate. Update errors: retry or rollback (to the server's copy). Delete errors: retry, or \
            rollback (the server's copy back) when the server sent one.
            """
    )

    @OptionGroup var store: StoreOptions
    @Argument var model: String
    @Argument var id: String
    @Option(help: "delete, recreate, retry or rollback.") var action: String

    func validate() throws {
        if Resolution(rawValue: action) == nil {
            throw ValidationError("--action is one of \(Resolution.allCases.map(\.rawValue).joined(separator: ", ")), not '\(action)'")
        }
    }

    func run() throws {
        try store.withStore { store in
            _ = try store.existingModel(named: model)
            try store.resolve(model, id, Resolution(rawValue: action)!)
        }
        Output.line("resolved \(model) \(id): \(action)")
    }
}

struct LogoutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logout",
        abstract: "Forget the stored session (and tell the server, when --backend and --url are given)."
    )

    @OptionGroup var store: StoreOptions
    @OptionGroup var server: BackendOptions

    func run() async throws {
        let untold = try await withEngine(store, server) { try await $0.logOut() }
        Output.line("logged out" + Self.untold(untold))
    }

    /// What a logout line adds when the server was not told: the session is gone here, and
    /// the server may still take it until it expires there.
    static func untold(_ error: SyncError?) -> String {
        guard let error else { return "" }
        return "; the server was not told (\(error.message)), so the session stays valid there until it expires"
    }
}

struct ResetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reset",
        abstract: "--client: drop synced data and the client id; --full: wipe the user partition and the session.",
        discussion:
            "A client reset tells the server to forget this client when --backend and --url are given; without them (or when the server cannot be reached) the reset is done here, and says the server was not told."
    )

    @OptionGroup var store: StoreOptions
    @OptionGroup var server: BackendOptions
    @Flag(help: "Drop the synced data and the client id; keep the session.") var client = false
    @Flag(help: "Wipe the user partition (synced or not) and the session.") var full = false

    func validate() throws {
        if client == full { throw ValidationError("pass one of --client and --full") }
    }

    func run() async throws {
        let (dropped, untold) = try await withEngine(store, server) { engine in
            // Said, not silent: the local changes the server never confirmed go with the data.
            func unconfirmed() throws -> Int {
                try engine.store.models.reduce(0) { total, definition in
                    let statistics = try engine.store.model(definition.name).statistics()
                    return total + statistics.pendingCreates + statistics.pendingUpdates + statistics.pendingDeletes + statistics.inFlight
                        + statistics.refusedChanges
                }
            }
            let before = try unconfirmed()
            var untold: SyncError?
            untold = try await client ? engine.clientReset() : engine.fullResetAndLogout()
            return (before - (try unconfirmed()), untold)
        }
        let note = dropped > 0 ? "; \(dropped) local change\(dropped == 1 ? "" : "s") the server had not confirmed went with the data" : ""
        let told =
            untold.map { client ? "; the server was not told (\($0.message)), so it keeps its record of the old client" : LogoutCommand.untold($0) }
            ?? ""
        Output.line((client ? "client reset" : "full reset; logged out") + note + told)
    }
}
