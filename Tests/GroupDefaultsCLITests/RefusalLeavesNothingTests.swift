import TestSupport
import Testing

/// Every command of `groupdefaults` that can refuse something, refused in a fresh, empty tree
/// (`RefusedCommand`): one line, a non-zero status, and not a file, folder or lock file made.
@Suite struct RefusalLeavesNothingTests {
    static let cases: [RefusedCommand] = [
        ["write", "fresh", "k", "-int", "abc"], ["write", "fresh", "-int", "abc"], ["write", "fresh", "k"],
        ["write", "fresh", "k", "--json", "{bad"], ["write", "fresh", "", "v"],
        ["write", "--directory", "$ROOT/new/suites", "fresh", "k", "-int", "abc"],
        ["import", "fresh", "$ROOT/files/huge.plist"], ["import", "fresh", "$ROOT/files/malformed.plist"],
        ["import", "fresh", "$ROOT/files/missing.plist"],
        ["read", "fresh"], ["read", "fresh", "k"], ["read-type", "fresh", "k"], ["delete", "fresh"], ["delete", "fresh", "k"],
        ["rename", "fresh", "a", "b"], ["export", "fresh", "$ROOT/files/out.plist"], ["export", "fresh", "-", "--format", "nope"],
        ["info", "fresh"], ["verify", "fresh"], ["watch", "fresh"], ["watch", "fresh", "--count", "0"],
        ["backup", "fresh", "$ROOT/files/b.lmdb"], ["restore", "fresh", "$ROOT/files/missing.lmdb"],
        ["increment", "fresh", "k", "abc"], ["increment", "fresh", "k", "1", "2"], ["increment", "fresh", ""],
        ["find"], ["domains", "extra"], ["managed", "a/b"], ["managed", "x", "y"], ["--generate-completion-script", "tcsh"],
    ].map { RefusedCommand("groupdefaults", $0) }

    @Test(arguments: cases)
    func refusedWithoutATrace(_ command: RefusedCommand) async throws {
        try await command.expectRefusedLeavingNothing()
    }

    @Test func everyCommandIsRefusedOnce() async throws {
        let missing = try await RefusedCommand.commandsWithoutACase(Self.cases, tool: "groupdefaults")
        #expect(missing.isEmpty, "no refused case for: \(missing)")
    }
}
