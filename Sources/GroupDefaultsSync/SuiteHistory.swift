import GroupDefaults
public import GroupDefaultsWire
import Logging

/// The versions of each key the server keeps (its last `--history` writes), seen from a device
/// (`SyncEngine.history`): an encrypted suite's are opened here with the engine's keys.
public struct SuiteHistory: Sendable {
    /// The engine of the suite.
    public let engine: SyncEngine

    private var client: SyncClient { engine.client }
    private var logger: Logger { engine.logger }

    /// The versions of `key` the server keeps (its last `--history` writes, the current one
    /// included), newest first.
    ///
    /// - Throws: `SyncError` with kind `.rejected` and code `not_found` when the server keeps no
    ///   version of the key (never written, purged, or the server keeps no history); otherwise as
    ///   every request (`.authenticationNeeded`, `.unavailable`, …).
    ///
    /// In an encrypted suite the server keeps sealed versions under the key's id: each is opened
    /// here (older key epochs too); one that does not open is left out and logged.
    public func versions(of key: String) async throws(SyncError) -> KeyHistory {
        let sealer = await engine.keyring.sealer
        let history: KeyHistory
        do throws(SyncError) {
            history = try await client.history(key: sealer?.keys.keyID(for: key) ?? key)
        } catch {
            guard error.code == .notFound else { throw error }
            throw SyncError(.rejected, code: .notFound, error.detail, key: key, status: error.status)
        }
        guard let sealer else { return history }
        var versions: [KeyVersion] = []
        for version in history.versions {
            do throws(EntrySealer.Refusal) {
                versions.append(KeyVersion(entry: try sealer.open(version.entry), received: version.received))
            } catch {
                logger.error(
                    "left out a version of the key's history that does not check out",
                    metadata: [
                        "suite": "\(client.suite)", "key": "\(key)", "rev": "\(version.entry.rev ?? 0)", "reason": "\(error)",
                    ]
                )
            }
        }
        return KeyHistory(key: key, versions: versions)
    }

    /// Writes the server's version `revision` of `key` back as a new local change (a deletion
    /// removes the key), which then syncs and wins as the newest write.
    ///
    /// ```swift
    /// let history = try await engine.history.versions(of: "sound")
    /// try await engine.history.restore("sound", revision: history.versions[1].entry.rev!)
    /// ```
    /// - Returns: The version restored.
    /// - Throws: `SyncError` `.rejected` with code `not_found` if the server keeps no such version of
    ///   `key`, or does not serve its value (`SyncEntry.unavailable`), and nothing changes; `SharedDefaultsError` if the write fails.
    @discardableResult
    public func restore(_ key: String, revision: UInt64) async throws -> KeyVersion {
        let history = try await versions(of: key)
        guard let version = history.versions.first(where: { $0.entry.rev == revision }) else {
            let kept = history.versions.compactMap(\.entry.rev).map(String.init).joined(separator: ", ")
            throw SyncError(
                .rejected,
                code: .notFound,
                "the server keeps no revision \(revision) of '\(key)' (it keeps \(kept)); nothing was changed",
                key: key
            )
        }
        if let unavailable = version.entry.unavailable {
            throw SyncError(
                .rejected,
                code: .notFound,
                "the server does not serve revision \(revision) of '\(key)' (its value is \(unavailable.words)); nothing was changed",
                key: key
            )
        }
        try await engine.defaults.write { tx in
            if let value = version.entry.value { try tx.set(value, forKey: key) } else { try tx.removeValue(forKey: key) }
        }
        return version
    }
}

extension SyncEngine {
    /// The versions of each key the server keeps, and putting one back.
    public nonisolated var history: SuiteHistory { SuiteHistory(engine: self) }
}
