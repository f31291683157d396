import Foundation
import Glibc
import GroupDefaultsLMDB
import GroupDefaultsWire
import SystemCalls

/// Erasing deleted accounts' bytes from the embedded store's file.
///
/// LMDB frees a deleted row's pages without overwriting them, and a page that keeps other rows
/// keeps a deleted row's bytes in its free space; a compacting copy copies whole pages, free space
/// included. So an erase rebuilds the store record by record into a new file (every record of
/// every named database, in key order, appended), in a 0700 folder inside the data directory, and
/// puts it in place with one rename, as a restore does, while no other process has the store open
/// (`DataDirectoryLock`, taken exclusively). Without `MDB_NOMEMINIT` (and `MDB_WRITEMAP`) LMDB
/// zeroes what it does not fill of a page it mallocs; 0.9.24 reuses the buffers of the same
/// environment's earlier pages without zeroing them, and a new environment's earlier pages held
/// live records only: so the new file holds the live records' bytes and zeroes. The incarnation is
/// one of those records: an erase is not a restore, devices upload nothing.
///
/// The rule: a delete leaves the mark `sync.lmdb-erase-pending` beside the store, made before its
/// transaction so that no crash loses it. Whoever finds the mark and can take the lock exclusively
/// rebuilds the store, before anything else, then removes the mark: the `accounts delete` itself
/// when nothing else had the store open, otherwise the next process that opens the store alone (a
/// server starting, any command; `LMDBSyncStorage.init(directory:maximumMapSize:)`). A rebuild
/// that was interrupted leaves the mark, and maybe its staging folder, which the next removes first.
package enum LMDBErase {
    /// What `eraseIfPending` did.
    package enum Outcome: Sendable, Equatable {
        /// No erase was pending.
        case nothingPending
        /// The store was rebuilt: no deleted row's bytes are left in it.
        case erased
        /// Another process has the store open: the erase stays pending.
        case othersUseTheStore
        /// The rebuild failed (the reason): the store is as it was, and the erase stays pending.
        case failed(String)
    }

    /// The mark of a pending erase in a data directory.
    static func markPath(in directory: String) -> String { directory + "/sync.lmdb-erase-pending" }

    /// Whether a delete left an erase pending in `directory`.
    package static func isPending(in directory: String) -> Bool {
        FileManager.default.fileExists(atPath: markPath(in: directory))
    }

    /// Leaves the mark, flushed with its directory entry; returns whether it made it (false: it
    /// was there already).
    static func markPending(in directory: String) throws -> Bool {
        let path = markPath(in: directory)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd < 0, errno == EEXIST { return false }
        guard fd >= 0 else {
            throw SyncStorageError(.unavailable, "cannot write \(path): \(LMDBBackup.reason(errno)); nothing was deleted")
        }
        DataDirectoryLock.giveToOwner(of: directory, fd)
        let failure = SystemCall.flush(fd)
        close(fd)
        // Not flushed, the mark stays (another delete may count on it; an extra rebuild changes
        // nothing), and nothing is deleted.
        guard failure == 0 else {
            throw SyncStorageError(.unavailable, "cannot write \(path): \(LMDBBackup.reason(failure)); nothing was deleted")
        }
        LMDBBackup.syncDirectory(directory)
        return true
    }

    /// Removes the mark (after a rebuild, or when the delete that made it found nothing).
    /// Not flushed, the mark may come back after a power cut, and the next start rebuilds the store
    /// again, which changes nothing: so a failure to flush is only warned about.
    static func clearMark(in directory: String) {
        unlink(markPath(in: directory))
        LMDBBackup.syncDirectory(directory)
    }

    /// Rebuilds the store of `directory` if an erase is pending and no other process has the store
    /// open. A failed rebuild leaves the store whole and as it was: `.failed`, with the reason.
    package static func eraseIfPending(in directory: String, maximumMapSize: Int = LMDBSyncStorage.defaultMaximumMapSize) -> Outcome {
        guard isPending(in: directory) else { return .nothingPending }
        let lock: DataDirectoryLock
        do {
            guard let taken = try DataDirectoryLock.take(in: directory, exclusive: true) else { return .othersUseTheStore }
            lock = taken
        } catch {
            return .failed("\(error)")
        }
        defer { lock.release() }
        guard isPending(in: directory) else { return .nothingPending }  // another process erased meanwhile
        removeStagingLeftovers(in: directory)
        do {
            try rebuild(directory, maximumMapSize: maximumMapSize)
        } catch {
            return .failed("\(error)")
        }
        InterruptionPoint.reached("accounts-delete.erase-renamed")
        clearMark(in: directory)
        return .erased
    }

    /// The prefix of the staging folders a rebuild writes in.
    static let stagingPrefix = ".erase-"

    /// Removes the staging folders of rebuilds that were interrupted (a kill leaves one, holding
    /// the deleted rows' bytes); the caller holds the lock exclusively, so no rebuild is under way.
    static func removeStagingLeftovers(in directory: String) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where name.hasPrefix(stagingPrefix) {
            try? FileManager.default.removeItem(atPath: directory + "/" + name)
        }
    }

    /// Writes every record of the store of `directory` into a new store in a staging folder, checks
    /// it (the structure of every page, each database's count), flushes it and renames it over the
    /// store. The caller holds `DataDirectoryLock` exclusively. On failure the staging folder goes
    /// and the store is untouched.
    static func rebuild(_ directory: String, maximumMapSize: Int) throws {
        let staging = directory + "/" + stagingPrefix + IncarnationID.random().prefix(8)
        guard mkdir(staging, 0o700) == 0 else {
            throw EraseFailure("cannot make a folder in \(directory) to rebuild the store in: \(LMDBBackup.reason(errno))")
        }
        defer { try? FileManager.default.removeItem(atPath: staging) }
        let stagedStore = LMDBSyncStorage.storePath(in: staging)
        do {
            let source = try Environment(
                path: LMDBSyncStorage.storePath(in: directory),
                options: LMDBSyncStorage.environmentOptions(directory: directory, maximumMapSize: maximumMapSize)
            )
            defer { source.close() }
            let target = try Environment(
                path: stagedStore,
                options: LMDBSyncStorage.environmentOptions(directory: staging, maximumMapSize: maximumMapSize)
            )
            defer { target.close() }
            try source.readTransaction { from in
                for index in LMDBSyncStorage.DB.names.indices {
                    let database = Database(index)
                    // One transaction per database; LMDB spills a large one to the file.
                    try target.writeTransaction(sync: false) { to in
                        try from.forEach(database) { key, value in
                            try to.put(database, key, value, append: true)  // in key order: appended
                            return true
                        }
                    }
                    var copied = 0
                    try target.readTransaction { copied = try $0.count(database) }
                    let held = try from.count(database)
                    guard copied == held else {
                        throw EraseFailure("its copy of \(LMDBSyncStorage.DB.names[index]) holds \(copied) of \(held) records")
                    }
                }
            }
            try target.sync()
            try target.verifyStructure()
        } catch let full as DiskFull {
            throw EraseFailure("cannot rebuild the store in \(directory): no room on the disk for \(full.bytes) more bytes")
        } catch {
            throw EraseFailure("cannot rebuild the store in \(directory): \(error)")
        }
        // Made by root (`sudo groupdefaults-server …`): the service's user must open it.
        let fd = open(stagedStore, O_RDONLY | O_CLOEXEC)
        if fd >= 0 {
            DataDirectoryLock.giveToOwner(of: directory, fd)
            close(fd)
        }
        InterruptionPoint.reached("accounts-delete.erase-staged")
        // LMDB's lock file stays: nobody has it open (the lock), so the next process to open the
        // store sets it up again for the new file, as after a restore.
        guard rename(stagedStore, LMDBSyncStorage.storePath(in: directory)) == 0 else {
            throw EraseFailure("cannot put the rebuilt store in place in \(directory): \(LMDBBackup.reason(errno))")
        }
        LMDBBackup.syncDirectory(directory)
    }
}

/// Why a deleted account's bytes could not be erased from the embedded store's file, in one
/// sentence; the store is as it was.
package struct EraseFailure: Error, CustomStringConvertible {
    /// The sentence.
    package let description: String

    init(_ description: String) { self.description = description }
}
