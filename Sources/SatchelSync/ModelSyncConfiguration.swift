import Foundation
public import Satchel

/// How one model syncs, set by the app (after the Salesforce Mobile SDK's sync targets and
/// MM_RSF's sync objects). The engine stores it in the store: later runs sync the same way until
/// it is replaced.
///
/// ```swift
/// try await engine.configure("Account", ModelSyncConfiguration(
///     serverFilter: ["region": "EU"], ignoredAttributes: ["internalNotes"],
///     deviceOnlyAttributes: ["isFavourite"], fetchLimit: 500))
/// ```
///
/// Its JSON form is an entry of MM_RSF's `sync_objects` list (``init(syncObject:)``,
/// ``syncObject(named:)``): `filter`, `onlyList`, `ignoreList`, `extra-query`, `extra-device`,
/// `fetch-limit`, `fetch-order` (`"Name ASC, CreatedDate DESC"`) and
/// `disable-initial-blob-download`. A `filter` that is a string (a SOQL fragment) is the server
/// filter `["soql": fragment]`; one that is an object is the server filter as it is.
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
    /// Leave blob attributes as their URLs during the first sync of the model: the next sync
    /// downloads them (MM_RSF's `disable-initial-blob-download`).
    public var skipBlobsOnFirstSync: Bool
    /// Attributes pulled in addition to the others (MM_RSF's `extra-query`: say, a relationship
    /// field such as `Owner.Name`); pulled, never pushed.
    public var extraAttributes: [String]

    public init(
        serverFilter: JSONObject? = nil, onlyAttributes: [String]? = nil, ignoredAttributes: [String] = [],
        deviceOnlyAttributes: [String] = [], fetchLimit: Int? = nil, fetchOrder: [SortKey] = [], skipBlobsOnFirstSync: Bool = false,
        extraAttributes: [String] = []
    ) {
        self.serverFilter = serverFilter
        self.onlyAttributes = onlyAttributes
        self.ignoredAttributes = ignoredAttributes
        self.deviceOnlyAttributes = deviceOnlyAttributes
        self.fetchLimit = fetchLimit
        self.fetchOrder = fetchOrder
        self.skipBlobsOnFirstSync = skipBlobsOnFirstSync
        self.extraAttributes = extraAttributes
    }

    /// A configuration from an entry of MM_RSF's `sync_objects` list (its `name` is not read).
    ///
    /// - Throws: ``Satchel/SatchelError`` `.invalidArgument` naming an unknown key, or a key whose
    ///   value has the wrong type.
    public init(syncObject entry: JSONObject) throws(SatchelError) {
        self.init()
        func strings(_ key: String) throws(SatchelError) -> [String]? {
            guard let value = entry[key] else { return nil }
            guard let list = value.arrayValue, list.allSatisfy({ $0.stringValue != nil }) else {
                throw SatchelError(.invalidArgument, "sync object key '\(key)' must be a list of strings, not \(value)")
            }
            return list.compactMap(\.stringValue)
        }
        for key in entry.keys where !Self.syncObjectKeys.contains(key) {
            throw SatchelError(.invalidArgument, "unknown sync object key '\(key)' (known: \(Self.syncObjectKeys.sorted().joined(separator: ", ")))")
        }
        switch entry["filter"] {
        case nil, .null?: break
        case .string(let soql)?: serverFilter = soql.isEmpty ? nil : ["soql": .string(soql)]
        case .object(let filter)?: serverFilter = filter
        case let other?: throw SatchelError(.invalidArgument, "sync object key 'filter' must be a string or an object, not \(other)")
        }
        onlyAttributes = try strings("onlyList")
        ignoredAttributes = try strings("ignoreList") ?? []
        extraAttributes = try strings("extra-query") ?? []
        deviceOnlyAttributes = try strings("extra-device") ?? []
        if let limit = entry["fetch-limit"] {
            guard let n = limit.intValue, n > 0 else {
                throw SatchelError(.invalidArgument, "sync object key 'fetch-limit' must be a positive integer, not \(limit)")
            }
            fetchLimit = Int(n)
        }
        if let order = entry["fetch-order"] {
            guard let text = order.stringValue else {
                throw SatchelError(.invalidArgument, "sync object key 'fetch-order' must be a string such as \"Name ASC\"")
            }
            fetchOrder = try text.split(separator: ",").map { part throws(SatchelError) in
                let words = part.split(separator: " ").map(String.init)
                guard words.count == 1 || (words.count == 2 && ["ASC", "DESC"].contains(words[1].uppercased())) else {
                    throw SatchelError(
                        .invalidArgument, "sync object key 'fetch-order': '\(part.trimmingCharacters(in: .whitespaces))' is not 'FIELD [ASC|DESC]'")
                }
                return SortKey(Field(words[0]), descending: words.count == 2 && words[1].uppercased() == "DESC")
            }
        }
        if let skip = entry["disable-initial-blob-download"] {
            guard let flag = skip.boolValue else {
                throw SatchelError(.invalidArgument, "sync object key 'disable-initial-blob-download' must be true or false")
            }
            skipBlobsOnFirstSync = flag
        }
    }

    /// The keys of an MM_RSF sync object.
    public static let syncObjectKeys: Set<String> = [
        "name", "filter", "onlyList", "ignoreList", "extra-query", "extra-device", "fetch-limit", "fetch-order", "disable-initial-blob-download",
    ]

    /// This configuration as an MM_RSF sync object named `name` (keys left at their defaults
    /// are left out).
    public func syncObject(named name: String) -> JSONObject {
        var entry: JSONObject = ["name": .string(name)]
        if let serverFilter {
            entry["filter"] = serverFilter.count == 1 && serverFilter["soql"]?.stringValue != nil ? serverFilter["soql"]! : .object(serverFilter)
        }
        if let onlyAttributes { entry["onlyList"] = .array(onlyAttributes.map(JSONValue.string)) }
        if !ignoredAttributes.isEmpty { entry["ignoreList"] = .array(ignoredAttributes.map(JSONValue.string)) }
        if !extraAttributes.isEmpty { entry["extra-query"] = .array(extraAttributes.map(JSONValue.string)) }
        if !deviceOnlyAttributes.isEmpty { entry["extra-device"] = .array(deviceOnlyAttributes.map(JSONValue.string)) }
        if let fetchLimit { entry["fetch-limit"] = .int(Int64(fetchLimit)) }
        if !fetchOrder.isEmpty {
            entry["fetch-order"] = .string(fetchOrder.map { "\($0.field) \($0.descending ? "DESC" : "ASC")" }.joined(separator: ", "))
        }
        if skipBlobsOnFirstSync { entry["disable-initial-blob-download"] = true }
        return entry
    }

    /// Whether every attribute but the id travels between this device and the server (no
    /// attribute lists apply).
    var everyAttributeTravels: Bool { onlyAttributes == nil && ignoredAttributes.isEmpty && deviceOnlyAttributes.isEmpty }

    /// Whether an attribute travels between this device and the server: every attribute (or
    /// those of `onlyList`), less `ignoreList`, plus `extra-query` (where a relationship field,
    /// `Owner.Name`, arrives as the attribute `Owner`); never an `extra-device` one.
    func syncs(_ attribute: String) -> Bool {
        if attribute == Object.idAttribute || deviceOnlyAttributes.contains(attribute) { return false }
        if syncsAsExtraQuery(attribute) { return true }
        if ignoredAttributes.contains(attribute) { return false }
        return onlyAttributes?.contains(attribute) ?? true
    }

    /// Whether `attribute` is queried in addition (`extra-query`): named there, or the
    /// relationship a field named there arrives under (`Owner` for `Owner.Name`). Such an
    /// attribute is pulled, never pushed.
    func syncsAsExtraQuery(_ attribute: String) -> Bool {
        extraAttributes.contains { $0 == attribute || ($0.hasPrefix(attribute) && $0.dropFirst(attribute.count).first == ".") }
    }

    /// `attributes` without those that do not travel.
    func syncing(_ attributes: JSONObject) -> JSONObject {
        if everyAttributeTravels && attributes[Object.idAttribute] == nil {
            return attributes  // everything travels (the usual case, on every pulled object)
        }
        return attributes.filter { name, _ in syncs(name) }
    }
}

/// Retries of calls that may succeed later (no answer, 5xx, 429): exponential backoff with
/// jitter, never shorter than what the server asked for (`Retry-After`). A server that asks for
/// longer than ``maxDelay`` is not waited for: the sync fails at once with the server's error,
/// whose ``SyncError/retryAfter`` says when to sync again.
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
