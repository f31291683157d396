import Crypto
import Foundation
import Glibc
import GroupDefaultsLMDB
import GroupDefaultsWire
import SystemCalls

/// Backups of the embedded store (`groupdefaults-server backup` and `restore`).
///
/// A backup is one file: a header line, `groupdefaults-server backup 2 LENGTH KEYID MAC\n`, then
/// a compacted copy of `sync.lmdb` (the store is that one file, so one LMDB snapshot is a
/// consistent copy of everything, taken while servers go on serving). `MAC` is an HMAC-SHA256,
/// under the server's `BackupKey` (named by `KEYID`), of the header up to `KEYID` and its newline,
/// then every byte of the copy: a backup that was truncated, damaged or modified (its data or its
/// authority, whatever digest was recomputed) is refused before anything is changed, and so is one
/// made with another server's key. A backup of version 1 (an unkeyed SHA-256 in place of the MAC)
/// is restored only when the operator says it is trusted (`allowUnauthenticated`).
///
/// Interrupted at any moment, a backup leaves no file behind: it is written to a file without a
/// name (`O_TMPFILE`), named only once complete. A restore prepares its copy in a folder that the
/// next restore removes if a crash left it (under the same exclusive lock).
package enum LMDBBackup {
    static let magic = "groupdefaults-server backup"
    static let chunk = 1 << 20

    /// What `write` made: the backup's size, and the data directory's backup key if this backup
    /// made it (to be shown once).
    package struct Written: Sendable {
        /// The backup's size in bytes.
        package let bytes: Int
        /// The backup key, when this backup made it: shown once, kept apart by the operator.
        package let newKey: BackupKey?
    }

    /// Writes a backup of `storage` to `path`, a file that must not exist: a compacted snapshot,
    /// authenticated with the data directory's backup key (made if it has none), written to a file
    /// without a name beside `path`, flushed, then linked in (never over a file that appeared
    /// meanwhile), mode 0600. On failure, or interrupted, nothing is left.
    package static func write(_ storage: LMDBSyncStorage, to path: String) async throws -> Written {
        try refuseExisting(path)
        _ = try await storage.incarnation()  // a store from before incarnations gets one, and its backup with it
        // Split by hand: Foundation's `deletingLastPathComponent` traps on a one-character name ("b").
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let (key, isNew) = try BackupKey.loadOrMake(in: storage.directory)
        let copy = try UnnamedFile(in: directory, target: path)
        defer { copy.discard() }
        let environment = storage.environment
        // Returned rather than thrown: the queue's errors are the store's (`unavailable`).
        let failure: BackupFailure? = try await storage.onReadQueue {
            // A damaged store is refused rather than copied.
            do { try environment.verifyStructure() } catch {
                return BackupFailure("the store does not verify (\(error)); no backup was written")
            }
            do { try environment.copy(to: copy.descriptor) } catch {
                return BackupFailure("cannot write the backup \(path): \(error); no backup was written")
            }
            return nil
        }
        if let failure { throw failure }
        InterruptionPoint.reached("backup.copied")
        // The MAC first, then the header and the copy; both passes stream.
        // The copy's length: where its end is (each pass below seeks to where it starts).
        let end = lseek(copy.descriptor, 0, SEEK_END)
        guard end >= 0 else {
            throw BackupFailure("cannot write the backup \(path): \(reason(errno)); no backup was written")
        }
        let length = Int(end)
        let head = "\(magic) 2 \(length) \(key.id)\n"
        var authenticator = key.authenticator()
        authenticator.update(data: Data(head.utf8))
        _ = try forEachChunk(of: copy.descriptor) { authenticator.update(data: $0) }
        let header = head.dropLast() + " " + Hex.string(authenticator.finalize()) + "\n"
        let partial = try UnnamedFile(in: directory, target: path)
        defer { partial.discard() }
        try writeAll(partial.descriptor, Data(header.utf8), path: path)
        _ = try forEachChunk(of: copy.descriptor) { try writeAll(partial.descriptor, $0, path: path) }
        let flushed = SystemCall.flush(partial.descriptor)
        guard flushed == 0 else { throw BackupFailure("cannot write the backup \(path): \(reason(flushed)); no backup was written") }
        InterruptionPoint.reached("backup.written")
        try partial.link(as: path)
        syncDirectory(directory)
        return Written(bytes: length + header.utf8.count, newKey: isNew ? key : nil)
    }

    /// Puts the backup at `path` in place as the store of `directory` (made, mode 0700, if
    /// missing), with a new incarnation, keeping the current store's authority (`KeptAuthority`).
    /// The backup is checked in full first (its header, length and digest, then LMDB's page
    /// structure and that it is a server's store); the present's authority is put into the staged
    /// copy; the store is replaced by one rename, while no process has it open
    /// (`DataDirectoryLock`). Anything wrong: `BackupFailure`, and nothing changed.
    package static func restore(
        from path: String,
        into directory: String,
        backupKey given: BackupKey? = nil,
        allowUnauthenticated: Bool = false
    ) async throws -> RestoreOutcome {
        let held = FileManager.default.fileExists(atPath: directory) ? try BackupKey.load(in: directory) : nil
        let content = try checkedContent(of: path, key: given ?? held, allowUnauthenticated: allowUnauthenticated)
        try LMDBSyncStorage.makeDirectory(directory)
        guard let lock = try DataDirectoryLock.take(in: directory, exclusive: true) else {
            throw BackupFailure(
                "a server or another command is using the store in \(directory): stop it, then restore; nothing was changed"
            )
        }
        defer { lock.release() }
        removeStaleStaging(in: directory)
        // Unpacked and prepared in a folder of its own inside the data directory (same file
        // system, so the last step is a rename), removed whatever happens.
        let staging = directory + "/" + stagingPrefix + IncarnationID.random().prefix(8)
        guard mkdir(staging, 0o700) == 0 else {
            throw BackupFailure("cannot write in \(directory): \(reason(errno)); nothing was changed")
        }
        // What is made in it (the staged store, the erase's rebuilt copy) belongs to the data
        // directory's owner, as the store it replaces does, when a restore runs as root.
        DataDirectoryLock.giveToOwner(of: directory, path: staging)
        defer { try? FileManager.default.removeItem(atPath: staging) }
        let present = await presentStore(of: directory, staging: staging)
        do {
            let outcome = try await swapIn(path, content: content, directory: directory, staging: staging, present: present)
            // A new machine takes the key the backup was checked with, for its own backups.
            if held == nil, let given { try given.keep(in: directory) }
            if case .open(let store) = present { try? await store.shutdown() }
            return outcome
        } catch {
            if case .open(let store) = present { try? await store.shutdown() }
            throw error
        }
    }

    /// The restore's steps once the present store is open (or known missing): the backup written
    /// into `staging` and checked, the present's authority put into it, then the rename.
    private static func swapIn(
        _ path: String,
        content: CheckedBackup,
        directory: String,
        staging: String,
        present: PresentStore
    ) async throws -> RestoreOutcome {
        let stagedStore = LMDBSyncStorage.storePath(in: staging)
        let file = try create(stagedStore, target: stagedStore)
        do {
            defer { close(file) }
            DataDirectoryLock.giveToOwner(of: directory, file)
            _ = try forEachChunk(of: path, from: content.offset) { try writeAll(file, $0, path: stagedStore) }
            let flushed = SystemCall.flush(file)
            guard flushed == 0 else { throw BackupFailure("cannot write \(stagedStore): \(reason(flushed)); nothing was changed") }
        }
        // The bytes checked are the bytes staged: the backup was read twice (checked, then
        // copied), and a file swapped in between must not pass for the one checked. The staged
        // copy is in the data directory's own folder, where nobody else writes.
        try content.verify(stagedStore, backup: path)
        InterruptionPoint.reached("restore.staged")
        let incarnation: String
        var deletedAgain = 0
        do {
            let staged = try LMDBSyncStorage(directory: staging)
            do {
                try await staged.onReadQueue { try staged.environment.verifyStructure() }
                guard try await staged.heldIncarnation() != nil else {
                    throw BackupFailure("\(path) is not a backup of a groupdefaults-server store; nothing was changed")
                }
                if case .open(let store) = present {
                    let audit = try await store.auditRecords(account: nil, since: nil, limit: .max)
                    deletedAgain = try await KeptAuthority.deleteAgain(
                        in: staged,
                        presentAudit: audit,
                        backupIncarnations: try await staged.accountIncarnations(),
                        presentIncarnations: try await store.accountIncarnations()
                    )
                    _ = try await staged.takeAuthority(from: store)
                    // The backup's authority records stay in the copy's free pages until it is
                    // rebuilt record by record, as an account's erase does.
                    _ = try LMDBErase.markPending(in: staging)
                }
                incarnation = try await staged.renewIncarnation()
                try await staged.shutdown()
            } catch {
                try? await staged.shutdown()
                throw error
            }
        } catch let error as BackupFailure {
            throw error
        } catch {
            throw BackupFailure("\(path) does not hold a store that opens (\(error)); nothing was changed")
        }
        InterruptionPoint.reached("restore.prepared")
        // The accounts deleted again, and the backup's authority, left an erase pending in the
        // staging folder: their bytes go from the staged copy before it is put in place
        // (`LMDBErase`).
        if case .failed(let why) = LMDBErase.eraseIfPending(in: staging) {
            throw BackupFailure("cannot erase the backup's replaced records from the restored copy (\(why)); nothing was changed")
        }
        // LMDB's lock file stays: nobody has it open (the lock), so the next process to open the
        // store sets it up again for the new file, as after any restart.
        guard rename(stagedStore, LMDBSyncStorage.storePath(in: directory)) == 0 else {
            throw BackupFailure("cannot put the backup in place in \(directory): \(reason(errno)); nothing was changed")
        }
        syncDirectory(directory)
        InterruptionPoint.reached("restore.renamed")
        switch present {
        case .open: return RestoreOutcome(incarnation: incarnation, keptAuthority: true, deletedAgain: deletedAgain, whyNotKept: nil)
        case .none(let why): return RestoreOutcome(incarnation: incarnation, keptAuthority: false, deletedAgain: 0, whyNotKept: why)
        }
    }

    private enum PresentStore {
        case open(LMDBSyncStorage)
        case none(String)
    }

    /// Opens the store a restore replaces, through a hard link to it in `staging` (the restore
    /// holds the directory's lock exclusively, so the store cannot be opened where it is; nothing
    /// writes through the link). A store that is missing or does not open: the restore goes on
    /// with the backup's authority, and says why.
    private static func presentStore(of directory: String, staging: String) async -> PresentStore {
        guard LMDBSyncStorage.storeExists(in: directory) else { return .none("there was no store") }
        let current = staging + "/current"
        guard mkdir(current, 0o700) == 0, link(LMDBSyncStorage.storePath(in: directory), LMDBSyncStorage.storePath(in: current)) == 0
        else { return .none("the store could not be read: \(reason(errno))") }
        do {
            let store = try LMDBSyncStorage(directory: current)
            do {
                try await store.onReadQueue { try store.environment.verifyStructure() }
                return .open(store)
            } catch {
                try? await store.shutdown()
                throw error
            }
        } catch {
            return .none("the store could not be read: \(error)")
        }
    }

    /// Gives the store of `directory` a new incarnation and returns it (`restore --announce`, after
    /// the store was put back by other means), while no process uses it: a running server would go
    /// on naming the old one.
    package static func announce(in directory: String) async throws -> String {
        guard LMDBSyncStorage.storeExists(in: directory) else { throw BackupFailure("no server store in \(directory); nothing was changed") }
        guard let lock = try DataDirectoryLock.take(in: directory, exclusive: true) else {
            throw BackupFailure(
                "a server or another command is using the store in \(directory): stop it, then announce the restore; nothing was changed"
            )
        }
        lock.release()  // the store's own open takes it, shared
        let storage = try LMDBSyncStorage(directory: directory)
        do {
            let incarnation = try await storage.renewIncarnation()
            try await storage.shutdown()
            return incarnation
        } catch {
            try? await storage.shutdown()
            throw error
        }
    }

    /// What `checkedContent` found: where the store's bytes start, how many there are, and what
    /// they must authenticate to, so that the staged copy can be checked again (`verify`).
    struct CheckedBackup {
        let offset: Int
        let length: Int
        private let check: Check

        enum Check {
            /// Version 2: an HMAC under `key` of `head` (the header up to its key id) and the bytes.
            case mac(key: BackupKey, head: String, mac: String)
            /// Version 1, vouched for: an unkeyed SHA-256 of the bytes.
            case digest(String)
        }

        init(offset: Int, length: Int, check: Check) {
            self.offset = offset
            self.length = length
            self.check = check
        }

        /// Checks the bytes from `offset` of the file at `path` (the backup, or the staged copy
        /// from offset 0); `backup` is what the refusal names.
        func verify(_ path: String, from start: Int = 0, backup: String) throws {
            switch check {
            case .mac(let key, let head, let mac):
                var authenticator = key.authenticator()
                authenticator.update(data: Data(head.utf8))
                let read = try LMDBBackup.forEachChunk(of: path, from: start) { authenticator.update(data: $0) }
                try LMDBBackup.checkLength(read, length, backup)
                guard Hex.string(authenticator.finalize()) == mac else {
                    throw BackupFailure(
                        "\(backup) was modified or damaged: its bytes do not match the MAC its server's backup key made; nothing was changed"
                    )
                }
            case .digest(let digest):
                var hasher = SHA256()
                let read = try LMDBBackup.forEachChunk(of: path, from: start) { hasher.update(data: $0) }
                try LMDBBackup.checkLength(read, length, backup)
                guard Hex.string(hasher.finalize()) == digest else {
                    throw BackupFailure("\(backup) is damaged: its bytes do not match the digest it was written with; nothing was changed")
                }
            }
        }
    }

    /// Where the store's bytes start in the backup at `path`, after its header was read and its
    /// length and MAC checked under `key` (a backup of version 1, unkeyed, only if
    /// `allowUnauthenticated`).
    static func checkedContent(of path: String, key: BackupKey?, allowUnauthenticated: Bool) throws -> CheckedBackup {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            var isDirectory: ObjCBool = false
            let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
            throw BackupFailure(
                !exists
                    ? "cannot restore from \(path): no such file"
                    : isDirectory.boolValue
                        ? "cannot restore from \(path): it is a directory, not a backup" : "cannot restore from \(path): permission denied"
            )
        }
        defer { try? handle.close() }
        let head = (try? handle.read(upToCount: 256)) ?? Data()
        let notBackup = BackupFailure(
            "\(path) is not a backup (`groupdefaults-server backup --to FILE` makes them); nothing was changed"
        )
        guard let newline = head.firstIndex(of: 0x0A) else { throw notBackup }
        let line = String(decoding: head[..<newline], as: UTF8.self)
        let fields = line.split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count >= 5, fields.prefix(2).joined(separator: " ") == magic else { throw notBackup }
        let offset = newline + 1
        let checked: CheckedBackup
        switch (fields[2], fields.count) {
        case ("2", 6):
            guard let length = Int(fields[3]) else { throw notBackup }
            let keyID = String(fields[4])
            guard let key else {
                throw BackupFailure(
                    "\(path) is authenticated by its server's backup key (id \(keyID)), and this data directory has none: give the key shown at the server's first backup with --backup-key-file FILE; nothing was changed"
                )
            }
            guard key.id == keyID else {
                throw BackupFailure(
                    "\(path) was made with another backup key (id \(keyID); the key given or kept here is \(key.id)): give that server's key with --backup-key-file FILE; nothing was changed"
                )
            }
            checked = CheckedBackup(
                offset: offset,
                length: length,
                check: .mac(key: key, head: fields.prefix(5).joined(separator: " ") + "\n", mac: String(fields[5]))
            )
        case ("1", 5):
            guard let length = Int(fields[3]) else { throw notBackup }
            guard allowUnauthenticated else {
                throw BackupFailure(
                    "\(path) was made by an older version, without a backup key: nothing tells it from a modified one; if you made it and kept it safe, restore it with --allow-unauthenticated; nothing was changed"
                )
            }
            checked = CheckedBackup(offset: offset, length: length, check: .digest(String(fields[4])))
        default:
            throw notBackup
        }
        try checked.verify(path, from: offset, backup: path)
        return checked
    }

    fileprivate static func checkLength(_ read: Int, _ length: Int, _ path: String) throws {
        guard read == length else {
            throw BackupFailure(
                "\(path) is damaged: it holds \(read) of the store's \(length) bytes (truncated?); nothing was changed"
            )
        }
    }

    /// The prefix of a restore's staging folder inside the data directory.
    static let stagingPrefix = ".restore-"

    /// Removes what an interrupted restore left (its staging folder), while the restore holds the
    /// directory's lock exclusively: no other restore is under way.
    private static func removeStaleStaging(in directory: String) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where name.hasPrefix(stagingPrefix) {
            try? FileManager.default.removeItem(atPath: directory + "/" + name)
        }
    }

    // MARK: Files

    private static func refuseExisting(_ path: String) throws {
        if (try? FileManager.default.attributesOfItem(atPath: path)) != nil {  // lstat: a dangling link counts
            throw BackupFailure("a file already exists at \(path); a backup never overwrites one: remove it or choose another path")
        }
    }

    /// A new file at `path`, mode 0600 whatever the umask; `target` is what the error names.
    static func create(_ path: String, target: String) throws -> Int32 {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let code = errno
            let why = code == ENOENT || code == ENOTDIR ? "its directory does not exist" : reason(code)
            throw BackupFailure("cannot write \(target): \(why); nothing was written")
        }
        fchmod(fd, 0o600)
        return fd
    }

    static func writeAll(_ fd: Int32, _ data: Data, path: String) throws {
        let failure = data.withUnsafeBytes { SystemCall.writeAll(fd, $0) }
        guard failure == 0 else { throw BackupFailure("cannot write \(path): \(reason(failure)); nothing was written") }
    }

    /// Calls `body` with each chunk of the file at `path` from `offset`; returns how many bytes.
    fileprivate static func forEachChunk(of path: String, from offset: Int = 0, _ body: (Data) throws -> Void) throws -> Int {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw BackupFailure("cannot read \(path)") }
        defer { try? handle.close() }
        return try forEachChunk(of: handle.fileDescriptor, from: offset, body)
    }

    /// Calls `body` with each chunk of the open file `descriptor` from `offset`; returns how many
    /// bytes.
    private static func forEachChunk(of descriptor: Int32, from offset: Int = 0, _ body: (Data) throws -> Void) throws -> Int {
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: false)
        try handle.seek(toOffset: UInt64(offset))
        var total = 0
        while let data = try handle.read(upToCount: chunk), !data.isEmpty {
            total += data.count
            try body(data)
        }
        return total
    }

    /// Flushes a directory's entries, so that a crash does not lose a rename or link reported
    /// done. Called once the rename or link is made: the operation is done, and saying it failed
    /// would be false (a backup left in place, a restore or an erase reported undone, a new key
    /// never shown), so a failure (the directory cannot be opened, or its file system does not
    /// flush one) is said on standard error as a warning, never thrown.
    static func syncDirectory(_ directory: String) {
        let failure = SystemCall.flushDirectory(directory)
        guard failure == 0 else {
            let line =
                "warning: cannot flush the entries of \(directory): \(reason(failure)); what was just done there is done, but a power cut could undo it\n"
            FileHandle.standardError.write(Data(line.utf8))
            return
        }
    }

    static func reason(_ code: Int32) -> String { String(cString: strerror(code)).lowercased() }
}

/// What a restore did: the new incarnation, and whether it kept the replaced store's authority
/// (`KeptAuthority`).
package struct RestoreOutcome: Sendable {
    /// The store's new incarnation.
    package let incarnation: String
    /// Whether the authority (`StoredTables`) is the replaced store's (else the backup's).
    package let keptAuthority: Bool
    /// How many accounts deleted after the backup were deleted again.
    package let deletedAgain: Int
    /// Why the authority was not kept (no store, or one that does not open), if it was not.
    package let whyNotKept: String?
}

/// Why a backup or a restore could not be made, in one sentence that says what was left unchanged.
package struct BackupFailure: Error, CustomStringConvertible {
    /// The sentence.
    package let description: String

    init(_ description: String) { self.description = description }
}

extension LMDBSyncStorage {
    /// The incarnation the store holds, without making one (a store made before incarnations, or
    /// a file that is no server's store, has none).
    func heldIncarnation() async throws -> String? {
        let environment = self.environment
        return try await onReadQueue {
            var held: String?
            try environment.readTransaction { txn in
                held = try Self.get(txn, DB.meta, Self.incarnationKey).map { String(decoding: $0, as: UTF8.self) }
            }
            return held
        }
    }
}
