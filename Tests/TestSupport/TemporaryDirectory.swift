package import Foundation

/// Runs `body` with a fresh, empty directory named `PREFIX-UUID` in the temporary directory, removed
/// afterwards (whether `body` returns or throws). Each test gets its own, so tests can run in parallel.
package func withTemporaryDirectory<T>(prefix: String = "GroupDefaultsTests", _ body: (URL) throws -> T) rethrows -> T {
    let directory = makeTemporaryDirectory(prefix)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try body(directory)
}

/// The async twin of `withTemporaryDirectory`.
package func withTemporaryDirectory<T>(prefix: String = "GroupDefaultsTests", _ body: (URL) async throws -> T) async rethrows -> T {
    let directory = makeTemporaryDirectory(prefix)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory)
}

private func makeTemporaryDirectory(_ prefix: String) -> URL {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("\(prefix)-\(UUID().uuidString)", isDirectory: true)
    // A failure here would make every test of the run fail the same way; say why at once.
    do {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    } catch {
        fatalError("cannot create a temporary directory at \(directory.path): \(error)")
    }
    return directory
}
