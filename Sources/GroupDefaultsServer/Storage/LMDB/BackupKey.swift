import Crypto
import Foundation
import Glibc
import GroupDefaultsWire
import SystemCalls

/// The key that authenticates the embedded store's backups: 32 random bytes the server keeps in
/// its data directory (`backup.key`, mode 0600), never in the store, so never in a backup.
///
/// A backup carries an HMAC-SHA256 of its header and every byte of the store under this key
/// (`LMDBBackup`): a backup modified anywhere, its data or its authority, with or without a
/// recomputed digest, is refused, and so is one made by another server. The first `backup` makes
/// the key and shows it once, as `configure --encrypt` shows a suite's recovery key; the operator
/// keeps it apart from the backups, for a restore onto a new machine (`restore
/// --backup-key-file`), which puts it in the new data directory.
package struct BackupKey: Sendable {
    private let bytes: [UInt8]
    private var key: SymmetricKey { SymmetricKey(data: bytes) }

    /// The key as it is shown and read back: `gdbk1-` and 64 hex digits.
    package let text: String

    /// A short public name of the key (16 hex digits of an HMAC under it), written in each backup
    /// so that a backup made with another key is told from a modified one.
    package var id: String {
        Hex.string(HMAC<SHA256>.authenticationCode(for: Array("groupdefaults-server backup key id".utf8), using: key).prefix(8))
    }

    private static let prefix = "gdbk1-"

    private init(bytes: [UInt8]) {
        self.bytes = bytes
        text = Self.prefix + Hex.string(bytes)
    }

    /// The key written as `text` (surrounding white space ignored), or nil if it is not one.
    package init?(text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.hasPrefix(Self.prefix) else { return nil }
        let digits = Array(trimmed.utf8.dropFirst(Self.prefix.utf8.count))
        guard digits.count == 64 else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: 64, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
        }
        self.init(bytes: bytes)
    }

    /// The key file of a data directory.
    package static func path(in directory: String) -> String { directory + "/backup.key" }

    /// The key of `directory`, or nil if it has none yet.
    package static func load(in directory: String) throws -> BackupKey? {
        let path = path(in: directory)
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path), let key = BackupKey(text: String(decoding: data, as: UTF8.self)) else {
            throw BackupFailure("\(path) does not hold a backup key (gdbk1-…): put back the key shown at the first backup")
        }
        return key
    }

    /// A new random key, not yet kept anywhere.
    package static func random() -> BackupKey {
        BackupKey(bytes: SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })
    }

    /// Keeps the key as `directory`'s (mode 0600, flushed, never over an existing file: two
    /// commands making one at once keep the first, which `load` then returns).
    package func keep(in directory: String) throws {
        let path = Self.path(in: directory)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw BackupFailure("cannot write the backup key \(path): \(LMDBBackup.reason(errno)); no backup was written")
        }
        defer { close(fd) }
        fchmod(fd, 0o600)
        DataDirectoryLock.giveToOwner(of: directory, fd)
        let line = Array((text + "\n").utf8)
        var failure = line.withUnsafeBytes { SystemCall.writeAll(fd, $0) }
        if failure == 0 { failure = SystemCall.flush(fd) }
        guard failure == 0 else {
            unlink(path)
            throw BackupFailure("cannot write the backup key \(path): \(LMDBBackup.reason(failure)); no backup was written")
        }
        LMDBBackup.syncDirectory(directory)
    }

    /// The key of `directory`, made and kept there if it had none (then `isNew`).
    package static func loadOrMake(in directory: String) throws -> (key: BackupKey, isNew: Bool) {
        if let key = try load(in: directory) { return (key, false) }
        let key = random()
        do {
            try key.keep(in: directory)
        } catch {
            if let made = try load(in: directory) { return (made, false) }  // another command made it first
            throw error
        }
        return (key, true)
    }

    /// An HMAC under this key, fed chunk by chunk.
    func authenticator() -> HMAC<SHA256> { HMAC<SHA256>(key: key) }
}
