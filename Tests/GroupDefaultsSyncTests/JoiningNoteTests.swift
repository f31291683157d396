import Foundation
import GroupDefaultsWire
import Testing

@testable import GroupDefaultsSync

/// The note a join keeps beside its token file (`JoiningNote`): what it names, read back as
/// written, an earlier version's note (the invitation's id alone) still read, and an acceptance
/// claimed with another member key never taken for this run's.
@Suite("The joining note")
struct JoiningNoteTests {
    @Test("written and read back, mode 0600; an earlier version's id-only note reads; another member key's acceptance is not this note's")
    func roundTrip() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("joining-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let token = directory.appendingPathComponent("bob.token").path

        let note = JoiningNote(invitationID: "inv_0a1b", memberKey: "bWVtYmVyLWtleQ==", localName: "family", keyFile: "/k/family.keys")
        #expect(note.write(beside: token))
        #expect(JoiningNote.read(beside: token) == note)
        let mode = try FileManager.default.attributesOfItem(atPath: JoiningNote.path(beside: token))[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(note.isOf(invitation: "inv_0a1b") && !note.isOf(invitation: "inv_0a1c"))
        #expect(note.claimed(InvitationClaim(memberKey: "bWVtYmVyLWtleQ==", proof: "p")))
        #expect(!note.claimed(InvitationClaim(memberKey: "b3RoZXIta2V5", proof: "p")))
        #expect(!note.claimed(nil))

        try Data("inv_0a1b".utf8).write(to: URL(fileURLWithPath: JoiningNote.path(beside: token)))
        let earlier = try #require(JoiningNote.read(beside: token))
        #expect(earlier == JoiningNote(invitationID: "inv_0a1b"))
        #expect(earlier.claimed(InvitationClaim(memberKey: "anything", proof: "p")))

        JoiningNote.remove(beside: token)
        #expect(JoiningNote.read(beside: token) == nil)
    }
}
