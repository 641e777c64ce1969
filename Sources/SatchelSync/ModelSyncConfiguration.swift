public import Satchel

/// How one model syncs, set by the app (after the Salesforce Mobile SDK's sync targets).
///
/// ```swift
/// await engine.configure("Account", ModelSyncConfiguration(
///     serverFilter: ["region": "EU"], ignoredAttributes: ["internalNotes"],
///     deviceOnlyAttributes: ["isFavourite"], fetchLimit: 500))
/// ```
public struct ModelSyncConfiguration: Sendable, Hashable {
    /// A filter the server applies (its form is the adapter's: Parse `where` JSON, a SOQL
    /// fragment, Kinto query parameters, RhoConnect query parameters).
    public var serverFilter: JSONObject?
    /// When set, only these attributes are pulled and pushed.
    public var onlyAttributes: [String]?
    /// Attributes never pulled nor pushed.
    public var ignoredAttributes: [String]
    /// Attributes that live on this device only: never pushed, never overwritten or removed by
    /// the server.
    public var deviceOnlyAttributes: [String]
    /// A pull from no cursor (a first sync, a full resync) takes at most this many objects, the
    /// first in ``fetchOrder`` (for servers that can; a hint for the adapter).
    public var fetchLimit: Int?
    /// The order a pull from no cursor takes objects in (then by id).
    public var fetchOrder: [SortKey]
    /// Leave blob attributes as their URLs during the first sync of the model (download later).
    public var skipBlobsOnFirstSync: Bool

    public init(
        serverFilter: JSONObject? = nil, onlyAttributes: [String]? = nil, ignoredAttributes: [String] = [],
        deviceOnlyAttributes: [String] = [], fetchLimit: Int? = nil, fetchOrder: [SortKey] = [], skipBlobsOnFirstSync: Bool = false
    ) {
        self.serverFilter = serverFilter
        self.onlyAttributes = onlyAttributes
        self.ignoredAttributes = ignoredAttributes
        self.deviceOnlyAttributes = deviceOnlyAttributes
        self.fetchLimit = fetchLimit
        self.fetchOrder = fetchOrder
        self.skipBlobsOnFirstSync = skipBlobsOnFirstSync
    }

    /// Whether an attribute travels between this device and the server.
    func syncs(_ attribute: String) -> Bool {
        if attribute == Object.idAttribute { return false }
        if deviceOnlyAttributes.contains(attribute) || ignoredAttributes.contains(attribute) { return false }
        if let onlyAttributes { return onlyAttributes.contains(attribute) }
        return true
    }

    /// `attributes` without those that do not travel.
    func syncing(_ attributes: JSONObject) -> JSONObject {
        if onlyAttributes == nil && ignoredAttributes.isEmpty && deviceOnlyAttributes.isEmpty && attributes[Object.idAttribute] == nil {
            return attributes  // everything travels (the usual case, on every pulled object)
        }
        return attributes.filter { name, _ in syncs(name) }
    }
}

/// Retries of calls that may succeed later (no answer, 5xx, 429): exponential backoff with
/// jitter, never shorter than what the server asked for (`Retry-After`).
public struct RetryPolicy: Sendable, Hashable {
    /// Attempts per call, the first included.
    public var maxAttempts: Int
    public var baseDelay: Duration
    public var maxDelay: Duration
    /// The delay varies randomly by up to this fraction either way (0.2 = ±20 %).
    public var jitter: Double

    public init(maxAttempts: Int = 4, baseDelay: Duration = .milliseconds(500), maxDelay: Duration = .seconds(30), jitter: Double = 0.2) {
        self.maxAttempts = maxAttempts
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.jitter = jitter
    }

    /// The wait before attempt `attempt + 1` (attempt counts from 1), given what the server asked.
    func delay(after attempt: Int, serverAsked: Duration?, random: Double) -> Duration {
        let exponential = baseDelay * (1 << min(attempt - 1, 30))
        var delay = min(exponential, maxDelay)
        delay = delay * (1 + jitter * (2 * random - 1))
        if let serverAsked, serverAsked > delay { delay = serverAsked }
        return delay
    }
}
