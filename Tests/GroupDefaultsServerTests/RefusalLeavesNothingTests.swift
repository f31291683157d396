import TestSupport
import Testing

/// Every command of `groupdefaults-server` that can refuse something, refused in a fresh, empty
/// tree (`RefusedCommand`; `--data-dir` names a folder that does not exist): one line, a non-zero
/// status, and not a file, folder or lock file made: no store is made by a command that fails.
@Suite struct ServerRefusalLeavesNothingTests {
    static let store = ["--data-dir", "$ROOT/server"]
    static let cases: [RefusedCommand] =
        [
            ["token", "create", "--account", "ana"], ["token", "create", "--account", "bad/name", "--create"],
            ["admin", "create", "--name", "bad/name", "--create"], ["token", "create", "--account", "ana", "--expires", "nope"],
            ["token", "list"], ["token", "revoke", "tok_x"], ["devices", "list", "--account", "ana"], ["devices", "revoke", "dev_x"],
            ["admin", "create", "--name", "ops"], ["admin", "list"], ["admin", "remove", "--name", "ops"],
            ["audit"], ["audit", "--since", "nonsense"], ["accounts", "list"], ["accounts", "delete", "nobody", "--yes"],
            ["accounts", "export", "nobody", "--to", "$ROOT/files/out.json"], ["suites", "reset", "--account", "a", "--suite", "s"],
            ["suites", "repair-clock", "--account", "a", "--suite", "s"],
            ["backup", "--to", "$ROOT/files/b"], ["backup", "--to", "/proc/nope/b"], ["restore", "--from", "$ROOT/files/missing"],
            ["check-config", "--port", "99999"], ["serve", "--port", "99999"], ["serve", "--tombstone-days", "-1"],
            // Refused at start: the TLS files, an address not this machine's. No store is made first.
            ["serve", "--port", "0", "--tls-cert", "$ROOT/files/missing.pem", "--tls-key", "$ROOT/files/missing.key"],
            ["serve", "--port", "0", "--host", "192.0.2.1"],
        ].map { RefusedCommand("groupdefaults-server", $0 + store) }
        + [
            ["check-config", "--config", "$ROOT/files/bad.conf"], ["check-config", "--config", "$ROOT/files/missing.conf"],
            ["--generate-completion-script", "tcsh"],
        ].map { RefusedCommand("groupdefaults-server", $0) }

    @Test(arguments: cases)
    func refusedWithoutATrace(_ command: RefusedCommand) async throws {
        try await command.expectRefusedLeavingNothing()
    }

    @Test func everyCommandIsRefusedOnce() async throws {
        let missing = try await RefusedCommand.commandsWithoutACase(Self.cases, tool: "groupdefaults-server")
        #expect(missing.isEmpty, "no refused case for: \(missing)")
    }
}
