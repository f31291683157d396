"""A device's power supply: its folder is on the power-cut simulator's file system
(Tools/powercut-sim/powercut_fs.py), which keeps what was flushed and tells what was not. A cut
kills the device's processes, keeps every flushed byte plus a random part of the rest, in a random
order, and boots the device again: a new mount of what the cut left, and a new boot id for every
later command of the device (the core puts its last durability point back at the first open
after a reboot, which it tells by the boot id)."""

import errno
import os
import shutil
import subprocess
import sys
import time
import uuid

SIMULATOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "powercut-sim")
# Runs a command as on the machine booted again: the boot id bound over the kernel's, in a mount
# namespace of the command's own.
BOOTED_AGAIN = 'mount --bind "$0" /proc/sys/kernel/random/boot_id && exec "$@"'


def mounted(path):
    with open("/proc/mounts") as mounts:
        return any(line.split()[1] == path for line in mounts)


def unmount_leftovers(prefix):
    """Unmounts the file systems under `prefix` whose simulator is gone (a nemesis killed before
    it unmounted): their folder answers ENOTCONN. Those of a nemesis still running stay."""
    with open("/proc/mounts") as mounts:
        points = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
    for point in points:
        try:
            os.stat(point)
        except OSError as error:
            if error.errno == errno.ENOTCONN:
                subprocess.run(["fusermount", "-uz", point], capture_output=True)


class PowerSupply:
    def __init__(self, root, folder, log):
        self.root = root  # where the device's disks are kept
        self.folder = folder  # the device's folder: the mount point
        self.log = log
        self.disks = 0
        self.fs = None
        self.boot_file = None  # None until the first cut: the machine's own boot

    def start(self):
        os.makedirs(self.root, mode=0o700)
        backing = os.path.join(self.root, "disk-0")
        os.mkdir(backing, mode=0o700)
        self.mount(backing)

    def mount(self, backing):
        """Mounts `backing` on the device's folder; all of it is on the platter (at boot)."""
        self.disks += 1
        durable = os.path.join(self.root, f"disk-{self.disks}-durable")
        self.state = os.path.join(self.root, f"disk-{self.disks}-pending.jsonl")
        shutil.copytree(backing, durable, symlinks=True)
        self.durable = durable
        log = open(os.path.join(self.root, f"disk-{self.disks}.log"), "w")
        self.fs = subprocess.Popen(
            [sys.executable, os.path.join(SIMULATOR, "powercut_fs.py"), backing, durable, self.folder, self.state],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        deadline = time.time() + 10
        while not mounted(self.folder):
            if self.fs.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"the power-cut file system did not mount on {self.folder}: see {log.name}")
            time.sleep(0.01)

    def unmount(self):
        """Unmounts (the kernel hands every dirty page over as writes first), waiting for a busy
        mount to settle; lazily if it will not."""
        if self.fs is None:
            return
        for _ in range(50):
            if subprocess.run(["fusermount", "-u", self.folder], capture_output=True).returncode == 0:
                break
            time.sleep(0.2)
        else:
            subprocess.run(["fusermount", "-uz", self.folder], capture_output=True)
        try:
            self.fs.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.fs.kill()
            self.fs.wait()
        self.fs = None

    def cut(self, rng):
        """The power goes (the caller stopped the device's processes) and the device boots again:
        (pending pages, pages the cut kept)."""
        sys.path.insert(0, SIMULATOR)
        from powercut_fs import cut_image  # fusepy: installed by Tools/nemesis when a cut is planned

        self.unmount()
        if not os.path.exists(self.state):
            # The simulator wrote down no pending write: the cut keeps only what was flushed.
            open(self.state, "w").close()
        after = os.path.join(self.root, f"disk-{self.disks}-after-cut")
        pages, kept = cut_image(self.durable, self.state, after, rng)
        self.boot_file = os.path.join(self.root, f"boot-{self.disks}")
        with open(self.boot_file, "w") as f:
            f.write(str(uuid.uuid4()) + "\n")
        self.mount(after)
        return pages, kept

    def booted_again(self):
        """The prefix of the device's commands after a cut: they run on the new boot."""
        return ["unshare", "-m", "sh", "-c", BOOTED_AGAIN, self.boot_file] if self.boot_file else []

    def close(self):
        self.unmount()
