// chat-settings: the app's settings screen. `chat-settings sound NAME` chooses the sound;
// `chat-settings sync URL TOKEN_FILE` syncs the suite with a groupdefaults-server once, in-process.
import ChatSettingsKeys
import Foundation
import GroupDefaults
import GroupDefaultsSync

let arguments = Array(CommandLine.arguments.dropFirst())
do {
    let defaults = try ChatSuite.open()
    switch arguments.first {
    case "sound" where arguments.count == 2:
        defaults[.sound] = arguments[1]
        print("sound = \(defaults[.sound])")
    case "sync" where arguments.count == 3:
        guard let server = URL(string: arguments[1]) else { throw SyncError(.local, "not a URL: \(arguments[1])") }
        try SyncSettings(server: server, tokenFile: arguments[2]).store(in: defaults)
        let http = try SyncClient.makeHTTPClient()
        let report: SyncReport
        do {
            report = try await SyncEngine(configured: defaults, http: http).syncOnce()
            try await http.shutdown()
        } catch {
            try? await http.shutdown()
            throw error
        }
        print("synced: applied \(report.applied), pushed \(report.pushed), sound = \(defaults[.sound])")
    default:
        FileHandle.standardError.write(Data("usage: chat-settings sound NAME | chat-settings sync URL TOKEN_FILE\n".utf8))
        exit(64)
    }
} catch {
    FileHandle.standardError.write(Data("chat-settings: \(error)\n".utf8))
    exit(1)
}
