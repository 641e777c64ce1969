public import Satchel

/// Progress of a sync, per model (RhoConnect's sync notifications).
public struct SyncNotification: Sendable, Hashable, CustomStringConvertible {
    public enum Status: String, Sendable, Hashable {
        /// A page was applied (or a push done) for ``model``.
        case inProgress
        /// ``model`` finished its cycle.
        case ok
        /// Something failed: ``errorCode`` and ``message`` say what. For per-refused changes the
        /// model still finishes with `ok`.
        case error
        /// The whole sync finished (no model).
        case complete
        /// The server's schema for ``model`` changed; syncing stopped.
        case schemaChanged
        /// Another user logged in than the one whose session the store held; ``message`` says
        /// what became of the `user` partition (wiped, unless the app chose to keep it).
        case userChanged
    }

    public var status: Status
    public var model: String?
    /// Objects the server holds for the model, when it says.
    public var totalCount: Int?
    /// Objects processed in this cycle so far.
    public var processedCount: Int
    /// Objects in the last page.
    public var cumulativeCount: Int
    public var errorCode: SyncError.Code?
    public var message: String?

    public init(
        status: Status, model: String? = nil, totalCount: Int? = nil, processedCount: Int = 0, cumulativeCount: Int = 0,
        errorCode: SyncError.Code? = nil, message: String? = nil
    ) {
        self.status = status
        self.model = model
        self.totalCount = totalCount
        self.processedCount = processedCount
        self.cumulativeCount = cumulativeCount
        self.errorCode = errorCode
        self.message = message
    }

    /// One line of JSON, keys sorted: what `satchel sync` prints.
    public var description: String {
        var object: JSONObject = ["status": .string(status.rawValue), "processed": .int(Int64(processedCount))]
        if let model { object["model"] = .string(model) }
        if let totalCount { object["total"] = .int(Int64(totalCount)) }
        if cumulativeCount > 0 { object["count"] = .int(Int64(cumulativeCount)) }
        if let errorCode { object["error"] = .string(errorCode.description) }
        if let message { object["message"] = .string(message) }
        return object.description
    }
}

/// Objects a sync created, changed or deleted in the store, per model: the store's
/// ``Satchel/ChangeSet`` (its origin `.server`), which ``Satchel/Store/changes`` delivers too.
@available(*, deprecated, renamed: "ChangeSet")
public typealias ObjectNotification = ChangeSet

/// What a finished sync did.
public struct SyncReport: Sendable, Hashable {
    /// The models synced, in order.
    public var models: [String] = []
    /// Local changes the server accepted, and those it refused.
    public var accepted = 0
    public var refused = 0
    /// Local changes the server could not take this time (an error of its own on that change,
    /// such as Parse's code 1): pending again, sent by the next sync.
    public var postponed = 0
    /// Updates the server refused as conflicts that changed other attributes than the server's
    /// change: merged attribute by attribute and sent again (``SyncConflict``).
    public var merged = 0
    /// True conflicts the model's ``ConflictResolver`` answered.
    public var resolved = 0
    /// Objects applied from the server.
    public var pulled = 0
    /// Whether a model's schema changed (syncing stopped there).
    public var schemaChanged = false
    /// Whether an unknown client was reset and synced again.
    public var clientWasReset = false
    /// The ids the server gave objects created here, per model: local id → server id. The object
    /// (and every reference to it) now has the server's id; an app that holds the local id
    /// follows it here (`report.serverIDs["Product"]?[id] ?? id`).
    public var serverIDs: [String: [String: String]] = [:]

    public init() {}
}

/// Everything a ``SyncEngine`` reports.
public enum SyncEvent: Sendable, Hashable {
    case sync(SyncNotification)
    case objects(ChangeSet)
    /// A sync finished (successfully or not): the sync-completed event.
    case completed(SyncReport)
}
