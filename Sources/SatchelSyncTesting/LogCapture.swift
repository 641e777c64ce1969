public import Logging
import Satchel
import Synchronization

/// Captures every log line of a ``SyncEngine`` (give it ``logger`` in its configuration), for
/// tests that look at what was logged — that no password, token or cookie ever is.
public final class LogCapture: Sendable {
    private let captured = Locked<[String]>([])

    public init() {}

    /// A logger at level `trace` whose lines (message and metadata) land in ``lines``.
    public var logger: Logger {
        Logger(label: "satchel.test") { [self] _ in Handler(capture: self) }
    }

    /// Every line logged so far.
    public var lines: [String] { captured.withLock { $0 } }

    func append(_ line: String) { captured.withLock { $0.append(line) } }

    struct Handler: LogHandler {
        let capture: LogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let all = metadata.merging(event.metadata ?? [:]) { _, new in new }
            capture.append("\(event.level) \(event.message) \(all.map { "\($0.key)=\($0.value)" }.sorted().joined(separator: " "))")
        }
    }
}
