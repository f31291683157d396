import Glibc

/// A file being written in a directory without a name (`O_TMPFILE`) until `link(as:)` names it: a
/// process killed before that leaves nothing behind. On a file system without `O_TMPFILE` it has a
/// hidden name, removed by `discard()`.
struct UnnamedFile {
    /// The open file, for reading and writing.
    let descriptor: Int32
    private let hiddenPath: String?

    /// Linux's `O_TMPFILE` (`__O_TMPFILE | O_DIRECTORY`), which Glibc's module does not export
    /// (it is behind `_GNU_SOURCE`); the value is the same on every architecture Swift runs on.
    private static let temporaryFileFlag: Int32 = 0o20000000 | O_DIRECTORY

    /// A new file in `directory`, mode 0600; `target` is what an error names.
    init(in directory: String, target: String) throws {
        let fd = open(directory, Self.temporaryFileFlag | O_RDWR | O_CLOEXEC, 0o600)
        if fd >= 0 {
            descriptor = fd
            hiddenPath = nil
            return
        }
        let path = directory + "/.groupdefaults-backup-" + IncarnationID.random().prefix(12)
        let named = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard named >= 0 else {
            let code = errno
            let why = code == ENOENT || code == ENOTDIR ? "its directory does not exist" : LMDBBackup.reason(code)
            throw BackupFailure("cannot write \(target): \(why); nothing was written")
        }
        descriptor = named
        hiddenPath = path
    }

    /// Names the file `path` (never over an existing file).
    func link(as path: String) throws {
        let linked =
            if let hiddenPath { Glibc.link(hiddenPath, path) } else {
                linkat(AT_FDCWD, "/proc/self/fd/\(descriptor)", AT_FDCWD, path, AT_SYMLINK_FOLLOW)
            }
        guard linked == 0 else {
            if errno == EEXIST {
                throw BackupFailure("a file already exists at \(path); a backup never overwrites one: remove it or choose another path")
            }
            throw BackupFailure("cannot write the backup \(path): \(LMDBBackup.reason(errno)); no backup was written")
        }
    }

    /// Closes the file, and removes its hidden name if it has one.
    func discard() {
        close(descriptor)
        if let hiddenPath { unlink(hiddenPath) }
    }
}
