import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import Logging

/// `groupdefaults-server token create|list|revoke`, on the same storage a running server uses.
struct TokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Create, list and revoke bearer tokens.",
        discussion: "Example: groupdefaults-server token list --config /etc/groupdefaults-server.conf",
        subcommands: [Create.self, List.self, Revoke.self]
    )

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a token and print it (the only time it is shown).",
            discussion: """
                The token is stdout's only line, for a file (`> phone.token`); its id, which \
                `token revoke` takes, is said on stderr. The store must exist (`serve` makes it) \
                unless --create is given.

                Example: groupdefaults-server token create --config /etc/groupdefaults-server.conf --account ana --suites 'group.com.example.*' > phone.token
                """
        )

        @OptionGroup var storage: StorageOptions
        @Option(help: "The account whose suites the token reaches.") var account: String
        @Option(help: "Suite patterns, comma-separated; '*' matches any run of characters.") var suites = "*"
        @Flag(name: .customLong("read-only"), help: "Refuse pushes.") var readOnly = false
        @Option(help: "How long the token lasts: 30d, 12h, 15m or 45s.") var expires: String?
        @Option(help: "Bind the token to one device, named so in `devices list`.") var device: String?
        @Flag(help: "Create the store if there is none yet (else a data directory without one is refused).") var create = false

        func run() async throws {
            try await reportingFailure {
                if let device, let problem = NameKind.device.problem(with: device) { throw CommandFailure(problem) }
                let patterns = suites.split(separator: ",").map { String($0.trimmingCharacters(in: .whitespaces)) }.filter { !$0.isEmpty }
                guard !patterns.isEmpty else { throw CommandFailure("--suites needs at least one pattern") }
                let now = Date()
                let expiry = try expires.map { now.addingTimeInterval(try TokenDuration.seconds($0)) }
                // A store this command would make holds no account: a name refused as a new one is
                // refused before the store is made, so that the refusal leaves nothing behind.
                if create, try storage.wouldCreateStore(), let problem = Username.problem(withNew: account, kind: .account) {
                    throw CommandFailure(problem)
                }
                let made = try await storage.withStorage(creating: create) { store in
                    let existing = try await store.accountSummaries().map(\.account)
                    let named: (name: String, isNew: Bool)
                    do { named = try NewNames.resolve(account, kind: .account, existing: existing) } catch { throw CommandFailure("\(error)") }
                    let made = Tokens.make(
                        account: named.name,
                        suitePatterns: patterns,
                        readOnly: readOnly,
                        device: device,
                        expires: expiry,
                        now: now
                    )
                    try await store.createToken(made.stored)
                    try await store.appendAudit(.commandLine(.tokenCreate, account: named.name, target: "token \(made.stored.id)"))
                    return (made, named)
                }
                output(made.0.token)
                let stored =
                    made.1.name.isSameName(as: account)
                    ? "" : " (given as \(NewNames.shown(account)), kept in its usual form \(NewNames.shown(made.1.name)))"
                // The hint names this store as the command did (`pasteable`): pasted as is, it revokes here.
                let line = groupdefaultsServer.pasteable(
                    "token \(made.0.stored.id) for account \(printable(made.1.name))\(stored) (revoke it with `groupdefaults-server token revoke \(made.0.stored.id)`)"
                )
                writeAll(Data((line + "\n").utf8), to: STDERR_FILENO)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List tokens: id, account, scopes, created, expires, revoked, device.",
            discussion: "Example: groupdefaults-server token list --data-dir /var/lib/groupdefaults-server"
        )

        @OptionGroup var storage: StorageOptions

        func run() async throws {
            try await reportingFailure {
                let store = try await storage.openStorage()
                let tokens = try await store.tokens()
                try await store.shutdown()
                let dates = ISO8601DateFormatter()
                for token in tokens {
                    let scopes = token.suitePatterns.map(printable).joined(separator: ",") + (token.readOnly ? " read-only" : " read-write")
                    print(
                        [
                            printable(token.id), printable(token.account), scopes, dates.string(from: token.created),
                            token.expires.map { "expires " + dates.string(from: $0) } ?? "never-expires",
                            token.revoked.map { "revoked " + dates.string(from: $0) } ?? "active",
                            token.device.map { "device " + printable($0) } ?? "any-device",
                        ].joined(separator: "\t")
                    )
                }
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a token by its id; it stops working on its next request.",
            discussion: "Example: groupdefaults-server token revoke tok_7654a67ba78a --data-dir /var/lib/groupdefaults-server"
        )

        @OptionGroup var storage: StorageOptions
        @Argument(help: "The token's id (from `token list`).") var id: String

        func run() async throws {
            try await reportingFailure {
                let store = try await storage.openStorage()
                do {
                    let held = try await store.token(id: id)
                    // Revoking a revoked token changes nothing: it is said, and not audited.
                    if let held, let revoked = held.revoked {
                        output(
                            "token \(id) of account \(printable(held.account)) was revoked already (\(revoked.formatted(.iso8601))): nothing changed"
                        )
                    } else {
                        try await store.revokeToken(id: id, at: Date())
                        try await store.appendAudit(.commandLine(.tokenRevoke, account: held?.account, target: "token \(id)"))
                        output("revoked token \(id) of account \(printable(held?.account ?? "?")): its next request is refused")
                    }
                } catch {
                    try? await store.shutdown()
                    if let error = error as? SyncStorageError, error.code == .notFound { throw CommandFailure(error.detail) }
                    throw error
                }
                try await store.shutdown()
            }
        }
    }
}

/// Runs `body` as the server's commands report failures. Logs go to stderr, warnings and worse
/// only: a token command's stdout is its answer.
func reportingFailure(_ body: () async throws -> Void) async throws {
    LoggingSystem.bootstrap { label in PrintableLogHandler.standardError(label: label, level: .warning) }
    try await groupdefaultsServer.perform(body)
}

/// `30d`, `12h`, `15m`, `45s`.
enum TokenDuration {
    static func seconds(_ text: String) throws -> TimeInterval {
        guard let unit = text.last, let count = Double(text.dropLast()), count > 0, count.isFinite else {
            throw CommandFailure("a duration is a positive number and a unit: 30d, 12h, 15m or 45s")
        }
        switch unit {
        case "d": return count * 86_400
        case "h": return count * 3_600
        case "m": return count * 60
        case "s": return count
        default: throw CommandFailure("a duration's unit is d, h, m or s, not \(unit)")
        }
    }
}
