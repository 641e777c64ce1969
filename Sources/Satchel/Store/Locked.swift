#if SATCHEL_TSAN
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#else
package import Synchronization
#endif

#if !SATCHEL_TSAN
/// A value behind a lock: what every type of Satchel's that is shared between threads keeps its
/// mutable state in. It is `Synchronization.Mutex`.
///
/// Builds for ThreadSanitizer (`scripts/sanitizers.sh` passes `-DSATCHEL_TSAN`) use a pthread
/// mutex instead: on Linux `Mutex` waits with futex system calls inside the standard library,
/// which ThreadSanitizer cannot see, so every access it guards would be reported as a race.
package typealias Locked<Value> = Mutex<Value>
#else
/// `Synchronization.Mutex` with the same `withLock`, over a pthread mutex that ThreadSanitizer
/// intercepts (see the other branch of this file).
///
/// `@unchecked Sendable`: a box around a C mutex; `value` is only touched while it is held.
package final class Locked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    package init(_ value: sending Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    package func withLock<Result, E: Error>(_ body: (inout sending Value) throws(E) -> sending Result) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
#endif
