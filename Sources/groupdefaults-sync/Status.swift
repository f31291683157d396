import ArgumentParser
import AsyncHTTPClient
import CommandLineSupport
import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire

extension SyncCommand {
    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Print a suite's sync state: server, this device's name and id, token file, cursor, pending changes, and whether sync needs attention.",
            discussion: """
                The device's name is the one its token is bound to (`groupdefaults-server token \
                create --device NAME`), asked of the server (for at most 3 seconds); everything \
                else is read from the suite, offline, as the last sync engine to work on it (`run` \
                in another process, or the last `sync`) recorded it. `state` is ok, or what needs \
                attention: paused (the token was refused: sync waits for a new one), account \
                deleted (the account was deleted on the server: sync waits until the suite is \
                configured again, which starts over in the new account), offline (since \
                when, the last failed contact and the last success), clock behind (this device's \
                clock), failing, or changes set aside, entries refused (tampered, or stamped far \
                ahead) or keys left out, or a key rotation due (an encrypted suite's member that held \
                its keys was removed: the next sync on a device holding the owner key makes it, \
                asked of the server); --json gives the same as `state`, `state_detail`, \
                `state_since`, `last_success` and `last_failure`.

                Exit status: 0 when nothing needs attention (or the suite is not synced), 1 when \
                something does, 3 when sync is paused until the token is replaced or the suite is \
                configured again.

                Example: groupdefaults-sync status group.com.example.chat
                Example: groupdefaults-sync status group.com.example.chat --json
                """
        )

        @OptionGroup var options: SuiteOptions
        @OptionGroup var server: ServerOptions
        @Argument(help: "The suite name.") var suite: String
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            try await perform {
                let defaults = try options.open(suite)
                let state = try defaults.syncState()
                let (name, rotationDue) = state.isSynced ? await DeviceName.ask(defaults, server) : (.notSynced, nil)
                let pending = try defaults.pendingChanges().map(\.key)
                let journal = try defaults.conflicts()
                let refused = journal.filter(\.isRefused)
                let health = state.isSynced ? SyncHealth.stored(in: defaults) : nil
                // A key rotation the server marks due (this device holds the owner key) needs
                // attention too, unless something else already does.
                let due = health?.needsAttention == true ? nil : rotationDue.map { Self.rotationWords($0, suite: suite) }
                let settings = try? SyncSettings.stored(in: defaults)
                // A read member's local changes stay pending for good: said, and exit status 1.
                let keptLocal = settings?.shared?.role == .read && !pending.isEmpty
                let report = StatusReport(
                    suite: suite,
                    synced: state.isSynced,
                    server: state.server,
                    tokenFile: state.tokenFile,
                    caFile: state.caFile,
                    cursor: state.cursor,
                    pending: pending.count,
                    pendingKeys: Array(pending.prefix(20)),
                    inFlightBatch: state.inFlight?.id,
                    note: health.flatMap { $0.needsAttention ? $0.summary : nil },
                    deviceID: String(defaults.origin),
                    deviceName: name.name,
                    localOnlyKeys: state.localOnlyKeys,
                    ignored: state.ignoredCount,
                    conflicts: journal.count - refused.count,
                    keyFile: state.keyFile,
                    refused: refused.count,
                    state: state.isSynced ? (due != nil ? "rotation_due" : (health?.condition ?? .ok).rawValue) : nil,
                    stateDetail: due ?? health?.detail,
                    stateSince: health.flatMap { $0.since.timeIntervalSince1970 > 0 ? Self.time($0.since) : nil },
                    lastSuccess: health?.lastSuccess.map(Self.time),
                    lastFailure: health?.lastFailure.map(Self.time),
                    shared: settings?.shared.map { ["owner": $0.owner, "suite": $0.suite, "role": $0.role.rawValue] }
                )
                if json {
                    let encoder = JSONEncoder()
                    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                    output(String(decoding: try encoder.encode(report), as: UTF8.self))
                } else if let server = state.server {
                    var lines = [
                        "\(suite): syncs with \(server)", "device: \(name.describe(origin: defaults.origin))",
                        "token file: \(state.tokenFile ?? "none")",
                    ]
                    if let caFile = state.caFile { lines.append("certificate authority: \(caFile)") }
                    if let shared = settings?.shared {
                        lines.append("shared: \(printable(shared.owner))'s suite \(printable(shared.suite)), as \(shared.role.asMember)")
                    }
                    lines.append(
                        "encryption: " + (state.keyFile.map { "end to end (keys in \($0))" } ?? "none (the server can read keys and values)")
                    )
                    lines.append(
                        "cursor: "
                            + (state.cursor.map { $0 == 0 ? "0 (the next sync reads the snapshot)" : String($0) }
                                ?? "none (the next sync joins the server's suite)")
                    )
                    lines.append(
                        "pending: \(pending.count)"
                            + (pending.isEmpty
                                ? "" : " (\(report.pendingKeys.map(printable).joined(separator: ", "))\(pending.count > 20 ? ", …" : ""))")
                            + (keptLocal ? " kept on this device: a read member's changes are not sent" : "")
                    )
                    if let batch = state.inFlight { lines.append("in flight: batch \(batch.id) (sent again at the next push)") }
                    if !state.localOnlyKeys.isEmpty {
                        lines.append(
                            "local-only keys: \(state.localOnlyKeys.map(printable).joined(separator: " ")) (\(state.ignoredCount) pulled value\(state.ignoredCount == 1 ? "" : "s") not applied)"
                        )
                    }
                    if report.conflicts > 0 { lines.append("conflicts kept: \(report.conflicts) (see `groupdefaults-sync conflicts \(suite)`)") }
                    if !refused.isEmpty {
                        let keys = refused.prefix(20).map { printable($0.key) }.joined(separator: ", ") + (refused.count > 20 ? ", …" : "")
                        // The journal's record of what sync refused, kept for its days; whether something
                        // still needs attention is `state`.
                        lines.append("refused: \(refused.count) kept in the conflict journal (\(keys); see `groupdefaults-sync conflicts \(suite)`)")
                    }
                    lines += due.map { ["state: key rotation due: \(printable($0))"] } ?? Self.stateLines(health)
                    groupdefaultsSync.outputHint(lines.joined(separator: "\n"))
                } else {
                    output("\(suite): not synced")
                }
                if keptLocal, health?.needsAttention != true {
                    throw CommandFailure(
                        "\(pending.count) local change(s) of \(suite) stay on this device, not sent: this account is a read member of \(settings?.shared?.owner ?? "")'s suite \(settings?.shared?.suite ?? suite)"
                    )
                }
                if let due { throw CommandFailure("\(suite) needs attention: key rotation due: \(due)") }
                guard let health, health.needsAttention else { return }
                if health.condition == .notShared {
                    throw CommandFailure(
                        "\(suite) is no longer shared with this account: ask its owner for a new invitation and join again with `groupdefaults-sync configure --invitation CODE --server URL --token-file PATH --as \(suite)`",
                        status: 3
                    )
                }
                if health.condition == .accountDeleted {
                    throw CommandFailure(
                        "\(suite) is paused: the account it synced with was deleted on the server, and its name is now a new account's; this device keeps its data. "
                            + "To start over in the new account run `groupdefaults-sync configure \(suite) --server URL --token-file PATH` (what this device holds is uploaded there), "
                            + "or keep it on this device only with `groupdefaults-sync unconfigure \(suite)`",
                        status: 3
                    )
                }
                if health.needsToken {
                    throw CommandFailure(
                        "\(suite) is paused until its token is replaced: give it a new token with `groupdefaults-sync configure \(suite) --server URL --token-file PATH`",
                        status: 3
                    )
                }
                throw CommandFailure("\(suite) needs attention: \(health.summary)")
            }
        }

        /// `state: …`, and when it needs attention, since when and the last success and failure.
        static func stateLines(_ health: SyncHealth?) -> [String] {
            guard let health, health.needsAttention else { return ["state: ok"] }
            var lines = ["state: \(printable(health.summary))"]
            var times: [String] = []
            if health.since.timeIntervalSince1970 > 0 { times.append("since \(time(health.since))") }
            if let failure = health.lastFailure { times.append("last failed contact \(time(failure))") }
            times.append("last success " + (health.lastSuccess.map(time) ?? "none recorded"))
            lines.append("when: " + times.joined(separator: "; "))
            return lines
        }

        /// A rotation due, in words: who was removed, since when, and what makes it.
        static func rotationWords(_ due: KeyRotationDue, suite: String) -> String {
            "\(due.removed.joined(separator: ", ")) held the suite's keys when removed (since \(due.since)); "
                + "the next `groupdefaults-sync sync \(suite)` (or `run`) on a device holding the owner key rotates them"
        }

        static func time(_ date: Date) -> String { TypedJSONDate.format(date) ?? date.formatted(.iso8601) }
    }
}

struct StatusReport: Encodable {
    var suite: String
    var synced: Bool
    var server: String?
    var tokenFile: String?
    var caFile: String?
    var cursor: UInt64?
    var pending: Int
    var pendingKeys: [String]
    var inFlightBatch: String?
    var note: String?
    var deviceID: String
    var deviceName: String?
    var localOnlyKeys: [String]
    var ignored: UInt64
    var conflicts: Int
    var keyFile: String?
    var refused: Int
    var state: String?
    var stateDetail: String?
    var stateSince: String?
    var lastSuccess: String?
    var lastFailure: String?
    /// For a suite another account shares: `owner`, `suite` (its name there) and `role`.
    var shared: [String: String]?

    enum CodingKeys: String, CodingKey {
        case shared
        case state
        case stateDetail = "state_detail"
        case stateSince = "state_since"
        case lastSuccess = "last_success"
        case lastFailure = "last_failure"
        case keyFile = "key_file"
        case refused
        case suite, synced, server
        case tokenFile = "token_file"
        case caFile = "ca_file"
        case cursor, pending
        case pendingKeys = "pending_keys"
        case inFlightBatch = "in_flight_batch"
        case note
        case deviceID = "device_id"
        case deviceName = "device_name"
        case localOnlyKeys = "local_only_keys"
        case ignored, conflicts
    }
}

/// This device's name as the server knows it: the name its token is bound to.
enum DeviceName: Sendable {
    case named(String)
    case unnamed
    case unknown(String)
    case notSynced

    var name: String? {
        if case .named(let name) = self { return name }
        return nil
    }

    /// "tablet (id 123…)", or the id and why there is no name.
    func describe(origin: UInt64) -> String {
        switch self {
        case .named(let name): "\(printable(name)) (id \(origin))"
        case .unnamed: "\(origin) (its token is not bound to a device name)"
        case .unknown(let why): "\(origin) (name unknown: \(printable(why)))"
        case .notSynced: "\(origin)"
        }
    }

    /// Asks the server (`GET /v1/devices`) for at most 3 seconds; and, on a device holding an
    /// encrypted suite's owner key, whether a key rotation is due (`SyncEngine.rotationDue()`).
    static func ask(_ defaults: SharedDefaults, _ server: ServerOptions) async -> (DeviceName, KeyRotationDue?) {
        guard let settings = try? SyncSettings.stored(in: defaults), let http = try? server.makeHTTPClient(caFile: settings.caFile)
        else { return (.unknown("the sync settings cannot be read"), nil) }
        let answer = await withTaskGroup(of: (DeviceName, KeyRotationDue?)?.self) { group in
            group.addTask {
                do {
                    let engine = try SyncEngine(configured: defaults, http: http, options: server.applied(to: SyncEngine.Options()))
                    let due = try? await engine.rotationDue()
                    guard let me = try await engine.devices().first(where: \.current) else {
                        return (.unknown("the server has not seen this device yet"), due)
                    }
                    return (me.name.map(DeviceName.named) ?? .unnamed, due)
                } catch let error as SyncError {
                    return (.unknown(error.description(remedy: remedyWords)), nil)
                } catch {
                    return (.unknown("\(error)"), nil)
                }
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(3))
                return nil
            }
            defer { group.cancelAll() }
            return await group.next() ?? nil
        }
        try? await http.shutdown()
        return answer ?? (.unknown("the server did not answer within 3 seconds"), nil)
    }
}
