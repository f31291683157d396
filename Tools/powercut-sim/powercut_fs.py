#!/usr/bin/env python3
"""A power-cut simulator: a FUSE file system over a backing folder that remembers which writes
were made durable (fsync, fdatasync, or a metadata change, as a journaling file system commits
it) and which were not. At unmount it writes down the writes still pending; `cut_image` then
makes the files as a power cut could leave them: every durable byte, plus a random subset of the
pending writes (each page on its own), applied in a random order (Jepsen's LazyFS model).

A rename is durable once its folder is flushed (fsync of the folder); until then it is pending,
and a cut keeps a random prefix of the pending renames (a journal commits them in order). The
durability points of a suite (`<suite>.lmdb-safe`, see the LMDB layer's `DurableCopy`) are
written down in STATE.points: when each copy that became durable was started (the creation of its
`-safe~`), in nanoseconds: every write acknowledged before it is in that copy.

Usage: powercut_fs.py BACKING DURABLE MOUNTPOINT STATE
  BACKING: the files as the processes see them (the page cache's view)
  DURABLE: the files as they are on the platter (updated at each fsync)
  STATE: where the pending writes are written at unmount (JSON lines)
"""
import errno
import json
import os
import shutil
import sys
import threading
import time

from fuse import FUSE, FuseOSError, Operations

PAGE = 4096


class PowerCutFS(Operations):
    def __init__(self, backing, durable, state):
        self.backing = backing
        self.durable = durable
        self.state = state
        self.mutex = threading.Lock()
        self.pending = {}  # relative path -> list of (offset, bytes), oldest first
        self.renames = []  # (old, new, copy started at or None) not yet durable, oldest first
        self.started = {}  # a `-safe~` path -> when it was created or truncated

    # Paths
    def _b(self, path):
        return os.path.join(self.backing, path.lstrip("/"))

    def _d(self, path):
        return os.path.join(self.durable, path.lstrip("/"))

    # What survives a cut
    def _make_durable(self, path):
        """fsync: the file's current content is on the platter; nothing of it is pending. When,
        is written down (STATE.syncs: the path and the time in nanoseconds)."""
        with self.mutex:
            self.pending.pop(path, None)
            shutil.copyfile(self._b(path), self._d(path))
            with open(self.state + ".syncs", "a") as syncs:
                syncs.write(f"{path} {time.time_ns()}\n")

    def _note_start(self, path):
        if path.endswith("-safe~"):
            with self.mutex:
                self.started[path] = time.time_ns()

    def _metadata(self, path):
        """A size or a new file reaches the platter with the journal; the data stays pending."""
        with self.mutex:
            size = os.path.getsize(self._b(path))
            with open(self._d(path), "r+b" if os.path.exists(self._d(path)) else "w+b") as f:
                f.truncate(size)

    # Reading
    def getattr(self, path, fh=None):
        st = os.lstat(self._b(path))
        return {key: getattr(st, key) for key in ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink", "st_size", "st_uid")}

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._b(path))

    def access(self, path, mode):
        if not os.access(self._b(path), mode):
            raise FuseOSError(errno.EACCES)

    def statfs(self, path):
        st = os.statvfs(self._b(path))
        return {key: getattr(st, key) for key in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}

    def open(self, path, flags):
        if flags & os.O_TRUNC:
            self._note_start(path)
        return os.open(self._b(path), flags & ~(os.O_CREAT | os.O_EXCL))

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    # Writing
    def create(self, path, mode, fi=None):
        self._note_start(path)
        fd = os.open(self._b(path), os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
        with self.mutex:
            open(self._d(path), "wb").close()
            os.chmod(self._d(path), mode)
        return fd

    def write(self, path, data, offset, fh):
        written = os.pwrite(fh, data, offset)
        with self.mutex:
            self.pending.setdefault(path, []).append((offset, bytes(data[:written])))
        self._metadata(path)
        return written

    def truncate(self, path, length, fh=None):
        if length == 0:
            self._note_start(path)
        with open(self._b(path), "r+b") as f:
            f.truncate(length)
        self._metadata(path)

    def fallocate(self, path, mode, offset, length, fh):
        if mode != 0:
            raise FuseOSError(errno.EOPNOTSUPP)
        end = offset + length
        if os.fstat(fh).st_size < end:
            os.ftruncate(fh, end)
            self._metadata(path)

    def fsync(self, path, datasync, fh):
        os.fsync(fh)
        self._make_durable(path)

    def fsyncdir(self, path, datasync, fh):
        """The folder's pending renames reach the platter (all of them: one journal)."""
        with self.mutex:
            renames, self.renames = self.renames, []
            for old, new, started in renames:
                self._durable_rename(old, new, started)

    def _durable_rename(self, old, new, started):
        if os.path.exists(self._d(old)):
            os.rename(self._d(old), self._d(new))
        if started is not None:
            with open(self.state + ".points", "a") as points:
                points.write(f"{new} {started}\n")

    def flush(self, path, fh):
        return 0

    def release(self, path, fh):
        os.close(fh)

    def chmod(self, path, mode):
        os.chmod(self._b(path), mode)
        if os.path.exists(self._d(path)):
            os.chmod(self._d(path), mode)

    def chown(self, path, uid, gid):
        os.chown(self._b(path), uid, gid)

    def utimens(self, path, times=None):
        os.utime(self._b(path), times)

    def unlink(self, path):
        os.unlink(self._b(path))
        with self.mutex:
            self.pending.pop(path, None)
            if os.path.exists(self._d(path)):
                os.unlink(self._d(path))

    def rename(self, old, new):
        os.rename(self._b(old), self._b(new))
        with self.mutex:
            if old in self.pending:
                self.pending[new] = self.pending.pop(old)
            self.renames.append((old, new, self.started.pop(old, None)))

    def mkdir(self, path, mode):
        os.mkdir(self._b(path), mode)
        os.makedirs(self._d(path), exist_ok=True)

    def rmdir(self, path):
        os.rmdir(self._b(path))
        shutil.rmtree(self._d(path), ignore_errors=True)

    def destroy(self, path):
        # Unmounting flushed every dirty page to us as writes: still pending, not durable.
        with self.mutex, open(self.state, "w") as out:
            for old, new, started in self.renames:
                out.write(json.dumps({"rename": old, "to": new, "started": started}) + "\n")
            for name, writes in self.pending.items():
                for offset, data in writes:
                    out.write(json.dumps({"path": name, "offset": offset, "data": data.hex()}) + "\n")


def cut_image(durable, state, result, rng):
    """The files after a power cut: DURABLE's, a random prefix of the pending renames, plus a random
    subset of the pending writes, page by page, applied in a random order. The renames kept that
    complete a durability point are added to STATE.points."""
    shutil.copytree(durable, result)
    pages = []
    renames = []
    with open(state) as lines:
        for line in lines:
            write = json.loads(line)
            if "rename" in write:
                renames.append(write)
                continue
            data = bytes.fromhex(write["data"])
            for start in range(0, len(data), PAGE):
                pages.append((write["path"], write["offset"] + start, data[start : start + PAGE]))
    for rename in renames[: rng.randint(0, len(renames))]:
        old, new = (os.path.join(result, rename[key].lstrip("/")) for key in ("rename", "to"))
        if os.path.exists(old):
            os.rename(old, new)
        if rename["started"] is not None:
            with open(state + ".points", "a") as points:
                points.write(f"{rename['to']} {rename['started']}\n")
    kept = [page for page in pages if rng.random() < 0.5]
    rng.shuffle(kept)
    for name, offset, data in kept:
        target = os.path.join(result, name.lstrip("/"))
        if not os.path.exists(target):  # written under a name whose rename the cut did not keep
            continue
        with open(target, "r+b") as f:
            f.seek(offset)
            f.write(data)
    return len(pages), len(kept)


if __name__ == "__main__":
    backing, durable, mountpoint, state = sys.argv[1:5]
    FUSE(PowerCutFS(backing, durable, state), mountpoint, foreground=True, nothreads=False)
