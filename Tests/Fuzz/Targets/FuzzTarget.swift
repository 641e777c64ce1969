import Satchel
import SatchelSync

/// The fuzz targets: each feeds arbitrary bytes to the parsers Satchel runs on bytes it does not
/// control (JSON text, keys read back from disk, import files, servers' answers), through the
/// same code those parsers run in the store and the adapters.
///
/// A parser that throws ``SatchelError`` or ``SyncError`` has done its job. A finding is a trap,
/// a hang, a sanitizer report, another kind of error, or a broken property (a value that does
/// not survive a round trip, two readers of the same bytes that disagree); ``run(_:)`` stops the
/// process on the last two, so that libFuzzer records the input.
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// `JSONValue(parsing:)`, and the round trip of what it accepts through the writer.
    case json
    /// The key decoder on a whole key, by reading and by skipping elements, and the object-id
    /// readers; the round trip of what it accepts through the encoder.
    case key
    /// The first pass of an import (the item reader and the item checks), on the bytes as a
    /// file, whatever the size of the reader's chunks.
    case importReader = "import"
    /// RhoConnect query pages (pulls, for a schemaless and a typed model) and search answers.
    case rhoconnect
    /// Kinto record lists (pulls) and `/batch` answers.
    case kinto
    /// Parse query results (pulls, keyset and limited) and `/batch` answers.
    case parse
    /// Salesforce query results, describes, datetimes and `Date` headers, and composite answers.
    case salesforce
    /// An encrypted store's key file, encrypted file headers and sealed blob files.
    case encryption

    /// Feeds `bytes` to the target's parsers; stops the process on a finding that does not
    /// stop it by itself (an untyped error, a broken property).
    public func run(_ bytes: UnsafeRawBufferPointer) {
        for outcome in outcomes(bytes) {
            if let finding = outcome.finding { fatalError(finding) }
        }
    }

    /// What each of the target's parsers made of `bytes`, in a fixed order.
    public func outcomes(_ bytes: UnsafeRawBufferPointer) -> [FuzzOutcome] {
        switch self {
        case .json: JSONTarget.outcomes(bytes)
        case .key: KeyTarget.outcomes(bytes)
        case .importReader: ImportTarget.outcomes(bytes)
        case .rhoconnect: RhoConnectTarget.outcomes(bytes)
        case .kinto: KintoTarget.outcomes(bytes)
        case .parse: ParseTarget.outcomes(bytes)
        case .salesforce: SalesforceTarget.outcomes(bytes)
        case .encryption: EncryptionTarget.outcomes(bytes)
        }
    }
}

/// What one parser made of one input.
public struct FuzzOutcome {
    /// Which parser ran: the target's name, then what it read (`rhoconnect.search`).
    public var parser: String
    /// The error the parser threw; nil when it accepted the input.
    public var error: (any Error)?
    /// A property the accepted input broke (a round trip, an agreement); nil when none.
    public var violation: String?

    public init(parser: String, error: (any Error)? = nil, violation: String? = nil) {
        self.parser = parser
        self.error = error
        self.violation = violation
    }

    /// Whether the error, if any, is one of Satchel's typed errors.
    public var isTyped: Bool { error == nil || error is SatchelError || error is SyncError }

    /// What is wrong, when the outcome is a finding: a broken property, or an error of another
    /// type than Satchel's.
    public var finding: String? {
        if let violation { return "\(parser): \(violation)" }
        if let error, !isTyped { return "\(parser): an error that is neither SatchelError nor SyncError: \(error)" }
        return nil
    }

    /// Runs `body` as parser `parser`: its error, or the violation it returns.
    static func of(_ parser: String, _ body: () throws -> String?) -> FuzzOutcome {
        do {
            return FuzzOutcome(parser: parser, violation: try body())
        } catch {
            return FuzzOutcome(parser: parser, error: error)
        }
    }
}
