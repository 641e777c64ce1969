#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The calls every open makes, straight to POSIX: Foundation's `attributesOfItem` reads the
/// owner's and group's names from `/etc/passwd` and `/etc/group` each time, and its writes sync.
/// (Apart from FileSystem.swift, which imports LevelDB's C module: its `stat` would be another
/// module's type.)
extension FileSystem {
    /// The names in directory `path` (not `.` and `..`), or nil when it cannot be read.
    static func names(in path: String) -> [String]? {
        guard let directory = opendir(path) else { return nil }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) { String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self)) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Takes an exclusive advisory lock (`flock`) on the file at `path`, creating it: the
    /// descriptor holding it, or nil when another holder has it. The lock goes with
    /// ``unlock(_:)``, or with the process.
    ///
    /// - Throws: ``SatchelError`` `.io` when the file cannot be made or opened (a directory
    ///   this user may not write), which is not another holder.
    static func lock(_ path: String) throws(SatchelError) -> Int32? {
        while true {
            let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else { throw SatchelError(.io, "cannot make \(path): \(String(cString: strerror(errno)))") }
            guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
                close(descriptor)
                return nil
            }
            // A holder that was done removed the file between this open and this lock: the
            // lock is on a file no one else will open, so it is taken again on the path's.
            var held = stat()
            var named = stat()
            if fstat(descriptor, &held) == 0, stat(path, &named) == 0, held.st_ino == named.st_ino, held.st_dev == named.st_dev {
                return descriptor
            }
            close(descriptor)
        }
    }

    /// Releases a lock ``lock(_:)`` took.
    static func unlock(_ descriptor: Int32) { close(descriptor) }

    /// Whether someone holds the lock on the file at `path` (false when there is no such file).
    static func isLocked(_ path: String) -> Bool {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        return flock(descriptor, LOCK_EX | LOCK_NB) != 0
    }

    /// The size of the file at `path`, or nil when it cannot be read.
    /// Absolute, standardized `path` with every symbolic link resolved: its deepest existing
    /// ancestor's real path, and the rest as given (a path about to be made).
    static func resolved(_ path: String) -> String {
        var components = path.split(separator: "/").map(String.init)
        var rest: [String] = []
        while true {
            let existing = "/" + components.joined(separator: "/")
            if let real = realpath(existing, nil) {
                defer { free(real) }
                let head = String(cString: real)
                return rest.isEmpty ? head : (head == "/" ? "" : head) + "/" + rest.reversed().joined(separator: "/")
            }
            guard let last = components.popLast() else { return path }
            rest.append(last)
        }
    }

    static func size(of path: String) -> Int? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return Int(status.st_size)
    }

    /// Whether `path` names a directory (following links); nil when nothing is there.
    static func isDirectory(_ path: String) -> Bool? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return status.st_mode & S_IFMT == S_IFDIR
    }

    /// Whether something (a file, a directory, a link's target) is at `path`.
    static func exists(_ path: String) -> Bool { isDirectory(path) != nil }

    /// What tells that the file at `path` changed: its device and inode, size and modification
    /// time (to the nanosecond where the file system keeps it); nil when it cannot be read.
    static func version(of path: String) -> [Int]? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return [
            Int(status.st_dev), Int(status.st_ino), Int(status.st_size), Int(status.st_mtim.tv_sec), Int(status.st_mtim.tv_nsec),
        ]
    }

    /// The permission bits of the file or directory at `path`, or nil when it does not exist.
    static func permissions(of path: String) -> Int? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return Int(status.st_mode) & 0o7777
    }

    /// Sets the permission bits of `path`; false when it cannot.
    @discardableResult
    static func setPermissions(_ mode: Int, of path: String) -> Bool { chmod(path, mode_t(mode)) == 0 }

    /// Makes directory `path` with `mode` (its parent must exist); false when it cannot.
    @discardableResult
    static func makeDirectory(_ path: String, mode: Int) -> Bool { mkdir(path, mode_t(mode)) == 0 }

    /// The bytes of the small file at `path` (at most `limit`), or nil when it cannot be read.
    static func contents(of path: String, limit: Int = 1 << 16) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        // A buffer of the file's size (and a byte more, to see the end), not of `limit`: the
        // files read so are a few hundred bytes, read on every open.
        var status = stat()
        let capacity = fstat(descriptor, &status) == 0 ? min(limit, max(Int(status.st_size), 0) + 1) : limit
        var bytes = [UInt8](repeating: 0, count: capacity)
        var count = 0
        while count < limit {
            if count == bytes.count { bytes += [UInt8](repeating: 0, count: min(bytes.count, limit - count)) }
            let read = bytes.withUnsafeMutableBytes { Self.readBytes(descriptor, $0.baseAddress! + count, $0.count - count) }
            if read < 0 { return nil }
            if read == 0 { break }
            count += read
        }
        bytes.removeSubrange(count...)
        return bytes
    }

    /// Writes `bytes` into the file at `path` in place (created with `mode`, or truncated),
    /// without syncing: Foundation's writes sync, and its atomic one renames a temporary file.
    static func writeInPlace(_ bytes: [UInt8], to path: String, mode: Int = 0o600) -> Bool {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode_t(mode))
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        return bytes.withUnsafeBytes { Self.writeBytes(descriptor, $0.baseAddress, $0.count) } == bytes.count
    }

    private static func readBytes(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int { read(descriptor, buffer, count) }
    private static func writeBytes(_ descriptor: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int { write(descriptor, buffer, count) }
}
