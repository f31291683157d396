"""The world a history runs in: the real servers, the real tools, devices as folders.

One server on the embedded store (or two instances on one PostgreSQL database), reached by the
devices through `Proxy`; three accounts, among them two whose names are equal Swift strings
(`Kim`, and `\u212Aim` with KELVIN SIGN, stored as a version before the name rules did); five
devices; five suites, two of them end-to-end encrypted, two with names that are equal Swift
strings (`caf\u00e9` and `cafe\u0301`). Every command's exit status is checked: a signal the
nemesis did not send, or a status no tool documents, is a crash.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request


ACCOUNTS = ["ana", "Kim", "\u212aim"]  # the third: a look-alike stored before the name rules
LEGACY = {2}
DEVICES = [0, 0, 1, 1, 2]  # each device's account
# (owner, name, encrypted, home device)
SUITES = [
    (0, "family", False, 0),
    (0, "caf\u00e9", False, 0),
    (0, "cafe\u0301", True, 1),
    (1, "house", True, 2),
    (2, "house", False, 4),
]
KEYS = ["sound", "volume", "caf\u00e9", "cafe\u0301", "theme"]
DOCUMENTED_EXITS = {0, 1, 3, 130}


class Failure(Exception):
    """A broken promise: what was promised, and what happened."""


class Skip(Exception):
    """The operation does not apply to the world as it is now."""


def now_ms():
    return int(time.time() * 1000)


class Result:
    def __init__(self, argv, rc, out, err):
        self.argv, self.rc, self.out, self.err = argv, rc, out, err

    def __repr__(self):
        return f"{_show(self.argv)} -> {self.rc}\n{tail(self.out, 800)}\n{tail(self.err, 1500)}"


def tail(text, limit=300):
    """The end of a command's output for a log line: at most `limit` characters, begun at a line or
    a word (never in the middle of one), "…" where it was cut, "(nothing)" for no output."""
    text = text.strip()
    if not text:
        return "(nothing)"
    if len(text) <= limit:
        return text
    cut = text[-limit:]
    line = cut.find("\n")
    word = cut.find(" ")
    start = line + 1 if 0 <= line < limit // 2 else word + 1 if 0 <= word < limit // 4 else 0
    return "…" + cut[start:]


def _show(argv):
    # Not ASCII: escaped (ascii()), so that look-alike names (KELVIN SIGN, NFD) are told apart.
    return " ".join(a if re.fullmatch(r"[\w@%+=:,./-]+", a, re.ASCII) else ascii(a) for a in argv)


class Tools:
    """Runs the real executables and checks that none crashes."""

    def __init__(self, bin_dir, log):
        self.bin_dir = bin_dir
        self.log = log
        self.crashes = []
        self.started = []  # every background command, to stop what a failed history left running
        self.power = {}  # a device's folder -> its PowerSupply (power.py), for the folders on one

    def path(self, name):
        return os.path.join(self.bin_dir, name)

    def env(self):
        env = dict(os.environ)
        env.pop("GROUPDEFAULTS_DIR", None)
        # A wrong wall clock leaves the monotonic clock alone (libfaketime's faked one stopped the
        # tools' sleeps: a join under `faketime -f +45s` never polled for its keys again).
        env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
        return env

    # The sync tool's verbs that wait for another device or run on (a handover, a pairing, `run`):
    # libfaketime's faked timers stopped their waits (a join under `faketime -f +200s` never polled
    # for its keys again), so they run on the true clock; the verbs that stamp or judge stamps (the
    # core tool's writes, `sync`, `status`) run on the device's.
    WAITING = {"share", "configure", "pair", "run"}

    def argv(self, tool, args, offset_s):
        """The command line; on a device whose clock is off, under `faketime` (its wrapper: with
        libfaketime preloaded by hand the tools saw no arguments)."""
        waits = tool == "groupdefaults-sync" and args and args[0] in self.WAITING
        clock = ["faketime", "-f", f"{offset_s:+d}s"] if offset_s and not waits else []
        # A command on a device whose power was cut runs on the device's new boot.
        booted = next(
            (
                supply.booted_again() for folder, supply in self.power.items()
                if any(str(a) == folder or str(a).startswith(folder + os.sep) for a in args)
            ),
            [],
        )
        return [*booted, *clock, self.path(tool), *args]

    def run(self, tool, *args, offset_s=0, timeout=120, stdin=None):
        argv = self.argv(tool, args, offset_s)
        # Under `faketime` with the clock behind, a sleep waits as much longer (Swift's
        # ContinuousClock reads CLOCK_BOOTTIME, which libfaketime moves back too): a command that
        # sleeps to retry (the network cut) is stopped after 30 s and counts as interrupted, not
        # as hung; the true clock's runs are where a hang is a failure.
        behind = offset_s < 0 and "faketime" in argv
        if behind:
            timeout = 30
        # In a session of its own: a command that hangs is killed with its group, `faketime`'s child
        # included (killing the wrapper alone left the tool running).
        process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=self.env(), start_new_session=True,
        )
        self.started.append(process)  # stopped with the history if the nemesis is
        try:
            out, err = process.communicate(input=stdin, timeout=timeout)
            result = Result(argv, process.returncode, out, err)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
            result = Result(argv, "timeout", _text(out), _text(err))
            if not behind:
                self.crashes.append(f"hung for {timeout} s: {result!r}")
        if offset_s and "faketime: sem_open" in result.err and not getattr(self, "retrying", False):
            # The wrapper names its shared memory after its process id; one it left when killed
            # stops a later wrapper of the same id: remove those of wrappers gone, and run again.
            clear_faketime_leftovers()
            self.retrying = True
            try:
                return self.run(tool, *args, offset_s=offset_s, timeout=timeout, stdin=stdin)
            finally:
                self.retrying = False
        self.check(result)
        clock = f"[clock {offset_s:+d} s] " if offset_s else ""
        said = f": {tail(result.err.strip().splitlines()[-1], 300)}" if result.rc != 0 and result.err.strip() else ""
        self.log(f"  $ {clock}{_show([tool, *args])} -> {result.rc}{said}")
        return result

    def start(self, tool, *args, offset_s=0, log_path, interrupt_at=None):
        """A background command; `interrupt_at` ("step@SIGKILL") makes it signal itself at one of
        its named steps (GROUPDEFAULTS_INTERRUPT_AT)."""
        log = open(log_path, "a")
        env = self.env()
        if interrupt_at:
            env["GROUPDEFAULTS_INTERRUPT_AT"] = interrupt_at
        process = subprocess.Popen(
            self.argv(tool, args, offset_s), stdout=log, stderr=subprocess.STDOUT, env=env, text=True,
            start_new_session=True,
        )
        process.log_path = log_path
        process.argv = [tool, *args]
        process.signalled = None
        if interrupt_at:
            process.signalled = signal.SIGINT if interrupt_at.endswith("@SIGINT") else signal.SIGKILL
        self.started.append(process)
        return process

    def stop_all(self):
        for process in self.started:
            if process.poll() is None:
                self.signal(process, signal.SIGKILL)
                process.wait()

    @staticmethod
    def signal(process, sig):
        """Signals a background command, and `faketime`'s child with it (its process group)."""
        if process.poll() is None:
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                pass
            # A SIGKILL already sent is how it ends, whatever follows it (a process killed a
            # moment ago is not reaped yet: a Ctrl-C sent after it changes nothing).
            # (A foreground command, `run`'s, has no mark; it is stopped only with its history.)
            if getattr(process, "signalled", None) != signal.SIGKILL:
                process.signalled = sig

    def check(self, result, sent=None):
        rc = result.rc
        if rc == "timeout":
            return
        if "\nUSAGE: " in "\n" + result.out + result.err and "--help" not in result.argv:
            self.crashes.append(f"the command line did not parse (the tool printed its usage): {result!r}")
        crashed = "Fatal error" in result.err or "Segmentation fault" in result.err
        if rc < 0 and -rc != sent:
            crashed = True
        if rc >= 0 and rc not in DOCUMENTED_EXITS:
            crashed = True
        if crashed:
            self.crashes.append(f"crashed or undocumented exit: {result!r}")

    def finish(self, process, sent=None, timeout=30):
        """Waits for a background command; its output and exit status (checked)."""
        try:
            rc = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stacks = _stacks(process, process.log_path + ".stacks")
            self.signal(process, signal.SIGKILL)
            rc = process.wait()
            self.crashes.append(f"did not end within {timeout} s: {_show(process.argv)}{stacks}")
        # Under `faketime` the tool is the wrapper's child: wait for the whole group to end.
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                os.killpg(process.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.02)
        with open(process.log_path) as f:
            out = f.read()
        result = Result(process.argv, rc, out, out)
        self.check(result, sent=sent if sent is not None else process.signalled)
        return result


def _stacks(process, path):
    """The threads' stacks of a command that does not end (its process group, by gdb, where gdb is
    installed), written to `path`: what it waited on, for the one who reads the failure."""
    if shutil.which("gdb") is None:
        return ""
    pids = subprocess.run(["pgrep", "-g", str(process.pid)], capture_output=True, text=True).stdout.split()
    with open(path, "w") as out:
        for pid in pids:
            taken = subprocess.run(
                ["gdb", "-batch", "-p", pid, "-ex", "thread apply all bt 40"], capture_output=True, text=True, timeout=120,
            )
            out.write(f"== process {pid}\n{taken.stdout}{taken.stderr}\n")
    return f" (its stacks: {path})"


def clear_faketime_leftovers():
    """Removes the shared memory and semaphores of `faketime` wrappers no longer running."""
    for name in os.listdir("/dev/shm"):
        match = re.fullmatch(r"(?:sem\.)?faketime_(?:shm|sem)_(\d+)", name)
        if match and not os.path.exists(f"/proc/{match.group(1)}"):
            try:
                os.remove(os.path.join("/dev/shm", name))
            except OSError:
                pass


def _text(data):
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Servers:
    """The server: one on the embedded store, or two instances on one PostgreSQL database."""

    def __init__(self, tools, root, postgres_url=None):
        self.tools = tools
        self.root = root
        self.postgres_url = postgres_url
        self.data_dir = os.path.join(root, "server")
        self.ports = [free_port()] if postgres_url is None else [free_port(), free_port()]
        self.processes = [None] * len(self.ports)
        self.logs = [os.path.join(root, f"server{i}.log") for i in range(len(self.ports))]

    def storage(self):
        return ["--postgres-url", self.postgres_url] if self.postgres_url else ["--data-dir", self.data_dir]

    def start(self, index=None):
        self.check_running()
        for i in range(len(self.ports)) if index is None else [index]:
            if self.processes[i] is not None and self.processes[i].poll() is None:
                continue
            # The log holds what earlier runs of this server said: read only what this one says.
            seen = os.path.getsize(self.logs[i]) if os.path.exists(self.logs[i]) else 0
            process = self.tools.start(
                "groupdefaults-server", "serve", *self.storage(), "--port", str(self.ports[i]),
                "--history", "1000", "--heartbeat", "1", "--max-wait", "5", "--rate-limit", "1000",
                "--log-level", "warning", log_path=self.logs[i],
            )
            self.processes[i] = process
            deadline = time.time() + 60
            while True:
                if process.poll() is not None:
                    raise Failure(f"the server did not start: {tail(open(self.logs[i]).read(), 2000)}")
                with open(self.logs[i]) as log:
                    log.seek(seen)
                    said = log.read()
                if f":{self.ports[i]}" in said:
                    break
                if time.time() > deadline:
                    raise Failure("the server did not say it listens within 60 s")
                time.sleep(0.05)

    def check_running(self):
        """A server that ended without the nemesis stopping it crashed (its exit status and output
        checked once, as a crash)."""
        for process in self.processes:
            if process is not None and process.poll() is not None and not getattr(process, "stopped", False):
                process.stopped = True
                result = self.tools.finish(process)
                self.tools.crashes.append(f"the server ended by itself ({result.rc}): {tail(result.out, 600)}")

    def stop(self, index=None, sig=signal.SIGTERM):
        self.check_running()
        for i in range(len(self.ports)) if index is None else [index]:
            process = self.processes[i]
            if process is None or process.poll() is not None:
                continue
            process.stopped = True
            self.tools.signal(process, sig)
            result = self.tools.finish(process, sent=sig)
            if sig == signal.SIGTERM and result.rc != 0:
                self.tools.crashes.append(f"the server did not stop cleanly at SIGTERM: {result.rc}")

    def command(self, *args, timeout=120):
        return self.tools.run("groupdefaults-server", *args, *self.storage(), timeout=timeout)

    def http(self, method, path, token, body=None):
        """One request straight to a server (not through the proxy): (status, JSON or text)."""
        port = next((p for p, proc in zip(self.ports, self.processes) if proc and proc.poll() is None), None)
        if port is None:
            raise Failure("no server runs for a probe")
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
        request.add_header("Authorization", f"Bearer {token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                status, text = answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read().decode()
        except urllib.error.URLError as error:
            alive = [proc.poll() for proc in self.processes]
            log = tail(open(self.logs[self.ports.index(port)]).read(), 1500)
            raise Failure(f"{method} {path}: {error.reason} (servers' exit statuses {alive}); the server's log ends: {log}")
        try:
            payload = json.loads(text)
        except ValueError:
            payload = text
        if status >= 500 and status != 503:
            raise Failure(f"{method} {path}: {status} {text[:300]}")
        return status, payload


def quote(name):
    return urllib.parse.quote(name, safe="")


class Device:
    def __init__(self, index, account, folder):
        self.index = index
        self.account = account
        self.folder = folder
        self.token_file = os.path.join(folder, "token")
        self.offset_s = 0  # the clock's offset from true time (faketime)
        self.local = {}  # suite id -> local suite name, while configured
        self.left = {}  # suite id -> local name of a copy that stopped syncing
        self.of_deleted_owner = set()  # suite ids of copies made before their owner's account was deleted
        self.runs = {}  # suite id -> `run` process
        self.retired = False
        self.generation = 0

    def clock_ms(self):
        return now_ms() + self.offset_s * 1000


class Suite:
    """One logical suite: an owner's suite name, in one incarnation of the owner's account."""

    def __init__(self, index, owner, name, encrypted, home):
        self.index = index
        self.owner = owner
        self.name = name
        self.encrypted = encrypted
        self.home = home
        self.generation = 0
        self.members = {}  # account -> role, as the nemesis made them
        self.holds_keys = set()  # accounts whose devices got the keys (encrypted)
        self.removed = {}  # account -> when it was removed holding the keys (encrypted), ms
        self.removed_op = {}  # account -> the operation it was last removed in (or learnt to be)
        self.pinned = set()  # keys pinned for the members, as the nemesis made them
        self.unsure_pins = set()  # keys whose pin a refused or interrupted pin/unpin left unknown

    @property
    def id(self):
        return (self.index, self.generation)

    @property
    def label(self):
        """The suite in a message, owner first, escaped: look-alike names print apart."""
        return ascii(f"{ACCOUNTS[self.owner]}/{self.name}")

    def local_name(self, device):
        return self.name if device.account == self.owner else f"m{self.index}"

