import Synchronization

/// The database of the `app` or `local` partition, opened when first used.
///
/// Most apps keep every model in `user`, and each LevelDB open costs file work (and, after an
/// unclean close, a new manifest written and synced), so a store opens `user` (which also holds
/// the store's lock) and only those other partitions whose directory exists; one whose directory
/// is missing holds nothing, and is made and opened when something is first written to it (a
/// model defined there). So while a store is open, a partition's directory exists exactly when
/// its database is open — the loops over every partition (snapshots, backup, verify, compact)
/// go over the open ones and miss nothing.
final class PartitionDatabase: Sendable {
    let partition: Partition
    let directory: String
    private let options: LevelDBOptions
    private let durable: Bool
    private let state: Locked<State>

    private enum State {
        case unopened
        case opened(LevelDB)
        case closed
    }

    /// `opened`: the database when the store opened it (its directory exists), nil when it is
    /// to be made on first use.
    init(partition: Partition, directory: String, options: LevelDBOptions, durable: Bool, opened: LevelDB?) {
        self.partition = partition
        self.directory = directory
        self.options = options
        self.durable = durable
        state = Locked(opened.map(State.opened) ?? .unopened)
    }

    /// The database, made and opened on first use.
    ///
    /// - Throws: ``SatchelError`` `.closed` after ``close()``; what opening it throws.
    func database() throws(SatchelError) -> LevelDB {
        try state.withLock { state throws(SatchelError) -> LevelDB in
            switch state {
            case .opened(let db): return db
            case .closed: throw SatchelError(.closed, "the store is closed")
            case .unopened:
                Store.restrictToOwner(directory, creating: true)
                var options = options
                options.createIfMissing = true
                let db = try LevelDB(path: directory, options: options)
                do {
                    try Store.checkFormat(of: db, partition: partition, durable: durable)
                } catch {
                    try? db.close()
                    throw error as? SatchelError ?? SatchelError(.io, "cannot open the \(partition.rawValue) partition: \(error)")
                }
                state = .opened(db)
                return db
            }
        }
    }

    /// The database when it is open; nil when nothing was ever written to the partition.
    var ifOpened: LevelDB? {
        state.withLock { state in
            if case .opened(let db) = state { return db }
            return nil
        }
    }

    /// Closes the database when it is open; a partition never opened opens no more.
    func close() throws(SatchelError) {
        try state.withLock { state throws(SatchelError) in
            switch state {
            case .opened(let db): try db.close()
            case .unopened: state = .closed
            case .closed: break
            }
        }
    }
}
