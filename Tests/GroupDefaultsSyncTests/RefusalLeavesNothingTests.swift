import TestSupport
import Testing

/// Every verb of `groupdefaults-sync` that can refuse something, refused in a fresh, empty tree
/// (`RefusedCommand`; the server is a closed port): one line, a non-zero status, and not a suite,
/// key file, token file, folder or lock file made.
@Suite struct SyncRefusalLeavesNothingTests {
    static let server = ["--server", "http://127.0.0.1:1"]
    static let token = ["--token-file", "$ROOT/files/token"]
    static let cases: [RefusedCommand] =
        [
            ["configure", "fresh", "--server", "notaurl"] + token, ["configure", "fresh", "--token-file", "$ROOT/files/missing.token"] + server,
            ["configure", "fresh"] + server + token, ["configure", "fresh", "--encrypt"] + server + token,
            ["configure", "fresh", "--pairing-code", "ABCD-EFGH", "--device", "tab"] + server,
            // A well-formed code (its check characters hold) whose claim reaches no server: no
            // progress file, and neither the token file's folder nor the one above it.
            ["configure", "fresh", "--pairing-code", "0410-6105-0R3G-G28A-1C60-T3GF-20BQ", "--device", "tab"] + server,
            ["configure", "--invitation", "0410-6105-0R3G-G28A-1C60-T3GF-20BQ"] + server + token,
            ["configure", "fresh", "--recovery-key", "0410-6105-0R3G-G28A-1C60-T3GF-20BQ"] + server + token,
            ["configure", "fresh", "--recovery-key", "nope"] + server + token, ["configure", "--invitation", "ABCD"] + server + token,
            ["configure", "fresh", "--journal-entries", "0"] + server + token, ["configure", "fresh", "--connect-timeout", "-1"] + server + token,
            ["sync", "fresh"], ["push", "fresh"], ["pull", "fresh"], ["run", "fresh"], ["status", "fresh"], ["conflicts", "fresh"],
            ["history", "fresh", "k"], ["reset", "fresh"], ["unconfigure", "fresh"], ["export", "fresh"],
            ["share", "fresh", "--role", "read"], ["invitations", "fresh"], ["members", "fresh"], ["pin", "fresh", "k"], ["pin", "fresh"],
            ["unpin", "fresh", "k"], ["unshare", "fresh", "--account", "bob"],
            ["leave", "fresh"], ["rotate-key", "fresh"], ["pair", "fresh"], ["restore", "fresh", "k"],
            ["--generate-completion-script", "tcsh"],
        ].map { RefusedCommand("groupdefaults-sync", $0) }

    @Test(arguments: cases)
    func refusedWithoutATrace(_ command: RefusedCommand) async throws {
        try await command.expectRefusedLeavingNothing()
    }

    @Test func everyCommandIsRefusedOnce() async throws {
        let missing = try await RefusedCommand.commandsWithoutACase(Self.cases, tool: "groupdefaults-sync")
        #expect(missing.isEmpty, "no refused case for: \(missing)")
    }
}
