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
                status reads the suite (what the last sync engine to work on it, `run` in another \
                process or the last `sync`, recorded) and asks the server once, for at most 3 \
                seconds, whether the suite's next sync would be let in (the token, the \
                membership of a shared suite, the account) and this device's name (the one its \
                token is bound to, `groupdefaults-server token create --device NAME`). From \
                these it reports one state, and every line agrees with it: not_synced, ok, \
                paused (the token was refused: sync waits for a new one), not_shared (the owner \
                removed this account), account_deleted (sync waits until the suite is configured \
                again, which starts over in the new account), offline (the server was not \
                reached), clock_behind, failing, kept_local (a read member's local changes, never \
                sent), set_aside (changes the server refused), refused (entries refused: \
                tampered, or stamped far ahead), omitted (keys left out), rotation_due (an \
                encrypted suite's member that held its keys was removed: the next sync on a \
                device holding the owner key rotates them). --json gives it as `state`, with \
                `state_detail`, `state_since`, `last_success` and `last_failure`.

                Exit status, one per state: 0 for not_synced and ok; 3 for paused, not_shared \
                and account_deleted (sync waits until a person acts); 1 for every other state.

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
                let settings = try? SyncSettings.stored(in: defaults)
                let pending = try defaults.pendingChanges().map(\.key)
                let journal = try defaults.conflicts()
                let refused = journal.filter(\.isRefused)
                // Everything below comes from this one snapshot, through its one state.
                let snapshot = StatusSnapshot(
                    suite: suite,
                    isSynced: state.isSynced,
                    left: state.isSynced ? nil : defaults.leftMembership(),
                    membership: settings?.shared,
                    pendingCount: pending.count,
                    health: state.isSynced ? SyncHealth.stored(in: defaults) : nil,
                    answer: state.isSynced ? await ServerQuestion.ask(defaults, server) : .notAsked,
                    now: Date()
                )
                let current = snapshot.state
                let device = DeviceLine(snapshot.answer)
                let membership = Self.membership(snapshot, current)
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
                    note: current.kind.exitStatus == 0 ? nil : current.summary,
                    deviceID: String(defaults.origin),
                    deviceName: device.name,
                    localOnlyKeys: state.localOnlyKeys,
                    ignored: state.ignoredCount,
                    conflicts: journal.count - refused.count,
                    keyFile: state.keyFile,
                    refused: refused.count,
                    state: current.kind.rawValue,
                    stateDetail: current.detail,
                    stateSince: current.since.map(Self.time),
                    lastSuccess: current.lastSuccess.map(Self.time),
                    lastFailure: current.lastFailure.map(Self.time),
                    shared: (settings?.shared ?? snapshot.left).map {
                        ["owner": $0.owner, "suite": $0.suite, "role": $0.role.rawValue, "membership": membership.rawValue]
                    }
                )
                if json {
                    let encoder = JSONEncoder()
                    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                    output(String(decoding: try encoder.encode(report), as: UTF8.self))
                } else if let server = state.server {
                    var lines = [
                        "\(suite): syncs with \(server)", "device: \(device.describe(origin: defaults.origin))",
                        "token file: \(state.tokenFile ?? "none")",
                    ]
                    if let caFile = state.caFile { lines.append("certificate authority: \(caFile)") }
                    if let shared = settings?.shared {
                        let whose = "\(printable(shared.owner))'s suite \(printable(shared.suite))"
                        switch membership {
                        case .current: lines.append("shared: \(whose), as \(shared.role.asMember)")
                        case .ended: lines.append("shared: \(whose), no longer shared with this account (it was \(shared.role.asMember))")
                        case .unknown, .left: lines.append("shared: \(whose), as \(shared.role.asMember) (as last known)")
                        }
                    }
                    lines.append(
                        "encryption: " + (state.keyFile.map { "end to end (keys in \($0))" } ?? "none (the server can read keys and values)")
                    )
                    lines.append(
                        "cursor: "
                            + (state.cursor.map { $0 == 0 ? "0 (the next sync reads the snapshot)" : String($0) }
                                ?? "none (the next sync joins the server's suite)")
                    )
                    // A read member's local changes stay pending for good.
                    let keptLocal = settings?.shared?.role == .read && !pending.isEmpty && membership != .ended
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
                    lines += Self.stateLines(current)
                    groupdefaultsSync.outputHint(lines.joined(separator: "\n"))
                } else if let left = snapshot.left {
                    output(
                        "\(suite): not synced (it holds a copy of \(printable(left.owner))'s suite \(printable(left.suite)), which this account left; a new invitation joins it again)"
                    )
                } else {
                    output("\(suite): not synced")
                }
                if let line = current.failureLine(suite: suite) { throw CommandFailure(line, status: current.kind.exitStatus) }
            }
        }

        /// Where this account stands in a suite another account shares, as the snapshot tells.
        enum MembershipStanding: String {
            /// The server accepted this account's request on the suite just now.
            case current
            /// The server says the suite is no longer shared with this account (or it said so last).
            case ended
            /// Not asked, or the question failed for another reason: as last configured.
            case unknown
            /// The suite is a copy of one this account left.
            case left
        }

        static func membership(_ snapshot: StatusSnapshot, _ state: StatusState) -> MembershipStanding {
            if snapshot.left != nil { return .left }
            if state.kind == .notShared { return .ended }
            return snapshot.answered ? .current : .unknown
        }

        /// `state: …`, and for a failure, since when and the last success and failure.
        static func stateLines(_ state: StatusState) -> [String] {
            var lines = ["state: \(printable(state.summary))"]
            guard state.kind.hasTimes else { return lines }
            var times: [String] = []
            if let since = state.since { times.append("since \(time(since))") }
            if let failure = state.lastFailure { times.append("last failed contact \(time(failure))") }
            times.append("last success " + (state.lastSuccess.map(time) ?? "none recorded"))
            lines.append("when: " + times.joined(separator: "; "))
            return lines
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

/// The `device:` line: this device as the server's answer lists it, or why the name is unknown
/// (the same failure that decides the state).
struct DeviceLine {
    let answer: StatusSnapshot.ServerAnswer

    init(_ answer: StatusSnapshot.ServerAnswer) { self.answer = answer }

    /// The name its token is bound to, when the server answered.
    var name: String? {
        if case .answered(let device?, _) = answer { return device.name }
        return nil
    }

    /// "tablet (id 123…)", or the id and why there is no name.
    func describe(origin: UInt64) -> String {
        switch answer {
        case .notAsked: "\(origin)"
        case .answered(let device?, _):
            device.name.map { "\(printable($0)) (id \(origin))" } ?? "\(origin) (its token is not bound to a device name)"
        case .answered(nil, _): "\(origin) (the server has not seen it with this token yet)"
        case .failed(let error): "\(origin) (name unknown: \(printable(error.description(remedy: remedyWords))))"
        }
    }
}

/// What `status` asks the server, for at most 3 seconds: whether the suite's next sync would be
/// let in (`SuiteSharing.checkAccess`: the token, the membership, the account), with the key
/// rotation due on a device holding the owner key, and this device as the server lists it.
enum ServerQuestion {
    static func ask(_ defaults: SharedDefaults, _ server: ServerOptions) async -> StatusSnapshot.ServerAnswer {
        let stored: SyncSettings?
        do { stored = try SyncSettings.stored(in: defaults) } catch { return .failed(error) }
        guard let settings = stored else { return .failed(SyncError(.local, "the sync settings cannot be read")) }
        let http: HTTPClient
        do { http = try server.makeHTTPClient(caFile: settings.caFile) } catch {
            return .failed(SyncError(.local, "the HTTP client cannot be made: \(error)"))
        }
        let answer = await withTaskGroup(of: StatusSnapshot.ServerAnswer?.self) { group in
            group.addTask {
                do {
                    let engine = try SyncEngine(configured: defaults, http: http, options: server.applied(to: SyncEngine.Options()))
                    let due = try await engine.sharing.checkAccess()
                    let me = try await engine.client.devices().devices.first(where: \.current)
                    return .answered(device: me, rotationDue: due)
                } catch let error as SyncError {
                    return .failed(error)
                } catch {
                    return .failed(SyncError(.local, "\(error)"))
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
        if let answer { return answer }
        var late = SyncError(.unavailable, "the server did not answer within 3 seconds")
        late.isUnreached = true
        return .failed(late)
    }
}
