import Foundation
import Glibc
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire

/// The invitations of an end-to-end encrypted suite whose `share` waits to hand over the keys: each
/// one a file of its own beside the suite's key file, `KEYFILE.shares.ID`, which the waiting `share`
/// holds locked (`flock`) for as long as it runs. The next `share` or `invitations` of the suite on
/// this device ends those whose lock it can take, left by a `share` that stopped without its
/// clean-up (a crash, a power cut, a `kill -9`: the kernel drops a dead process's lock): a waiting
/// one is revoked, and an account that accepted one and never got the keys is removed again (it
/// could only leave). An invitation whose `share` still runs (in another terminal) is left alone.
/// A lock, not a process id: an id is reused, a lock ends with its process.
struct WaitingShares {
    /// The key file's path; nil for a suite without one (nothing is recorded).
    let keyFile: String?

    init(_ defaults: SharedDefaults) {
        keyFile = (try? SyncSettings.stored(in: defaults))?.flatMap(\.keyFile)
    }

    private static let infix = ".shares."

    /// The file that records `id` as waiting.
    private func path(_ id: String) -> String? { keyFile.map { $0 + Self.infix + id } }

    /// Records `id` as waiting, locked by this process until `Held.release()` or its exit; nil if
    /// the file cannot be made (the invitation then waits unrecorded, as in a suite without a key file).
    func hold(_ id: String) -> Held? {
        guard let path = path(id) else { return nil }
        // Locked before it has its name: nothing finds it unlocked.
        let temporary = path + ".new-\(getpid())"
        let fd = open(temporary, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0, rename(temporary, path) == 0 else {
            unlink(temporary)
            close(fd)
            return nil
        }
        return Held(fd: fd, path: path)
    }

    /// A waiting invitation's file, locked by this process.
    final class Held {
        private var fd: Int32
        let path: String

        fileprivate init(fd: Int32, path: String) {
            self.fd = fd
            self.path = path
        }

        /// The invitation is over (handed over, revoked, ended): its file goes, and its lock.
        func release() {
            guard fd >= 0 else { return }
            unlink(path)
            close(fd)
            fd = -1
        }

        /// Leaves the file for a later run (the server could not be asked): only the lock goes.
        func keep() {
            guard fd >= 0 else { return }
            close(fd)
            fd = -1
        }

        deinit { if fd >= 0 { close(fd) } }
    }

    /// The ids recorded beside the key file, whether their `share` runs or not.
    var ids: [String] {
        guard let keyFile else { return [] }
        let url = URL(fileURLWithPath: keyFile)
        let prefix = url.lastPathComponent + Self.infix
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.deletingLastPathComponent().path)) ?? []
        return names.filter { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }.filter(Self.isInvitationID).sorted()
    }

    /// `inv_` and 12 hex digits, as the server makes them (never a `share`'s half-made file).
    private static func isInvitationID(_ text: String) -> Bool {
        text.hasPrefix("inv_") && text.utf8.count == 16 && text.dropFirst(4).allSatisfy(\.isHexDigit)
    }

    /// Ends what a `share` that stopped left waiting; one line for each. Those whose `share` still
    /// holds its lock are left alone.
    func endLeftOver(_ engine: SyncEngine) async -> [String] {
        var lines: [String] = []
        for id in ids {
            guard let left = leftOver(id) else { continue }
            guard let line = await Self.end(id, engine) else {
                left.keep()
                continue
            }
            left.release()
            lines.append(line + " (left by a share command that stopped)")
        }
        return lines
    }

    /// The file of `id`, locked by this process, if no `share` holds it (and it is still the file
    /// of that name, not one removed meanwhile by another `invitations`).
    private func leftOver(_ id: String) -> Held? {
        guard let path = path(id) else { return nil }
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        var held = stat()
        var named = stat()
        guard flock(fd, LOCK_EX | LOCK_NB) == 0, fstat(fd, &held) == 0, stat(path, &named) == 0,
            held.st_ino == named.st_ino, held.st_dev == named.st_dev
        else {
            close(fd)
            return nil
        }
        return Held(fd: fd, path: path)
    }

    /// Ends the invitation `id`, whose `share` stopped: revokes it while it waits, or removes the
    /// account that accepted it if its device never got the keys. What was done, in words; nil
    /// when the server could not be asked (kept for the next run).
    static func end(_ id: String, _ engine: SyncEngine) async -> String? {
        do {
            _ = try await engine.sharing.revokeInvitation(id: id)
            return "invitation \(id) revoked: its code adds nobody"
        } catch let error where error.code == .invitationUsed {
            guard let found = try? await engine.sharing.invitations().first(where: { $0.id == id }) else { return nil }
            guard let account = found.acceptedBy, found.keys == nil else { return "invitation \(id) was used" }
            // The account may have left since and joined again with a later invitation that
            // handed it the keys (the owner key admitted it): a member as any, never removed here.
            guard let members = try? await engine.sharing.members().members else { return nil }
            guard let member = members.first(where: { $0.account.isSameName(as: account) }) else {
                return "invitation \(id) was accepted by \(printable(account)), who left again before its device got the keys"
            }
            if member.admission != nil {
                return
                    "invitation \(id) was accepted by \(printable(account)), whose device got the keys later through another invitation: still a member"
            }
            guard (try? await engine.client.removeMember(account)) != nil else { return nil }
            return
                "invitation \(id) was accepted by \(printable(account)), whose device never got the keys: \(printable(account)) was removed again; invite again"
        } catch let error where error.code == .invitationExpired || error.code == .invitationNotFound {
            return "invitation \(id) had ended"
        } catch {
            return nil
        }
    }
}
