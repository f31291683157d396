import ArgumentParser
import Foundation
import GroupDefaults
import GroupDefaultsSync

extension SyncCommand {
    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a suite's sync state: server, token file, cursor, pending changes.")

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name.") var suite: String
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            try await perform {
                let defaults = try options.open(suite)
                let state = try defaults.syncState()
                let pending = try defaults.pendingChanges().map(\.key)
                let report = StatusReport(
                    suite: suite, synced: state.isSynced, server: state.server, tokenFile: state.tokenFile, caFile: state.caFile,
                    cursor: state.cursor, pending: pending.count, pendingKeys: Array(pending.prefix(20)),
                    inFlightBatch: state.inFlight?.id, note: state.note, deviceID: String(defaults.origin),
                    localOnlyKeys: state.localOnlyKeys, ignored: state.ignoredCount, conflicts: try defaults.conflicts().count)
                if json {
                    let encoder = JSONEncoder()
                    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                    output(String(decoding: try encoder.encode(report), as: UTF8.self))
                    return
                }
                guard let server = state.server else { return output("\(suite): not synced") }
                var lines = ["\(suite): syncs with \(server)", "device: \(defaults.origin)", "token file: \(state.tokenFile ?? "none")"]
                if let caFile = state.caFile { lines.append("certificate authority: \(caFile)") }
                lines.append("cursor: " + (state.cursor.map { $0 == 0 ? "0 (the next sync reads the snapshot)" : String($0) }
                    ?? "none (the next sync joins the server's suite)"))
                lines.append("pending: \(pending.count)" + (pending.isEmpty ? "" : " (\(report.pendingKeys.joined(separator: ", "))\(pending.count > 20 ? ", …" : ""))"))
                if let batch = state.inFlight { lines.append("in flight: batch \(batch.id) (sent again at the next push)") }
                if !state.localOnlyKeys.isEmpty {
                    lines.append("local-only keys: \(state.localOnlyKeys.joined(separator: " ")) (\(state.ignoredCount) pulled value\(state.ignoredCount == 1 ? "" : "s") not applied)")
                }
                if report.conflicts > 0 { lines.append("conflicts kept: \(report.conflicts) (see groupdefaults-sync conflicts \(suite))") }
                lines.append("state: " + (state.note ?? "ok"))
                output(lines.joined(separator: "\n"))
            }
        }
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
    var localOnlyKeys: [String]
    var ignored: UInt64
    var conflicts: Int

    enum CodingKeys: String, CodingKey {
        case suite, synced, server, tokenFile = "token_file", caFile = "ca_file", cursor, pending, pendingKeys = "pending_keys"
        case inFlightBatch = "in_flight_batch", note, deviceID = "device_id", localOnlyKeys = "local_only_keys", ignored, conflicts
    }
}
