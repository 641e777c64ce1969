public import Foundation
public import Satchel

/// A unique directory under the system's temporary directory, removed when the value is released.
/// Tests run in parallel, so every test makes its own.
public final class TemporaryDirectory: Sendable {
    public let path: String

    public init(_ label: String = "satchel") {
        let name = "\(label)-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString)"
        path = FileManager.default.temporaryDirectory.appendingPathComponent(name).path
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// A path inside the directory.
    public func child(_ name: String) -> String { (path as NSString).appendingPathComponent(name) }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Opens a store in a fresh temporary directory, runs `body`, then closes the store (asserting
/// that nothing still uses it) and removes the directory.
public func withTemporaryStore<T>(
    configuration: Store.Configuration = Store.Configuration(),
    _ body: (Store) throws -> T
) throws -> T {
    let directory = TemporaryDirectory()
    let store = try Store(path: directory.child("store"), configuration: configuration)
    return try close(store, after: Result { try body(store) })
}

/// The async form of ``withTemporaryStore(configuration:_:)``, for a body that awaits (work on
/// a thread of its own, a server).
public func withTemporaryStore<T>(
    configuration: Store.Configuration = Store.Configuration(),
    _ body: (Store) async throws -> T
) async throws -> T {
    let directory = TemporaryDirectory()
    let store = try Store(path: directory.child("store"), configuration: configuration)
    let result: Result<T, any Error>
    do {
        result = .success(try await body(store))
    } catch {
        result = .failure(error)
    }
    return try close(store, after: result)
}

/// Closes `store` after its body's `result`: on a failure, quietly, and the failure is thrown;
/// on a success, asserting that nothing still uses the store.
private func close<T>(_ store: Store, after result: Result<T, any Error>) throws -> T {
    guard case .success(let value) = result else {
        try? store.close()
        return try result.get()
    }
    try store.close()
    return value
}

/// Files of the project's `Fixtures/` folder, found from this source file's location.
public enum Fixtures {
    public static var directory: URL {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures")
    }

    public static func url(_ name: String) -> URL { directory.appendingPathComponent(name) }
}
