import GroupDefaultsWire
import Logging

// A value the server holds but does not serve (`SyncEntry.unavailable`), or one this device cannot
// take (nested more deeply than `PropertyListValue.maximumNestingDepth`, not typed JSON): that key
// alone is refused, kept in the conflict journal with why, and reported; this device keeps its own
// value of it, and the page, event or push answer it came with goes on.
extension SyncEngine {
    /// `entries` without those whose value this device cannot take, and those as refused. Called
    /// before entries are opened (an unavailable one has nothing to open) and after (a sealed
    /// value is seen only then).
    func withoutUnavailable(_ entries: [SyncEntry]) -> (entries: [SyncEntry], refused: [RefusedEntry]) {
        var taken: [SyncEntry] = []
        var refused: [RefusedEntry] = []
        taken.reserveCapacity(entries.count)
        for entry in entries {
            let reason: UnavailableValue? =
                if let unavailable = entry.unavailable {
                    unavailable
                } else if let value = entry.value, !value.fitsNestingLimit {
                    .tooDeep
                } else {
                    nil
                }
            guard let reason else {
                taken.append(entry)
                continue
            }
            // Before opening, an encrypted suite's key is only its id; after, its name.
            let name = sealer == nil || entry.unavailable == nil ? entry.key : nil
            refused.append(
                RefusedEntry(
                    keyID: name.flatMap { sealer?.keys.keyID(for: $0) } ?? entry.key,
                    key: name,
                    stamp: entry.stamp,
                    reason: "value unavailable (\(reason.words)); this device keeps its own"
                )
            )
        }
        if !refused.isEmpty {
            logger.error(
                "refused entries whose value this device cannot take",
                metadata: ["suite": "\(client.suite)", "count": "\(refused.count)", "first": "\(refused[0])"]
            )
        }
        return (taken, refused)
    }
}
