import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaults
import GroupDefaultsWire

extension GroupDefaultsCommand {
    struct Info: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print facts about a suite: file, size, keys, map, last change, readers.",
            discussion: "Example: groupdefaults info group.com.example.chat"
        )

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name, or the path of a .lmdb file.") var suite: String

        func run() throws {
            try perform {
                let defaults = try options.open(suite)
                let info = try defaults.info()
                let sync = try defaults.syncState()
                let pending = try defaults.pendingCount()
                output(
                    """
                    path: \(info.path)
                    file size: \(info.fileSize) bytes
                    keys: \(info.keyCount)
                    map: \(info.usedBytes) of \(info.mapSize) bytes used (grows up to \(info.maximumMapSize))
                    last change: \(info.lastSequence)
                    readers: \(info.readers) of \(info.maximumReaders) slots
                    durability: \(Self.durability(info))
                    last restore: \(info.lastRestore.map(Self.restore) ?? "never")
                    origin: \(info.origin)
                    """
                )
                if let server = sync.server {
                    output(
                        """
                        sync server: \(server)
                        sync cursor: \(sync.cursor.map(String.init) ?? "none (the next sync reads the server's snapshot)")
                        sync pending: \(pending) change\(pending == 1 ? "" : "s")
                        sync local-only keys: \(sync.localOnlyKeys.isEmpty ? "none" : sync.localOnlyKeys.map(printable).joined(separator: " "))
                        sync conflicts kept: \(try defaults.conflicts().count)
                        """
                    )
                } else {
                    output("sync: off")
                }
            }
        }

        static func durability(_ info: SharedDefaults.Info) -> String {
            if info.durability == .fsyncEveryCommit { return "fsync every commit" }
            let interval = info.durabilityInterval
            let seconds = Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18
            let shown = seconds == seconds.rounded() ? "\(Int(seconds))" : "\(seconds)"
            return "process-crash safe; this handle's writes power-cut safe \(shown) s after they return (at most)"
        }

        static func restore(_ restore: SharedDefaults.Restore) -> String {
            let format = ISO8601DateFormatter()
            return "\(format.string(from: restore.restoredAt)), to the durability point of \(format.string(from: restore.pointTime)) "
                + "(after an operating-system crash or power loss; changes after that point were lost)"
        }
    }
}
