#if SATCHEL_TSAN
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#else
public import Synchronization
#endif

#if !SATCHEL_TSAN
/// A value behind a lock: what every type of Satchel's that is shared between threads keeps its
/// mutable state in — the store's, the sync engine's and the adapters' alike. It is
/// `Synchronization.Mutex`; public so that every layer and adapter takes the one lock type.
///
/// Builds for ThreadSanitizer (`scripts/sanitizers.sh` passes `-DSATCHEL_TSAN`) use a pthread
/// mutex instead: on Linux `Mutex` waits with futex system calls inside the standard library,
/// which ThreadSanitizer cannot see, so every access it guards would be reported as a race.
public typealias Locked<Value> = Mutex<Value>
#else
/// `Synchronization.Mutex` with the same `withLock`, over a pthread mutex that ThreadSanitizer
/// intercepts (see the other branch of this file).
///
/// `@unchecked Sendable`: a box around a C mutex; `value` is only touched while it is held.
public final class Locked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    public init(_ value: sending Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    public func withLock<Result, E: Error>(_ body: (inout sending Value) throws(E) -> sending Result) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
#endif
