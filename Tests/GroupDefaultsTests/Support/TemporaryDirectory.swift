import Foundation

/// Runs `body` with a fresh, empty directory that is removed afterwards (whether `body` returns or
/// throws). Each test gets its own, so tests can run in parallel.
func withTemporaryDirectory<T>(_ body: (URL) throws -> T) rethrows -> T {
    let directory = makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    return try body(directory)
}

/// The async twin of `withTemporaryDirectory`.
func withTemporaryDirectory<T>(_ body: (URL) async throws -> T) async rethrows -> T {
    let directory = makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory)
}

private func makeTemporaryDirectory() -> URL {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("GroupDefaultsTests-\(UUID().uuidString)", isDirectory: true)
    // A failure here would make every test of the run fail the same way; say why at once.
    do {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    } catch {
        fatalError("cannot create a temporary directory at \(directory.path): \(error)")
    }
    return directory
}
