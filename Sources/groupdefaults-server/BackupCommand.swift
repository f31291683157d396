import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaultsServer
import SystemCalls

/// `groupdefaults-server backup --to PATH`: a copy of the embedded store, taken while servers run.
struct BackupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Copy the embedded store to a new file, consistent and compacted, while servers go on serving.",
        discussion: """
            The copy is one snapshot of the whole store, written under a temporary name beside PATH, \
            flushed to disk and then linked in, mode 0600; it never replaces a file. With PostgreSQL, \
            back up with pg_dump instead (the recipe in docs/guide/operating.md, "Backups and restore"). Restore it with `restore --from PATH` \
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
            let written: LMDBBackup.Written
            var madeBefore = false
            do {
                written = try await LMDBBackup.write(embedded, to: to)
                if written.newKey != nil {
                    madeBefore = try await store.auditRecords(account: nil, since: nil, limit: .max).contains { $0.act == .backup }
                }
                try await store.appendAudit(.commandLine(.backup, target: "file \(to)"))
                try await store.shutdown()
            } catch {
                try? await store.shutdown()
                throw error
            }
            // The hint names this store as the command did (`outputHint`): pasted as is, it restores here.
            groupdefaultsServer.outputHint(
                "backed up to \(to) (\(written.bytes) bytes); restore it with `groupdefaults-server restore --from \(shellWord(to))`"
            )
            if let key = written.newKey {
                if madeBefore {
                    printError(
                        "warning: \(BackupKey.path(in: embedded.directory)) was missing although backups were made before: a new backup key was made; restoring an earlier backup needs the key shown at its time (--backup-key-file)",
                        tool: "groupdefaults-server"
                    )
                }
                output("backup key: \(key.text)")
                output(
                    "Every backup of this server is authenticated with this key, kept in \(BackupKey.path(in: embedded.directory)). It is shown only this once: keep it apart from the backups (a restore onto a new machine needs it: --backup-key-file)."
                )
            }
        }
    }
}

/// `groupdefaults-server restore --from PATH`, or `restore --announce` after a restore by other means.
struct RestoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Put a backup of the embedded store in place, or announce a restore made otherwise.",
        discussion: """
            --from PATH checks that PATH is a whole backup made by `backup` (its length, its MAC under \
            the server's backup key, LMDB's page structure), refuses while a server or another command uses the store, and \
            replaces the store with it in one rename, with a new incarnation: each device sees the \
            server went back, uploads every value and deletion it holds, each with its stamp, and \
            reads the suite again, so no device's write is lost. The data (suites, entries, history) is \
            the backup's; the authority (accounts, tokens, members and their roles, invitations, key \
            bags, pairings, devices, the console's operators, the audit log) stays as it is in the \
            store it replaces, and accounts deleted since the backup are deleted again (a missing or \
            unreadable store: the backup's, and the output says so). On PostgreSQL: --prepare keeps \
            the present's authority apart before pg_restore and prints its id, and --announce --kept \
            ID puts it back and gives the storage a new incarnation, before the servers start again \
            (--announce alone also follows an embedded store put back by other means; \
            --discard-kept drops a copy --prepare made).

            Example: groupdefaults-server restore --from /var/backups/groupdefaults-server-2026-11-27 --data-dir /var/lib/groupdefaults-server
            """
    )

    @OptionGroup var storage: StorageOptions
    @Option(help: ArgumentHelp("The backup to put in place (made by `backup`).", valueName: "PATH")) var from: String?
    @Flag(help: "Only give the storage a new incarnation, after a restore made otherwise (pg_restore).") var announce = false
    @Option(
        help: ArgumentHelp(
            "A file holding the backup key shown at the server's first backup (a restore onto a new machine, or of another server's backup).",
            valueName: "FILE"
        )
    )
    var backupKeyFile: String?
    @Flag(help: "Restore a backup made by an older version, without a backup key: nothing tells it from a modified one.")
    var allowUnauthenticated = false
    @Flag(help: "PostgreSQL, before pg_restore: keep the present's accounts, tokens, members and other authority apart, for --announce to put back.")
    var prepare = false
    @Option(help: ArgumentHelp("With --announce on PostgreSQL: the id of the authority --prepare kept apart (it printed it).", valueName: "ID"))
    var kept: String?
    @Flag(help: "PostgreSQL: drop the authority --prepare kept apart (the restored dump's stays).") var discardKept = false

    func validate() throws {
        if [from != nil, announce, prepare, discardKept].filter({ $0 }).count != 1 {
            throw ValidationError("give one of --from PATH, --prepare, --announce or --discard-kept")
        }
        if kept != nil, !announce { throw ValidationError("--kept ID goes with --announce") }
    }

    func run() async throws {
        try await reportingFailure {
            let configuration = try StorageOptions.configuration(try storage.settings())
            if prepare {
                guard case .postgres = configuration else {
                    throw CommandFailure(
                        "--prepare is a step of PostgreSQL's recipe: the embedded store's `groupdefaults-server restore --from PATH` keeps the present's authority by itself"
                    )
                }
                let kept = try await storage.withStorage { store in
                    guard let postgres = store as? PostgresSyncStorage else { throw CommandFailure("the store is not PostgreSQL") }
                    // Recorded first, so that the kept audit log holds it too.
                    try await store.appendAudit(.commandLine(.restore, target: "prepared: the authority kept apart for --announce"))
                    return try await postgres.keepAuthority()
                }
                output(
                    "kept \(kept.rows) rows of accounts, tokens, members, invitations, pinned keys, key bags, devices, operators and the audit log apart (schema \(PostgresSyncStorage.keptAuthoritySchema)), id \(kept.id)"
                )
                groupdefaultsServer.outputHint(
                    "now pg_restore the dump, then `groupdefaults-server restore --announce --kept \(kept.id)`; servers do not start until then"
                )
                return
            }
            if discardKept {
                let dropped = try await storage.withStorage { store in
                    guard let postgres = store as? PostgresSyncStorage else {
                        throw CommandFailure("--discard-kept is a step of PostgreSQL's recipe; the embedded store keeps nothing apart")
                    }
                    return try await postgres.discardKeptAuthority()
                }
                output(dropped ? "dropped the authority kept apart: the database's own stays" : "no authority was kept apart; nothing was changed")
                return
            }
            if announce {
                var keptLine: String?
                let incarnation: String
                if case .embedded(let directory) = configuration {
                    incarnation = try await LMDBBackup.announce(in: directory)
                } else {
                    (keptLine, incarnation) = try await storage.withStorage { store in
                        guard let postgres = store as? PostgresSyncStorage else { throw CommandFailure("the store is not PostgreSQL") }
                        let line = try await postgres.putBackKeptAuthority(id: self.kept).map { deletedAgain in
                            let accounts = deletedAgain == 1 ? "1 deleted account" : "\(deletedAgain) deleted accounts"
                            return
                                "accounts, tokens, members, invitations, pinned keys, key bags, devices, operators and the audit log kept as they were before pg_restore; \(accounts) deleted again"
                        }
                        return (
                            line
                                ?? "no authority was kept apart (`groupdefaults-server restore --prepare` before pg_restore): accounts, tokens, members, invitations and the audit log are the dump's",
                            try await store.renewIncarnation()
                        )
                    }
                }
                try await storage.withStorage { store in
                    try await store.appendAudit(
                        .commandLine(.restore, target: "announced; incarnation \(incarnation)\(keptLine.map { "; \($0)" } ?? "")")
                    )
                }
                output("new incarnation \(incarnation): devices upload what they hold at their next sync")
                if let keptLine { groupdefaultsServer.outputHint(keptLine) }
                return
            }
            guard case .embedded(let directory) = configuration, let from else {
                throw CommandFailure(
                    postgresHint(
                        "restore it",
                        "pg_restore --clean --if-exists --single-transaction --dbname \"$URL\" PATH, then `groupdefaults-server restore --announce`"
                    )
                )
            }
            let key = try backupKeyFile.map(Self.readKey)
            let restored: RestoreOutcome
            do {
                restored = try await interruptible { [allowUnauthenticated] in
                    try await LMDBBackup.restore(from: from, into: directory, backupKey: key, allowUnauthenticated: allowUnauthenticated)
                }
            } catch let interrupted as Interrupted {
                throw interrupted.failure(
                    "the store is whole: as it was, or restored if the restore had reached its last step; run the same command again to be sure"
                )
            }
            let incarnation = restored.incarnation
            let kept: String
            if let why = restored.whyNotKept {
                kept = "accounts, tokens, members, invitations, pinned keys, key bags, devices, operators and the audit log are the backup's: \(why)"
            } else {
                let accounts = restored.deletedAgain == 1 ? "1 deleted account" : "\(restored.deletedAgain) deleted accounts"
                kept =
                    "accounts, tokens, members, invitations, pinned keys, key bags, devices, operators and the audit log kept as they were; \(accounts) deleted again"
            }
            try await storage.withStorage { store in
                try await store.appendAudit(.commandLine(.restore, target: "file \(from); incarnation \(incarnation); \(kept)"))
            }
            output("restored \(directory) from \(from); new incarnation \(incarnation): devices upload what they hold at their next sync")
            output(kept)
        }
    }
}

extension RestoreCommand {
    /// The backup key in `file`, which must be the owner's alone (it authenticates every backup).
    static func readKey(_ file: String) throws -> BackupKey {
        var status = stat()
        guard stat(file, &status) == 0 else {
            throw CommandFailure("cannot read the backup key file \(file): \(String(cString: strerror(errno)).lowercased()); nothing was changed")
        }
        if let exposure = PrivateFileRule.exposure(of: file, mode: status.st_mode, what: "the backup key file") {
            throw CommandFailure("\(exposure), then run this again: a backup key is a secret; nothing was changed")
        }
        guard let data = FileManager.default.contents(atPath: file) else {
            throw CommandFailure("cannot read the backup key file \(file): permission denied; nothing was changed")
        }
        guard let key = BackupKey(text: String(decoding: data, as: UTF8.self)) else {
            throw CommandFailure("\(file) does not hold a backup key (gdbk1- and 64 hex digits, as the first backup showed it); nothing was changed")
        }
        return key
    }
}

/// What to do instead of `backup` or `restore --from` on PostgreSQL.
private func postgresHint(_ verb: String, _ recipe: String) -> String {
    "the store is PostgreSQL: \(verb) with PostgreSQL's tools (\(recipe); the recipe in docs/guide/operating.md, \"Backups and restore\")"
}
