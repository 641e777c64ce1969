import CLevelDB

/// Turns LevelDB's error strings into typed errors.
///
/// LevelDB's C API has no numeric error codes: a failing call stores a malloc'ed copy of
/// `Status::ToString()` in `*errptr`. The text starts with the status kind (`"Corruption: "`,
/// `"IO error: "`, `"Invalid argument: "`, `"Not implemented: "`, `"NotFound: "`), which is all a
/// wrapper can classify by. This file is the only place that knows those prefixes.
enum LevelDBStatus {
    /// Maps one LevelDB error text to a ``SatchelError``, keeping the raw text in the message.
    static func error(fromLevelDBMessage text: String) -> SatchelError {
        if text.hasPrefix("IO error: ") && (text.hasSuffix(": Permission denied") || text.hasSuffix(": Read-only file system")) {
            // A file this user may not write (the LOCK file's included): not another holder.
            return SatchelError(.io, "cannot write the store's files (\(text))")
        }
        if text.hasPrefix("IO error: lock ") || (text.hasPrefix("IO error: ") && text.contains("/LOCK")) {
            // In-process: "IO error: lock DIR/LOCK: already held by process".
            // Cross-process: "IO error: lock DIR/LOCK: Resource temporarily unavailable".
            return SatchelError(.locked, "the store is open in another process or Store instance (\(text))")
        }
        if text.hasPrefix("Corruption: ") { return SatchelError(.corruption, text) }
        if text.hasPrefix("IO error: ") { return SatchelError(.io, text) }
        if text.hasPrefix("Invalid argument: ") {
            if text.contains("does not exist (create_if_missing is false)") {
                return SatchelError(.storeMissing, text)
            }
            return SatchelError(.invalidArgument, text)
        }
        if text.hasPrefix("Not implemented: ") { return SatchelError(.notSupported, text) }
        if text.hasPrefix("NotFound: ") { return SatchelError(.notFound, text) }
        return SatchelError(.unknown, text)
    }

    /// Runs a LevelDB C call that reports failure through `errptr`, throwing the mapped error.
    ///
    /// The error string is released with `leveldb_free`, as `c.h` requires (plain `free` is
    /// wrong on some platforms).
    static func check<R>(_ body: (UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> R) throws(SatchelError) -> R {
        var err: UnsafeMutablePointer<CChar>? = nil
        let result = body(&err)
        if let err {
            let text = String(cString: err)
            leveldb_free(err)
            throw error(fromLevelDBMessage: text)
        }
        return result
    }
}
