public import Foundation

/// How much of a server's answer an adapter reads before it gives up: what keeps a broken or
/// hostile server (an endless body, a huge array, `Next-Page` links that loop) from exhausting
/// the device's memory or hanging a sync. A sync that passes a limit fails with a typed
/// ``SyncError`` and leaves the store as it was.
///
/// The defaults are far above what the supported servers send for the page sizes Satchel asks
/// for: a page of 1,000 objects is a few megabytes and a few tens of thousands of values.
public struct AnswerLimits: Sendable, Hashable {
    /// The longest body of an API answer, in bytes (32 MiB). A longer answer, or one whose
    /// `Content-Length` says it will be longer, is cut off as soon as it passes the limit:
    /// ``SyncError/Code/answerTooLarge``.
    public var maximumBytes: Int
    /// The most array elements and object members an answer's JSON may hold in all (2,000,000):
    /// a body within ``maximumBytes`` can still spell millions of tiny values (`[0,0,…]`), each
    /// a node in memory. More is ``SyncError/Code/protocolViolation``. Nesting is limited to
    /// ``Satchel/JSONValue/maxDepth`` levels in any case, below a few of the answer's own.
    public var maximumValues: Int
    /// The longest download of a file (a blob, a bulk-data file), in bytes (512 MiB).
    public var maximumDownloadBytes: Int
    /// The longest one request may take from start to end, in seconds (10 minutes), however
    /// steadily its answer trickles in (the adapters' `timeout` is how long an answer may stall).
    public var maximumDuration: TimeInterval

    public init(
        maximumBytes: Int = 32 << 20, maximumValues: Int = 2_000_000, maximumDownloadBytes: Int = 512 << 20,
        maximumDuration: TimeInterval = 600
    ) {
        self.maximumBytes = maximumBytes
        self.maximumValues = maximumValues
        self.maximumDownloadBytes = maximumDownloadBytes
        self.maximumDuration = maximumDuration
    }
}
