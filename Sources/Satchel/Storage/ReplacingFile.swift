import Foundation

/// A file written whole or not at all: its bytes go to `path` + `.partial`, which replaces
/// `path` only once every byte is written and synced. A failure, or dropping it before
/// ``commit()``, removes the partial file and leaves `path` as it was.
final class ReplacingFile {
    let path: String
    let partial: String
    private var descriptor: Int32
    private var committed = false

    /// - Throws: ``SatchelError`` `.io` when the partial file cannot be made.
    init(path: String) throws(SatchelError) {
        self.path = path
        partial = path + ".partial"
        descriptor = open(partial, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw SatchelError(.io, "cannot write '\(path)': \(String(cString: strerror(errno)))") }
    }

    private func failure() -> SatchelError { SatchelError(.io, "cannot write '\(path)': \(String(cString: strerror(errno)))") }

    /// Appends `data`.
    func write(_ data: Data) throws(SatchelError) {
        let descriptor = descriptor
        let complete = data.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Foundation.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return false }
                offset += written
            }
            return true
        }
        guard complete else { throw failure() }
    }

    /// Syncs the bytes and puts the file in place of `path`.
    func commit() throws(SatchelError) {
        guard fsync(descriptor) == 0 else { throw failure() }
        let closing = descriptor
        descriptor = -1
        guard close(closing) == 0 else { throw failure() }
        try FileSystem.rename(partial, to: path)
        committed = true
        let directory = (path as NSString).deletingLastPathComponent
        FileSystem.synchronizeDirectory(directory.isEmpty ? "." : directory)
    }

    deinit {
        // Not committed: the partial file goes.
        if descriptor >= 0 { close(descriptor) }
        if !committed { unlink(partial) }
    }
}
