import Foundation

/// What a device notes beside its token file while it joins an encrypted suite by an invitation,
/// until the join is done or undone: the invitation, and once the owner's device handed the keys
/// over, the key file they were written to. A run of `configure --invitation` stopped after the
/// acceptance (a crash, a kill) is finished by the same command again when the keys were written,
/// and undone (the account leaves again) when they were not (`SyncSetup.join`).
///
/// One line with the invitation's id, then one with the key file's path once it holds the keys;
/// mode 0600 (it names nothing secret, but it is this account's business).
struct JoiningNote: Equatable {
    /// The id of the invitation being joined with.
    var invitationID: String
    /// Where the keys were written, once they were.
    var keyFile: String?

    /// The note's path for `tokenFile` (absolute).
    static func path(beside tokenFile: String) -> String { tokenFile + ".joining" }

    /// The note beside `tokenFile`, if there is one this version reads.
    static func read(beside tokenFile: String) -> JoiningNote? {
        guard let text = try? String(contentsOfFile: path(beside: tokenFile), encoding: .utf8) else { return nil }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let id = lines.first, !id.isEmpty else { return nil }
        let keyFile = lines.count > 1 && !lines[1].isEmpty ? lines[1] : nil
        return JoiningNote(invitationID: id, keyFile: keyFile)
    }

    /// Writes the note beside `tokenFile`, replacing one there; false if it cannot.
    func write(beside tokenFile: String) -> Bool {
        let text = keyFile.map { "\(invitationID)\n\($0)\n" } ?? invitationID
        return FileManager.default.createFile(
            atPath: Self.path(beside: tokenFile),
            contents: Data(text.utf8),
            attributes: [.posixPermissions: 0o600]
        )
    }

    /// Removes the note beside `tokenFile`, if any: the join is done or undone.
    static func remove(beside tokenFile: String) {
        try? FileManager.default.removeItem(atPath: path(beside: tokenFile))
    }
}
