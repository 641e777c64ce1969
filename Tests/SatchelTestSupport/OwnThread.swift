import Foundation

/// Runs `body` on a thread of its own and waits for its result, which it returns.
///
/// For a test's long synchronous work (parsing tens of megabytes, refusing a hostile file).
/// Tests run in parallel on the concurrency pool, which has as many threads as the machine has
/// cores; the loopback servers of other tests answer on that pool too. Two tests computing there
/// at once stop every server for as long, and their clients time out (on a 2-core machine, four
/// clients once waited their whole 20 s). A thread of its own is scheduled by the kernel beside
/// the pool.
///
/// The work's outcome is returned as a `Result`, so that the test checks it where it runs
/// (expectations are recorded against the test's task).
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async -> Result<T, any Error> {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: Result { try body() }) }
        // A main thread's stack on Linux, so that work deep in recursion does not run out of
        // stack here sooner than where it would run outside the tests.
        thread.stackSize = 8 << 20
        thread.start()
    }
}
