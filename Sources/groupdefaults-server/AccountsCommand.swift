import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaultsServer
import GroupDefaultsWire

/// `groupdefaults-server accounts list|export|delete`, on the same storage a running server uses.
struct AccountsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accounts",
        abstract: "List accounts, export one's data as JSON, or delete one.",
        discussion: """
            An account is the name tokens are made for (`token create --account`): its suites, \
            history, key bags, devices, tokens and pairings are stored under it.

            Example: groupdefaults-server accounts list --config /etc/groupdefaults-server.conf
            """,
        subcommands: [List.self, Export.self, Delete.self]
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List accounts: name, suites, tokens (active of all), devices, last activity.",
            discussion: "Example: groupdefaults-server accounts list --data-dir /var/lib/groupdefaults-server"
        )

        @OptionGroup var storage: StorageOptions
        @Flag(help: "Print one JSON array.") var json = false

        func run() async throws {
            try await reportingFailure {
                let (accounts, erasePending) = try await storage.withStorage { store in
                    // Opening the store alone finished any erase a delete left; one still pending
                    // waits for the process that has the store open (a server) to stop.
                    (try await store.accountSummaries(), (store as? LMDBSyncStorage).map { LMDBErase.isPending(in: $0.directory) } ?? false)
                }
                if json {
                    let encoder = JSONEncoder()
                    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                    encoder.dateEncodingStrategy = .iso8601
                    encoder.keyEncodingStrategy = .convertToSnakeCase  // as the API and the export name fields
                    return output(String(decoding: try encoder.encode(accounts), as: UTF8.self))
                }
                for note in NewNames.lookAlikeNotes(accounts.map(\.account), kind: .account) {
                    writeAll(Data("warning: \(note)\n".utf8), to: STDERR_FILENO)
                }
                if erasePending {
                    writeAll(
                        Data(
                            ("note: a deleted account's bytes are still in the store's file, because another process (a server) has it open: "
                                + "they are erased when the store is next opened alone (stop the server, then run any command of this tool)\n").utf8
                        ),
                        to: STDERR_FILENO
                    )
                }
                if accounts.isEmpty { return output("no accounts") }
                let dates = ISO8601DateFormatter()
                for account in accounts {
                    output(
                        [
                            printable(account.account),
                            account.suites.isEmpty ? "no suites" : account.suites.map(printable).joined(separator: ","),
                            "tokens \(account.activeTokens)/\(account.tokens) active",
                            "devices \(account.devices)",
                            account.lastActivity.map { "last activity " + dates.string(from: $0) } ?? "no activity",
                        ].joined(separator: "\t")
                    )
                }
            }
        }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print an account's data as one JSON document.",
            discussion: """
                The document holds its suites (entries, tombstones, history, key bags; sealed \
                entries as stored), devices and tokens (never a token's secret). With --to it is \
                written to a new file, mode 0600; a path that exists is refused. Its schema is \
                docs/account-export.md (docs/guide/operating.md, "Accounts: listing, export, deletion, and the audit log").

                Example: groupdefaults-server accounts export ana --to ana.json --data-dir /var/lib/groupdefaults-server
                """
        )

        @OptionGroup var storage: StorageOptions
        @Argument(help: "The account.") var account: String
        @Option(help: ArgumentHelp("Write to this new file instead of stdout.", valueName: "FILE")) var to: String?

        func run() async throws {
            try await reportingFailure {
                if let to, FileManager.default.fileExists(atPath: to) { throw CommandFailure("cannot create \(to): it exists (give a new path)") }
                try await storage.withStorage { store in
                    guard try await store.accountSummaries().contains(where: { $0.account.isSameName(as: account) }) else {
                        throw CommandFailure("no account is named \(NewNames.shown(account)) (see `groupdefaults-server accounts list`)")
                    }
                    let document = try await AccountExport.read(account: account, from: store).json() + Data("\n".utf8)
                    if let to { try NewPrivateFile.create(document, at: to) } else { writeAll(document, to: STDOUT_FILENO) }
                    // Recorded once written: an export that failed gave nothing away.
                    try await store.appendAudit(.commandLine(.accountExport, account: account, target: to.map { "file \($0)" } ?? "stdout"))
                }
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete an account and everything stored under it; its tokens stop working at once.",
            discussion: """
                Deletes its suites (entries, tombstones, history), key bags, devices, tokens and \
                pairings in one transaction; a running server ends the streams of its tokens. On \
                the embedded store their bytes are then erased from the file (the store rebuilt) \
                if nothing else has it open, else when the store is next opened alone (a server's \
                start, any command). Asks on a terminal; elsewhere --yes is needed.

                Example: groupdefaults-server accounts delete ana --yes --data-dir /var/lib/groupdefaults-server
                """
        )

        @OptionGroup var storage: StorageOptions
        @Argument(help: "The account.") var account: String
        @Flag(help: "Do not ask.") var yes = false

        // Its steps, each safe to interrupt (`InterruptionPoint`, `accounts-delete.*`): the delete
        // is one transaction with its audit record; the embedded store's erase is left pending
        // before it (`LMDBErase`), and whoever opens the store alone next (this command run again,
        // `accounts list`, a server's start) finishes it. Run again after an interruption, the
        // command deletes what is left, or says that the account is deleted and finishes the erase.
        func run() async throws {
            try await reportingFailure {
                let unknown = CommandFailure("no account is named \(NewNames.shown(account)) (see `groupdefaults-server accounts list`)")
                // An unknown account is said before anything is asked; one this command deleted
                // (a run that was interrupted once its transaction committed) is done.
                let (known, deletedAt) = try await storage.withStorage { store in
                    let known = try await store.accountSummaries().contains { $0.account.isSameName(as: account) }
                    let deleted = known ? nil : try await Self.lastDeletion(of: account, in: store)
                    return (known, deleted)
                }
                guard known else {
                    guard let deletedAt else { throw unknown }
                    return output("account \(printable(account)) is already deleted (at \(ISO8601DateFormatter().string(from: deletedAt)))")
                }
                if !yes {
                    guard isatty(STDIN_FILENO) == 1 else {
                        throw CommandFailure("deleting account \(account) cannot be undone: give --yes to delete it")
                    }
                    writeAll(Data("delete account \(printable(account)) and all its data? type its name to confirm: ".utf8), to: STDERR_FILENO)
                    guard readLine(strippingNewline: true).isSameName(as: account) else { throw CommandFailure("not deleted") }
                }
                InterruptionPoint.reached("accounts-delete.confirmed")
                let directory = try await storage.withStorage { store in
                    guard try await store.deleteAccount(account, audit: .commandLine(.accountDelete, account: account)) else { throw unknown }
                    return (store as? LMDBSyncStorage)?.directory
                }
                InterruptionPoint.reached("accounts-delete.deleted")
                // The embedded store: its file keeps the rows' bytes until it is rebuilt (LMDBErase).
                guard let directory else { return output("deleted account \(printable(account))") }
                switch LMDBErase.eraseIfPending(in: directory) {
                case .othersUseTheStore:
                    output(
                        "deleted account \(printable(account)); a server or another command has the store open: "
                            + "its bytes leave the store's file when the store is next opened alone"
                    )
                case .failed(let reason):
                    throw CommandFailure("deleted account \(account), but its bytes are still in the store's file: \(reason)")
                case .erased, .nothingPending:
                    output("deleted account \(printable(account)); its bytes are erased from the store")
                }
            }
        }

        /// When the audit log last recorded the account's deletion, if it did (within its days).
        static func lastDeletion(of account: String, in store: any AuditStore) async throws -> Date? {
            try await store.auditRecords(account: account, since: nil, limit: 1000).last { $0.act == .accountDelete }?.time
        }
    }
}
