import Foundation
import GroupDefaultsWire

/// What a device notes beside its token file while it joins an encrypted suite by an invitation,
/// until the join is done or undone: the invitation, the member key this run claimed it with, the
/// local suite's name, and once the owner's device handed the keys over, the key file they were
/// written to. A run of `configure --invitation` stopped after the acceptance (a crash, a kill, an
/// answer lost) is finished by the same command again when the keys were written, and undone (the
/// account leaves again) when they were not (`SyncSetup.join`); only an acceptance with this
/// note's member key is this run's to finish or undo.
///
/// JSON, mode 0600 (it names nothing secret, but it is this account's business). A note of an
/// earlier version holds the invitation's id alone.
struct JoiningNote: Codable, Equatable {
    /// The id of the invitation being joined with.
    var invitationID: String
    /// The member key the acceptance claimed (base64, as in `InvitationClaim`); nil in a note of
    /// an earlier version.
    var memberKey: String?
    /// The local suite the join sets up; nil in a note of an earlier version.
    var localName: String?
    /// Where the keys were written, once they were.
    var keyFile: String?

    enum CodingKeys: String, CodingKey {
        case invitationID = "invitation"
        case memberKey = "member_key"
        case localName = "local_name"
        case keyFile = "key_file"
    }

    /// The note's path for `tokenFile` (absolute).
    static func path(beside tokenFile: String) -> String { tokenFile + ".joining" }

    /// The note beside `tokenFile`, if there is one.
    static func read(beside tokenFile: String) -> JoiningNote? {
        guard let data = FileManager.default.contents(atPath: path(beside: tokenFile)) else { return nil }
        if let note = try? JSONDecoder().decode(JoiningNote.self, from: data) { return note }
        let id = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return id.isEmpty ? nil : JoiningNote(invitationID: id)
    }

    /// Whether this note is of the invitation `id` (its bytes).
    func isOf(invitation id: String) -> Bool { Array(invitationID.utf8) == Array(id.utf8) }

    /// Whether `claim`, the one an acceptance was made with, is this note's: true for a note of
    /// an earlier version, which kept no member key.
    func claimed(_ claim: InvitationClaim?) -> Bool {
        guard let memberKey else { return true }
        return claim.map { Array($0.memberKey.utf8) == Array(memberKey.utf8) } ?? false
    }

    /// Writes the note beside `tokenFile`, replacing one there; false if it cannot.
    func write(beside tokenFile: String) -> Bool {
        guard let data = try? JSONEncoder().encode(self) else { return false }
        return FileManager.default.createFile(atPath: Self.path(beside: tokenFile), contents: data, attributes: [.posixPermissions: 0o600])
    }

    /// Removes the note beside `tokenFile`, if any: the join is done or undone.
    static func remove(beside tokenFile: String) {
        try? FileManager.default.removeItem(atPath: path(beside: tokenFile))
    }
}
