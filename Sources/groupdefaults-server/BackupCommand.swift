import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaultsServer

/// `groupdefaults-server backup --to PATH`: a copy of the embedded store, taken while servers run.
struct BackupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Copy the embedded store to a new file, consistent and compacted, while servers go on serving.",
        discussion: """
            The copy is one snapshot of the whole store, written under a temporary name beside PATH, \
            flushed to disk and then linked in, mode 0600; it never replaces a file. With PostgreSQL, \
            back up with pg_dump instead (the README's recipe). Restore it with `restore --from PATH` \
            while no server runs.

            Example: groupdefaults-server backup --to /var/backups/groupdefaults-server-2026-11-27 --data-dir /var/lib/groupdefaults-server
            """
    )

    @OptionGroup var storage: StorageOptions
    @Option(help: ArgumentHelp("The backup's path: a file that does not exist yet.", valueName: "PATH")) var to: String

    func run() async throws {
        try await reportingFailure {
            guard case .embedded = try StorageOptions.configuration(try storage.settings()) else {
                throw CommandFailure(postgresHint("back it up", "pg_dump --format=custom --file PATH \"$URL\""))
            }
            let store = try await storage.openStorage()
            guard let embedded = store as? LMDBSyncStorage else { throw CommandFailure("the store is not the embedded one") }
            let bytes: Int
            do {
                bytes = try await LMDBBackup.write(embedded, to: to)
                try await store.appendAudit(.commandLine(.backup, target: "file \(to)"))
                try await store.shutdown()
            } catch {
                try? await store.shutdown()
                throw error
            }
            output("backed up to \(to) (\(bytes) bytes); restore it with `groupdefaults-server restore --from \(to)`")
        }
    }
}

/// `groupdefaults-server restore --from PATH`, or `restore --announce` after a restore by other means.
struct RestoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Put a backup of the embedded store in place, or announce a restore made otherwise.",
        discussion: """
            --from PATH checks that PATH is a whole backup made by `backup` (its length, its digest, \
            LMDB's page structure), refuses while a server or another command uses the store, and \
            replaces the store with it in one rename, with a new incarnation: each device sees the \
            server went back, uploads every value and deletion it holds, each with its stamp, and \
            reads the suite again, so no device's write is lost. The tokens (revoked ones too), the \
            console's operators and the audit log stay as they are in the store it replaces, and \
            accounts deleted since the backup are deleted again (a missing or unreadable store: the \
            backup's, and the output says so). --announce gives the storage a new \
            incarnation alone: the last step after restoring PostgreSQL with pg_restore (or after \
            putting the embedded store back by other means), before the servers start again.

            Example: groupdefaults-server restore --from /var/backups/groupdefaults-server-2026-11-27 --data-dir /var/lib/groupdefaults-server
            """
    )

    @OptionGroup var storage: StorageOptions
    @Option(help: ArgumentHelp("The backup to put in place (made by `backup`).", valueName: "PATH")) var from: String?
    @Flag(help: "Only give the storage a new incarnation, after a restore made otherwise (pg_restore).") var announce = false

    func validate() throws {
        if (from == nil) == !announce { throw ValidationError("give either --from PATH or --announce") }
    }

    func run() async throws {
        try await reportingFailure {
            let configuration = try StorageOptions.configuration(try storage.settings())
            if announce {
                let incarnation =
                    if case .embedded(let directory) = configuration {
                        try await LMDBBackup.announce(in: directory)
                    } else {
                        try await storage.withStorage { store in try await store.renewIncarnation() }
                    }
                try await storage.withStorage { store in
                    try await store.appendAudit(.commandLine(.restore, target: "announced; incarnation \(incarnation)"))
                }
                output("new incarnation \(incarnation): devices upload what they hold at their next sync")
                return
            }
            guard case .embedded(let directory) = configuration, let from else {
                throw CommandFailure(
                    postgresHint(
                        "restore it",
                        "pg_restore --clean --if-exists --single-transaction --dbname \"$URL\" PATH, then `restore --announce`"
                    )
                )
            }
            let restored = try await LMDBBackup.restore(from: from, into: directory)
            let incarnation = restored.incarnation
            let kept: String
            if let why = restored.whyNotKept {
                kept = "tokens, operators and the audit log are the backup's: \(why)"
            } else {
                let accounts = restored.deletedAgain == 1 ? "1 deleted account" : "\(restored.deletedAgain) deleted accounts"
                kept = "tokens, operators and the audit log kept as they were; \(accounts) deleted again"
            }
            try await storage.withStorage { store in
                try await store.appendAudit(.commandLine(.restore, target: "file \(from); incarnation \(incarnation); \(kept)"))
            }
            output("restored \(directory) from \(from); new incarnation \(incarnation): devices upload what they hold at their next sync")
            output(kept)
        }
    }
}

/// What to do instead of `backup` or `restore --from` on PostgreSQL.
private func postgresHint(_ verb: String, _ recipe: String) -> String {
    "the store is PostgreSQL: \(verb) with PostgreSQL's tools (\(recipe); the README's \"Backups and restore\" recipe)"
}
