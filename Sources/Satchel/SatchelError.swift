/// The error every throwing Satchel API reports.
///
/// A `SatchelError` carries a ``Code`` to match on, a human-readable ``message`` that says what
/// went wrong (and, where possible, what to do about it), and the model and object the failed
/// operation was about. Messages name models, attributes and ids, never object bodies.
///
/// ```swift
/// do {
///     try products.update("p-1", with: ["price": 12])
/// } catch let error as SatchelError where error.code == .notFound {
///     // the object does not exist
/// }
/// ```
///
/// A failed operation never leaves a partial write behind: the store is as it was before the call.
///
/// `SatchelError` is a value type and `Sendable`.
public struct SatchelError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure happened. New codes may be added without breaking callers.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Wrapped: String, Sendable {
            case notFound, alreadyExists, malformedJSON, invalidObject, schemaViolation, invalidName
            case invalidArgument, modelConflict, crossPartition, locked, corruption, io, storeMissing, notAStore, wrongKey
            case unsupportedFormat, closed, busy, notSupported, unindexedQuery, unknown
        }

        private let wrapped: Wrapped
        private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

        /// The object, model or record does not exist.
        public static let notFound = Code(.notFound)
        /// An object with that id already exists (``Model/create(_:)`` never overwrites).
        public static let alreadyExists = Code(.alreadyExists)
        /// Input is not well-formed JSON, is not valid UTF-8, or nests deeper than the limit.
        public static let malformedJSON = Code(.malformedJSON)
        /// Well-formed JSON of the wrong shape: a non-object where an object is expected, a
        /// non-string `object` id, an object with no attributes.
        public static let invalidObject = Code(.invalidObject)
        /// A write to a fixed-schema model names an undeclared attribute or a value of the wrong type.
        public static let schemaViolation = Code(.schemaViolation)
        /// A model or attribute name that cannot be used (for example an empty model name).
        public static let invalidName = Code(.invalidName)
        /// An argument outside its allowed range.
        public static let invalidArgument = Code(.invalidArgument)
        /// A model definition conflicts with the stored one (for example a partition change of a
        /// model that holds objects).
        public static let modelConflict = Code(.modelConflict)
        /// A transaction tried to write models of two partitions; each partition is its own
        /// database, so one transaction writes one partition.
        public static let crossPartition = Code(.crossPartition)
        /// Another process (or another `Store` in this process) holds the store open.
        public static let locked = Code(.locked)
        /// LevelDB found damaged data, or a stored record does not decode.
        public static let corruption = Code(.corruption)
        /// An I/O error from the file system.
        public static let io = Code(.io)
        /// The store directory does not exist and creation was not requested.
        public static let storeMissing = Code(.storeMissing)
        /// The directory holds files but is not a Satchel store (it has none of the `user`, `app`
        /// and `local` partitions): nothing was written into it.
        public static let notAStore = Code(.notAStore)
        /// The store is encrypted and no key, or another key, was given; or a key was given for
        /// a store that is not encrypted. Nothing was read or written.
        public static let wrongKey = Code(.wrongKey)
        /// The store was written by a newer, incompatible version of Satchel.
        public static let unsupportedFormat = Code(.unsupportedFormat)
        /// A query that requires an index (``Query/requiresIndex``, or the store's
        /// ``Store/Configuration/refusesFullScans``) would scan every object of its model; the
        /// message names the attribute to index.
        public static let unindexedQuery = Code(.unindexedQuery)
        /// The store has been closed.
        public static let closed = Code(.closed)
        /// The store cannot close while iterators, snapshots or calls are still using it.
        public static let busy = Code(.busy)
        /// The operation is not supported.
        public static let notSupported = Code(.notSupported)
        /// An error LevelDB reported that matches no other code; the message keeps its text.
        public static let unknown = Code(.unknown)

        public var description: String { wrapped.rawValue }
    }

    /// What kind of failure happened.
    public var code: Code
    /// What went wrong, in one line.
    public var message: String
    /// The model the failed operation was about, when there is one.
    public var model: String?
    /// The id of the object the failed operation was about, when there is one.
    public var objectID: String?

    /// Creates an error.
    public init(_ code: Code, _ message: String, model: String? = nil, objectID: String? = nil) {
        self.code = code
        self.message = message
        self.model = model
        self.objectID = objectID
    }

    /// One line: the code, then the message.
    public var description: String { "\(code): \(message)" }
}
