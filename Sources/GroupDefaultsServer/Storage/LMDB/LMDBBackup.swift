import Crypto
import Foundation
import Glibc
import GroupDefaultsLMDB

/// Backups of the embedded store (`groupdefaults-server backup` and `restore`).
///
/// A backup is one file: a header line, `groupdefaults-server backup 1 LENGTH SHA256\n`, then a
/// compacted copy of `sync.lmdb` (the store is that one file, so one LMDB snapshot is a
/// consistent copy of everything, taken while servers go on serving). The length and digest make
/// a truncated or damaged backup one that `restore` refuses before anything is changed.
package enum LMDBBackup {
    static let magic = "groupdefaults-server backup 1"
    static let chunk = 1 << 20

    /// Writes a backup of `storage` to `path`, a file that must not exist: a compacted snapshot,
    /// written under a temporary name beside `path`, flushed, then linked in (never over a file
    /// that appeared meanwhile), mode 0600. Returns its size in bytes. On failure nothing is left.
    package static func write(_ storage: LMDBSyncStorage, to path: String) async throws -> Int {
        try refuseExisting(path)
        _ = try await storage.incarnation()  // a store from before incarnations gets one, and its backup with it
        // Split by hand: Foundation's `deletingLastPathComponent` traps on a one-character name ("b").
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        let suffix = IncarnationID.random().prefix(8)
        let copyPath = "\(directory)/.\(name).copy-\(suffix)"
        let partialPath = "\(directory)/.\(name).partial-\(suffix)"
        defer {
            unlink(copyPath)
            unlink(partialPath)
        }
        let environment = storage.environment
        let copy = try create(copyPath, target: path)
        defer { close(copy) }
        // Returned rather than thrown: the queue's errors are the store's (`unavailable`).
        let failure: BackupFailure? = try await storage.onReadQueue {
            // A damaged store is refused rather than copied.
            do { try environment.verifyStructure() } catch {
                return BackupFailure("the store does not verify (\(error)); no backup was written")
            }
            do { try environment.copy(to: copy) } catch {
                return BackupFailure("cannot write the backup \(path): \(error); no backup was written")
            }
            return nil
        }
        if let failure { throw failure }
        // The digest first, then the header and the copy; both passes stream.
        var hasher = SHA256()
        let length = try forEachChunk(of: copyPath) { hasher.update(data: $0) }
        let digest = hasher.finalize().map { String(format: "%02x", $0) }.joined()
        let partial = try create(partialPath, target: path)
        defer { close(partial) }
        try writeAll(partial, Data("\(magic) \(length) \(digest)\n".utf8), path: path)
        _ = try forEachChunk(of: copyPath) { try writeAll(partial, $0, path: path) }
        guard fsync(partial) == 0 else { throw BackupFailure("cannot write the backup \(path): \(reason(errno)); no backup was written") }
        guard link(partialPath, path) == 0 else {
            if errno == EEXIST { try refuseExisting(path) }
            throw BackupFailure("cannot write the backup \(path): \(reason(errno)); no backup was written")
        }
        syncDirectory(directory)
        return length + "\(magic) \(length) \(digest)\n".utf8.count
    }

    /// Puts the backup at `path` in place as the store of `directory` (made, mode 0700, if
    /// missing), with a new incarnation, keeping the current store's tokens, operators and audit
    /// log (`KeptSecurityState`). The backup is checked in full first (its header, length and
    /// digest, then LMDB's page structure and that it is a server's store); the kept state is put
    /// into the staged copy; the store is replaced by one rename, while no process has it open
    /// (`DataDirectoryLock`). Anything wrong: `BackupFailure`, and nothing changed.
    package static func restore(from path: String, into directory: String) async throws -> RestoreOutcome {
        let content = try checkedContent(of: path)
        try LMDBSyncStorage.makeDirectory(directory)
        guard let lock = try DataDirectoryLock.take(in: directory, exclusive: true) else {
            throw BackupFailure(
                "a server or another command is using the store in \(directory): stop it, then restore; nothing was changed"
            )
        }
        defer { lock.release() }
        // Unpacked and prepared in a folder of its own inside the data directory (same file
        // system, so the last step is a rename), removed whatever happens.
        let staging = directory + "/.restore-" + IncarnationID.random().prefix(8)
        guard mkdir(staging, 0o700) == 0 else {
            throw BackupFailure("cannot write in \(directory): \(reason(errno)); nothing was changed")
        }
        defer { try? FileManager.default.removeItem(atPath: staging) }
        let kept = await keptState(of: directory, staging: staging)
        let stagedStore = LMDBSyncStorage.storePath(in: staging)
        let file = try create(stagedStore, target: stagedStore)
        do {
            defer { close(file) }
            DataDirectoryLock.giveToOwner(of: directory, file)
            _ = try forEachChunk(of: path, from: content.offset) { try writeAll(file, $0, path: stagedStore) }
            guard fsync(file) == 0 else { throw BackupFailure("cannot write \(stagedStore): \(reason(errno)); nothing was changed") }
        }
        let incarnation: String
        var deletedAgain = 0
        do {
            let staged = try LMDBSyncStorage(directory: staging)
            do {
                try await staged.onReadQueue { try staged.environment.verifyStructure() }
                guard try await staged.heldIncarnation() != nil else {
                    throw BackupFailure("\(path) is not a backup of a groupdefaults-server store; nothing was changed")
                }
                if case .kept(let state) = kept { deletedAgain = try await state.apply(to: staged) }
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
        // The accounts deleted again left an erase pending in the staging folder: their bytes go
        // from the staged copy before it is put in place (`LMDBErase`).
        if case .failed(let why) = LMDBErase.eraseIfPending(in: staging) {
            throw BackupFailure("cannot erase the accounts deleted again from the restored copy (\(why)); nothing was changed")
        }
        // LMDB's lock file stays: nobody has it open (the lock), so the next process to open the
        // store sets it up again for the new file, as after any restart.
        guard rename(stagedStore, LMDBSyncStorage.storePath(in: directory)) == 0 else {
            throw BackupFailure("cannot put the backup in place in \(directory): \(reason(errno)); nothing was changed")
        }
        syncDirectory(directory)
        switch kept {
        case .kept: return RestoreOutcome(incarnation: incarnation, keptSecurityState: true, deletedAgain: deletedAgain, whyNotKept: nil)
        case .notKept(let why): return RestoreOutcome(incarnation: incarnation, keptSecurityState: false, deletedAgain: 0, whyNotKept: why)
        }
    }

    private enum Kept {
        case kept(KeptSecurityState)
        case notKept(String)
    }

    /// Reads what the restore keeps from the store it replaces, through a hard link to it in
    /// `staging` (the restore holds the directory's lock exclusively, so the store cannot be
    /// opened where it is; nothing writes through the link). A store that is missing or does not
    /// open: the restore goes on with the backup's state, and says why.
    private static func keptState(of directory: String, staging: String) async -> Kept {
        guard LMDBSyncStorage.storeExists(in: directory) else { return .notKept("there was no store") }
        let current = staging + "/current"
        guard mkdir(current, 0o700) == 0, link(LMDBSyncStorage.storePath(in: directory), LMDBSyncStorage.storePath(in: current)) == 0
        else { return .notKept("the store could not be read: \(reason(errno))") }
        do {
            let store = try LMDBSyncStorage(directory: current)
            do {
                try await store.onReadQueue { try store.environment.verifyStructure() }
                let state = try await KeptSecurityState.read(from: store)
                try await store.shutdown()
                return .kept(state)
            } catch {
                try? await store.shutdown()
                throw error
            }
        } catch {
            return .notKept("the store could not be read: \(error)")
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

    /// Where the store's bytes start in the backup at `path`, after its header was read and its
    /// length and digest checked.
    static func checkedContent(of path: String) throws -> (offset: Int, length: Int) {
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
            "\(path) is not a backup made by `groupdefaults-server backup`; nothing was changed"
        )
        guard let newline = head.firstIndex(of: 0x0A) else { throw notBackup }
        let fields = String(decoding: head[..<newline], as: UTF8.self).split(separator: " ")
        guard fields.count == 5, fields.prefix(3).joined(separator: " ") == magic, let length = Int(fields[3]) else { throw notBackup }
        let offset = newline + 1
        var hasher = SHA256()
        let read = try forEachChunk(of: path, from: offset) { hasher.update(data: $0) }
        guard read == length else {
            throw BackupFailure(
                "\(path) is damaged: it holds \(read) of the store's \(length) bytes (truncated?); nothing was changed"
            )
        }
        guard hasher.finalize().map({ String(format: "%02x", $0) }).joined() == fields[4] else {
            throw BackupFailure("\(path) is damaged: its bytes do not match the digest it was written with; nothing was changed")
        }
        return (offset, length)
    }

    // MARK: Files

    private static func refuseExisting(_ path: String) throws {
        if (try? FileManager.default.attributesOfItem(atPath: path)) != nil {  // lstat: a dangling link counts
            throw BackupFailure("a file already exists at \(path); a backup never overwrites one: remove it or choose another path")
        }
    }

    /// A new file at `path`, mode 0600 whatever the umask; `target` is what the error names.
    private static func create(_ path: String, target: String) throws -> Int32 {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let code = errno
            let why = code == ENOENT || code == ENOTDIR ? "its directory does not exist" : reason(code)
            throw BackupFailure("cannot write \(target): \(why); nothing was written")
        }
        fchmod(fd, 0o600)
        return fd
    }

    private static func writeAll(_ fd: Int32, _ data: Data, path: String) throws {
        try data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
            var done = 0
            while done < bytes.count {
                let written = Glibc.write(fd, bytes.baseAddress! + done, bytes.count - done)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { throw BackupFailure("cannot write \(path): \(reason(errno)); nothing was written") }
                done += written
            }
        }
    }

    /// Calls `body` with each chunk of the file at `path` from `offset`; returns how many bytes.
    private static func forEachChunk(of path: String, from offset: Int = 0, _ body: (Data) throws -> Void) throws -> Int {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw BackupFailure("cannot read \(path)") }
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(offset))
        var total = 0
        while let data = try handle.read(upToCount: chunk), !data.isEmpty {
            total += data.count
            try body(data)
        }
        return total
    }

    /// Flushes a directory's entries, so that a crash does not lose a rename or link reported done.
    static func syncDirectory(_ directory: String) {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }

    static func reason(_ code: Int32) -> String { String(cString: strerror(code)).lowercased() }
}

/// What a restore did: the new incarnation, and whether it kept the replaced store's tokens,
/// operators and audit log (`KeptSecurityState`).
package struct RestoreOutcome: Sendable {
    /// The store's new incarnation.
    package let incarnation: String
    /// Whether the tokens, operators and audit log are the replaced store's (else the backup's).
    package let keptSecurityState: Bool
    /// How many accounts deleted after the backup were deleted again.
    package let deletedAgain: Int
    /// Why the state was not kept (no store, or one that does not open), if it was not.
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
