import Foundation

/// A file written whole or not at all: its bytes go to `path` + `.partial`, which replaces
/// `path` only once every byte is written and synced. A failure, or dropping it before
/// ``commit()``, removes the partial file and leaves `path` as it was.
///
/// A symbolic link is followed: the file it names is replaced, the link stays. A path that is
/// no regular file (a pipe, a device, `/dev/stdout`) is written to as it is, in place, since
/// replacing it would put a plain file where the reader waits (a black-box probe); a directory
/// is refused.
final class ReplacingFile {
    let path: String
    let partial: String?
    private var descriptor: Int32
    private var committed = false

    /// - Throws: ``SatchelError`` `.io` when the file cannot be written.
    init(path given: String) throws(SatchelError) {
        // A standard stream named by path (`/dev/stdout`, `/dev/fd/3`) is the descriptor the
        // process holds: written where it stands, not reopened (which would start at the
        // beginning of a file it was redirected to) nor replaced.
        let standardized = URL(fileURLWithPath: given).standardizedFileURL.path
        if let stream = Self.streamDescriptor(standardized) {
            path = standardized
            partial = nil
            descriptor = dup(stream)
            guard descriptor >= 0 else { throw SatchelError(.io, "cannot write '\(given)': \(String(cString: strerror(errno)))") }
            return
        }
        path = FileSystem.resolved(standardized)
        var status = stat()
        let exists = stat(path, &status) == 0
        if exists && status.st_mode & S_IFMT == S_IFDIR { throw SatchelError(.io, "cannot write '\(given)': it is a directory") }
        if exists && status.st_mode & S_IFMT != S_IFREG {
            partial = nil
            descriptor = open(path, O_WRONLY | O_CLOEXEC)
        } else {
            partial = path + ".partial"
            descriptor = open(path + ".partial", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        }
        guard descriptor >= 0 else { throw SatchelError(.io, "cannot write '\(given)': \(String(cString: strerror(errno)))") }
    }

    /// The descriptor a path names: `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`,
    /// `/proc/self/fd/N`; nil for any other path.
    private static func streamDescriptor(_ path: String) -> Int32? {
        switch path {
        case "/dev/stdout": return 1
        case "/dev/stderr": return 2
        default:
            for prefix in ["/dev/fd/", "/proc/self/fd/"] where path.hasPrefix(prefix) {
                return Int32(path.dropFirst(prefix.count))
            }
            return nil
        }
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
        guard let partial else {
            // Written in place: a pipe or a device takes no sync.
            let closing = descriptor
            descriptor = -1
            committed = true
            guard close(closing) == 0 else { throw failure() }
            return
        }
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
        if !committed, let partial { unlink(partial) }
    }
}
