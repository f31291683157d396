/// Waiting for an effect that nothing announces (another process's write, a server's deferred
/// record).

/// Polls `condition` until it holds or `timeout` passes (for effects in other processes); whether
/// it held.
package func eventually(
    within timeout: Duration = .seconds(10),
    every interval: Duration = .milliseconds(25),
    _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try await condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: interval)
    }
}
