import CLevelDB
import Foundation

/// The file system calls a store's directory needs beyond Foundation's: an atomic exchange of
/// two directories (a restore swaps the restored copy in), making a rename durable, and (in
/// FileSystem+POSIX.swift) the few calls every open makes.
enum FileSystem {
    /// Takes the lock on the file at `path` for one whole-store operation (a restore, a
    /// conversion, a backup into a place), making its directory when missing; throws `refused`
    /// when another holder has it. ``release(_:at:)`` gives it back and removes the file.
    static func hold(_ path: String, refused: @autoclosure () -> SatchelError) throws(SatchelError) -> Int32 {
        try? FileManager.default.createDirectory(
            atPath: URL(fileURLWithPath: path).deletingLastPathComponent().path, withIntermediateDirectories: true)
        guard let descriptor = try lock(path) else { throw refused() }
        return descriptor
    }

    /// Gives back a lock ``hold(_:refused:)`` took on the file at `path`, which goes.
    static func release(_ descriptor: Int32, at path: String) {
        try? FileManager.default.removeItem(atPath: path)
        unlock(descriptor)
    }

    /// Exchanges the directories at `a` and `b` in one step: at every moment each path holds
    /// one of the two, whole.
    static func exchange(_ a: String, _ b: String) throws(SatchelError) {
        guard satchel_exchange_paths(a, b) == 0 else {
            throw SatchelError(.io, "cannot exchange \(a) and \(b): \(String(cString: strerror(errno)))")
        }
    }

    /// Renames `source` to `destination` (which must not exist, or be an empty directory).
    static func rename(_ source: String, to destination: String) throws(SatchelError) {
        guard Foundation.rename(source, destination) == 0 else {
            throw SatchelError(.io, "cannot rename \(source) to \(destination): \(String(cString: strerror(errno)))")
        }
    }

    /// Flushes a directory's entries to the disk, so that a rename in it survives a power cut.
    static func synchronizeDirectory(_ path: String) {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        close(descriptor)
    }
}
