public import GroupDefaults

// The server's key history and device list, seen from a device.
extension SyncEngine {
    /// The versions of `key` the server keeps (its last `--history` writes, the current one
    /// included), newest first.
    ///
    /// - Throws: `SyncError` with kind `.rejected` and code `not_found` when the server keeps no
    ///   version of the key (never written, purged, or the server keeps no history); otherwise as
    ///   every request (`.authenticationNeeded`, `.unavailable`, …).
    public func history(forKey key: String) async throws(SyncError) -> KeyHistory {
        do throws(SyncError) {
            return try await client.history(key: key)
        } catch {
            guard error.code == .notFound else { throw error }
            throw SyncError(.rejected, code: .notFound, error.detail, key: key, status: error.status)
        }
    }

    /// Writes the server's version `revision` of `key` back as a new local change (a deletion
    /// removes the key), which then syncs and wins as the newest write.
    ///
    /// ```swift
    /// let history = try await engine.history(forKey: "sound")
    /// try await engine.restore("sound", revision: history.versions[1].entry.rev!)
    /// ```
    /// - Returns: The version restored.
    /// - Throws: `SyncError` `.rejected` with code `not_found` if the server keeps no such version of
    ///   `key`, and nothing changes; `SharedDefaultsError` if the write fails.
    @discardableResult
    public func restore(_ key: String, revision: UInt64) async throws -> KeyVersion {
        let history = try await history(forKey: key)
        guard let version = history.versions.first(where: { $0.entry.rev == revision }) else {
            let kept = history.versions.compactMap(\.entry.rev).map(String.init).joined(separator: ", ")
            throw SyncError(.rejected, code: .notFound,
                            "the server keeps no revision \(revision) of '\(key)' (it keeps \(kept)); nothing was changed", key: key)
        }
        try await defaults.write { tx in
            if let value = version.entry.value { try tx.set(value, forKey: key) } else { try tx.removeValue(forKey: key) }
        }
        return version
    }

    /// The account's devices as the server saw them; this one is marked `current`.
    ///
    /// - Throws: `SyncError`, as every request.
    public func devices() async throws(SyncError) -> [DeviceInfo] {
        try await client.devices().devices
    }
}
