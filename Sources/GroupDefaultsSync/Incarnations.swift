import GroupDefaults
import Logging

// What the server's and the account's incarnations mean to the suite: the ones it remembers are in
// its sync state; the client holds the latest answer's (`SyncClient`).

extension ServerIncarnation {
    /// The server's incarnation if it differs from `known`, the one the suite last synced with: the
    /// server was restored from a backup. Nil when it is the same, or either is unknown.
    func restored(since known: String?) -> String? {
        guard let known, let current, current != known else { return nil }
        return current
    }

    /// Records the server's incarnation in `defaults` when the suite knows none yet (`known` is
    /// nil: its first sync, or a suite synced before servers named one).
    func recordIfNew(known: String?, in defaults: SharedDefaults) throws(SyncError) {
        guard known == nil, let current else { return }
        do { try defaults.setServerIncarnation(current) } catch { throw SyncError.local(error) }
    }
}

extension AccountIncarnation {
    /// Records the owner account's incarnation the server named, if the suite remembers none yet
    /// (trust on first use: its first sync, or a suite synced before servers named one). From then
    /// on an answer about another account of that name is refused.
    func rememberLatest(in defaults: SharedDefaults, logger: Logger) {
        guard known == nil, let latest else { return }
        do { know(try defaults.setAccountIncarnationIfNew(latest)) } catch {
            logger.warning("could not record the account's incarnation in the suite", metadata: ["error": "\(error)"])
        }
    }

    /// Takes the incarnation the suite remembers now: at the start, and after the suite was set
    /// up again (`configure`, starting over after its account was deleted: none then).
    func reload(from defaults: SharedDefaults) {
        know((try? defaults.syncState())?.accountIncarnation)
    }
}
