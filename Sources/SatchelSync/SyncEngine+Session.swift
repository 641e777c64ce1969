import Foundation
import Logging
public import Satchel

/// What becomes of the `user` partition when another user logs in than the one whose session
/// the store holds (see ``SyncEngine/Configuration/onUserChange``).
public enum UserChangeAction: Sendable, Hashable {
    /// Wipe it: every object of the `user` partition, synced or not, with its pending changes
    /// (RhoConnect's default). One user's data never stays on the device for the next.
    case wipeUserData
    /// Keep it, with the changes not yet pushed: the next sync pushes them as the new user's and
    /// pulls every model whole again, deleting what the new user's server does not have.
    case keepUserData
}

extension SyncEngine {
    /// The session as the store keeps it: `{"user":…,"data":{…},"client":…}`, and after a logout
    /// or a refused login `{"user":…,"client":…,"loggedOut":true}` (the proof of login gone, the
    /// user and the client id kept for the next login).
    struct StoredSession {
        var session: SyncSession
        var loggedOut: Bool

        init(_ session: SyncSession, loggedOut: Bool = false) {
            self.session = session
            self.loggedOut = loggedOut
            if loggedOut { self.session.data = JSONObject() }
        }

        init(json: JSONObject) {
            session = SyncSession(
                user: json["user"]?.stringValue ?? "", data: json["data"]?.objectValue ?? JSONObject(), clientID: json["client"]?.stringValue)
            // `expired` is what earlier builds wrote after a 401.
            loggedOut = json["loggedOut"]?.boolValue == true || json["expired"]?.boolValue == true
        }

        var json: JSONObject {
            var object: JSONObject = ["user": .string(session.user)]
            if loggedOut { object["loggedOut"] = true } else { object["data"] = .object(session.data) }
            if let id = session.clientID { object["client"] = .string(id) }
            return object
        }
    }

    func storedSession() throws -> StoredSession? { try storage { try store.storedSession().map(StoredSession.init(json:)) } }

    func setStoredSession(_ stored: StoredSession?) throws { try storage { try store.setStoredSession(stored?.json) } }

    // MARK: - Session

    /// Logs in and stores the session (never the password).
    ///
    /// Logging in again as the user of the stored session — at every launch with saved
    /// credentials, after a logout, after the server refused the old session — keeps this
    /// device's client id and every model's cursor: the next sync is a delta. Logging in as
    /// another user first does what ``Configuration/onUserChange`` says (by default, wipes the
    /// `user` partition; `app` and `local` stay), drops every cursor so that the new user's data
    /// is pulled whole, and reports it as a ``SyncNotification/Status/userChanged``
    /// notification.
    ///
    /// - Throws: ``SyncError`` `.unauthorized` for wrong credentials; the store is then as it
    ///   was, the stored session included.
    public func logIn(_ credentials: Credentials) async throws {
        let session = try await withRetry(keepingSessionOn401: true) { try await self.backend.logIn(credentials) }
        try await logIn(session: session)
    }

    /// Stores a session obtained outside the engine — an OAuth access token the app already
    /// holds (`satchel sync --token`), made into a session by the adapter — with the same rules
    /// as ``logIn(_:)``: the same user keeps the client id and cursors, another user's session
    /// does what ``Configuration/onUserChange`` says first.
    public func logIn(session: SyncSession) async throws {
        var session = session
        let previous = try storedSession()
        if let previous, previous.session.user != session.user {
            try await userChanged(from: previous.session.user, to: session.user)
        }
        if session.clientID == nil { session.clientID = previous?.session.clientID }
        try setStoredSession(StoredSession(session))
    }

    /// Another user logged in: the app's choice for the `user` partition, and every cursor
    /// dropped (the server's record of what this client has belongs to the other user).
    private func userChanged(from previous: String, to user: String) async throws {
        let action = configuration.onUserChange(previous, user)
        try forgetServerPositions()
        let what: String
        switch action {
        case .wipeUserData:
            try await onStorageQueue { try $0.wipeSyncedData(in: [.user], includingUnsynced: true) }
            what = "the user partition (\(previous)'s data and unpushed changes) was wiped; app and local data kept"
        case .keepUserData:
            what = "the user partition was kept, as the app asked; the next sync pulls everything again"
        }
        configuration.logger.notice("another user logged in", metadata: ["previous": "\(previous)", "user": "\(user)", "action": "\(action)"])
        emit(.sync(SyncNotification(status: .userChanged, message: "logged in as '\(user)' after '\(previous)': \(what)")))
    }

    /// After a 401: the proof of login is gone; the user and the client id stay for the next
    /// login.
    func expireSession() throws {
        guard let stored = try storedSession(), !stored.loggedOut else { return }
        try setStoredSession(StoredSession(stored.session, loggedOut: true))
    }

    /// Logs out of the server (best effort) and forgets the proof of login. The user's data
    /// stays, and so do the user name and the client id: the same user's next login goes on
    /// with deltas; another user's wipes the data first (see ``logIn(_:)``).
    ///
    /// - Returns: why the server was not told (unreachable, no server given), the session
    ///   forgotten here all the same; nil when it was told, or there was nothing to tell.
    @discardableResult
    public func logOut() async throws -> SyncError? {
        guard let stored = try storedSession() else { return nil }
        var untold: SyncError?
        if !stored.loggedOut {
            do { try await backend.logOut(stored.session) } catch { untold = Self.syncError(error) }
        }
        try setStoredSession(StoredSession(stored.session, loggedOut: true))
        return untold
    }

    /// Whether a session is stored.
    public var isLoggedIn: Bool { (try? currentSession()) != nil }

    /// The user whose session the store holds, after a logout too (the `user` partition is still
    /// that user's data); nil when none was ever stored. A login as another user changes the
    /// partition first (see ``logIn(_:)``): what only reads the server should not.
    public var storedUser: String? { (try? storedSession())?.session.user }

    /// Stores what the backend renewed of the session during the sync (``SyncBackend
    /// /renewedSession(_:)``): a token refreshed here is the next process's (a black-box probe:
    /// every `satchel sync` began with the expired token, a `401` and a refresh). Best effort: a
    /// session that cannot be stored now is renewed again by the next sync.
    func keepRenewedSession() {
        guard let stored = try? storedSession(), !stored.loggedOut else { return }
        let renewed = backend.renewedSession(stored.session)
        if renewed != stored.session { try? setStoredSession(StoredSession(renewed)) }
    }

    func currentSession() throws -> SyncSession? {
        try storedSession().flatMap { $0.loggedOut ? nil : $0.session }
    }

    /// The stored session, after the backend prepared it (registered the client, refreshed a
    /// token); stored again when it changed. A new client identity drops every cursor first.
    func preparedSession() async throws -> SyncSession {
        guard let stored = try currentSession() else { throw SyncError(.notLoggedIn, "log in before syncing") }
        let session = try await withRetry { try await self.backend.prepare(stored) }
        if session != stored {
            if session.clientID != stored.clientID { try forgetServerPositions() }
            try setStoredSession(StoredSession(session))
        }
        return session
    }

    // MARK: - Resets

    /// Drops every synced object with its pending changes, errors, versions and cursors (in the
    /// `user` and `app` partitions), tells the server to forget this client, and drops the
    /// client id; keeps the proof of login. The next sync starts afresh, as a new client (a
    /// server that registers clients gives it a new id). Returns why the server was not told
    /// (none given, it could not be reached, or no session is stored to tell it with), nil when
    /// it was: the reset here is done either way.
    @discardableResult
    public func clientReset() async throws -> SyncError? {
        configuration.logger.notice("client reset: the synced data, cursors and client id go")
        // Logged out: nothing to tell the server with (a black-box probe: the reset said it had).
        var untold: SyncError? = SyncError(.notLoggedIn, "no session is stored")
        if let session = try currentSession() {
            untold = nil
            // A server that cannot be told (none given, or unreachable) keeps its record of the
            // client, which the next sync no longer uses: the reset here goes on, and says so.
            var reset = session
            do { reset = try await withRetry { try await self.backend.resetClient(session) } } catch { untold = Self.syncError(error) }
            reset.clientID = nil
            try setStoredSession(StoredSession(reset))
        }
        try await onStorageQueue { try $0.wipeSyncedData(in: [.user, .app]) }
        return untold
    }

    /// After the server forgot this client: a new client identity, and every cursor dropped. The
    /// data stays, and so do local changes not yet pushed: the full sync that follows re-pulls
    /// everything and deletes what the server no longer has.
    func recoverUnknownClient() async throws {
        guard let session = try currentSession() else { throw SyncError(.notLoggedIn, "log in before syncing") }
        let reset = try await withRetry { try await self.backend.resetClient(session) }
        try setStoredSession(StoredSession(reset))
        try forgetServerPositions()
    }

    /// When what the server knew of this client is lost (a new client, another user): every
    /// model of the `user` and `app` partitions that synced before loses its cursor, and its next
    /// pull is a full one (so objects deleted on the server meanwhile go here too), even after a
    /// crash. Changes waiting for the lost client's pulls to say whether they were carried out
    /// are sent again. Changes the server took whose word was to come in those pulls stay: a
    /// delete is done once the full pull is, and a create, whose link will not come, is kept as
    /// unlinked for the app (``settleAfterPull(_:deletesOnly:)``), its object brought by the
    /// full pull under the server's id — not made a second time (a black-box probe).
    func forgetServerPositions() throws {
        try storage {
            for definition in store.models where definition.syncType != .none && definition.partition != .local {
                let model = try store.model(definition.name)
                try store.bulkUpdate { tx in
                    for (id, change) in try tx.changesInFlight(of: model) where change.state == .awaitingPull {
                        try Self.requeue(model, id, tx)
                    }
                    var state = try tx.syncState(model)
                    guard state.cursor != nil || state.initialSyncComplete else { return }
                    state.cursor = nil
                    state.fullPullPending = true
                    try tx.setSyncState(model, state)
                }
            }
        }
    }

    /// Wipes the `user` partition (every model's data in it, synced or not), tells the server
    /// to forget what it sent this client, logs out, and forgets the session with the client
    /// id: the next login starts as a new device would.
    ///
    /// - Returns: why the server was not told of the reset or the logout (see ``logOut()``).
    @discardableResult
    public func fullResetAndLogout() async throws -> SyncError? {
        configuration.logger.notice("full reset: the user partition and the session go")
        // The server keeps nothing for a client no device uses again (a black-box probe:
        // RhoConnect kept the old client's copy of every object for good).
        var untold: SyncError?
        if let session = try currentSession(), session.clientID != nil {
            do { _ = try await withRetry { try await self.backend.resetClient(session) } } catch { untold = Self.syncError(error) }
        }
        try await onStorageQueue { try $0.wipeSyncedData(in: [.user], includingUnsynced: true) }
        let loggedOut = try await logOut()
        untold = untold ?? loggedOut
        try setStoredSession(nil)
        return untold
    }

    /// Whether a first complete pull of `model` has finished.
    public func initialSyncComplete(_ model: String) throws -> Bool {
        guard let handle = store.existingModel(model) else { return false }
        return try storage { try store.read { try $0.syncState(handle).initialSyncComplete } }
    }

    /// What the server last said about `model` (RhoConnect's source metadata), nil if nothing.
    public func serverMetadata(_ model: String) throws -> JSONValue? {
        guard let handle = store.existingModel(model) else { return nil }
        return try storage { try store.read { try $0.syncState(handle).metadata } }
    }
}
