"""One history: a world set up, a list of operations carried out on it, then every promise checked.

An operation is a small dict (`{"kind": "write", "device": 2, "suite": 1, "key": "sound"}`), drawn
from the seed without looking at the world, so that a history is a script that replays and can be
shrunk by leaving operations out. One that does not apply to the world as it is then (a `leave`
by a device that is no member) changes nothing and is logged as skipped.
"""
import json
import os
import random
import re
import signal
import subprocess
import time

from . import promises
from .model import Model
from .power import PowerSupply
from .proxy import Proxy
from .world import (
    ACCOUNTS, DEVICES, KEYS, LEGACY, SUITES, Device, Failure, Servers, Skip, Suite, Tools, clear_faketime_leftovers, now_ms, quote, tail,
)

# Operation kinds and their weights.
WEIGHTS = {
    "write": 20, "delete": 6, "transaction": 3, "burst": 3,
    "sync": 14, "run": 3, "stop-run": 2,
    "share": 5, "join-other": 3, "unshare": 3, "leave": 2, "rotate-key": 1, "pin": 2,
    "revoke-token": 2, "new-token": 2, "revoke-device": 1,
    "backup": 2, "restore": 3, "reset-suite": 1, "delete-account": 1,
    "kill-server": 2, "clock": 2, "interrupt": 8, "cut-network": 2, "power-cut": 2,
}
# The device whose folder is on the power-cut file system (in a history with a power cut): ana's
# second device, the home of an encrypted suite and a member's copy of two plain ones.
POWER_CUT_DEVICE = 1
# The commands an interruption stops, and their weights: the handovers of keys (a join, a share,
# a pairing) are where a stopped command can leave a member without keys.
INTERRUPTIBLE = {
    "sync": 1, "join": 3, "share": 2, "unshare": 1, "leave": 1, "pair": 2, "rotate-key": 1, "restore": 1, "delete-account": 1,
}
# The named steps of each command (the tools' interruption points, GROUPDEFAULTS_INTERRUPT_AT):
# half the interruptions land on one of them, the others after a random time. `pair.` steps are
# the pairing device's, `configure-pairing.` ones the new device's.
STEPS = {
    "join": [
        "configure-invitation.accepting", "configure-invitation.answered", "configure-invitation.accepted",
        "configure-invitation.keys-written", "configure-invitation.joined",
    ],
    "share": ["share.invitation-made", "share.waiting"],
    "unshare": ["unshare.removed"],
    "leave": ["leave.left"],
    "pair": [
        "pair.created", "pair.claimed", "pair.handed-over", "configure-pairing.claimed", "configure-pairing.keys-received",
        "configure-pairing.keys-written", "configure-pairing.token-written",
    ],
    "rotate-key": [
        "rotate-key.pulled", "rotate-key.resealed", "rotate-key.bag-signed", "rotate-key.bag-stored",
        "rotate-key.keys-written", "rotate-key.synced",
    ],
    "restore": ["restore.prepared", "restore.staged", "restore.renamed"],
    "delete-account": [
        "accounts-delete.confirmed", "accounts-delete.erase-staged", "accounts-delete.erase-marked",
        "accounts-delete.erase-renamed", "accounts-delete.deleted",
    ],
}
ENCRYPTED = [index for index, spec in enumerate(SUITES) if spec[2]]


def generate(seed, count, kinds):
    rng = random.Random(seed)
    names = [k for k in WEIGHTS if k in kinds]
    weights = [WEIGHTS[k] for k in names]
    ops = []
    for _ in range(count):
        kind = rng.choices(names, weights)[0]
        op = {
            "kind": kind,
            "device": rng.randrange(len(DEVICES)),
            "suite": rng.randrange(len(SUITES)),
            "key": rng.choice(KEYS),
            "account": rng.randrange(len(ACCOUNTS)),
        }
        if kind == "share":
            op["role"] = rng.choice(["read", "write", "write", "admin"])
        if kind in ("restore", "interrupt"):
            op["backup"] = rng.randrange(1 << 16)
        if kind == "clock":
            op["offset"] = rng.choice([0, 0, 45, 200, -200, -3600])
        if kind == "interrupt":
            op["command"] = rng.choices(list(INTERRUPTIBLE), list(INTERRUPTIBLE.values()))[0]
            op["signal"] = rng.choice(["INT", "KILL"])
            op["after_ms"] = rng.randrange(0, 400)
            op["role"] = rng.choice(["read", "write"])
            steps = STEPS.get(op["command"], [])
            op["step"] = rng.choice(steps) if steps and rng.random() < 0.5 else None
            if op["command"] in ("join", "share") and rng.random() < 0.5:
                op["suite"] = rng.choice(ENCRYPTED)
        if kind == "cut-network":
            op["mode"] = rng.choice(["drop", "stall"])
            op["for"] = rng.randrange(1, 5)
        if kind == "kill-server":
            op["server"] = rng.randrange(2)
        if kind == "power-cut":
            op["cut"] = rng.randrange(1 << 16)
        ops.append(op)
    return ops


def _whole(value, low, high=None):
    return type(value) is int and value >= low and (high is None or value < high)


# Each field an operation may have: whether a value is one the nemesis draws (generate) and runs.
FIELDS = {
    "kind": lambda v: v in WEIGHTS,
    "device": lambda v: _whole(v, 0, len(DEVICES)),
    "suite": lambda v: _whole(v, 0, len(SUITES)),
    "key": lambda v: v in KEYS,
    "account": lambda v: _whole(v, 0, len(ACCOUNTS)),
    "role": lambda v: v in ("read", "write", "admin"),
    "backup": lambda v: _whole(v, 0),
    "offset": lambda v: type(v) is int,
    "command": lambda v: v in INTERRUPTIBLE,
    "signal": lambda v: v in ("INT", "KILL"),
    "after_ms": lambda v: _whole(v, 0),
    "step": lambda v: v is None or isinstance(v, str),
    "mode": lambda v: v in ("drop", "stall"),
    "for": lambda v: _whole(v, 1),
    "server": lambda v: _whole(v, 0, 2),
    "cut": lambda v: _whole(v, 0),
}
# The fields each kind needs besides kind, device, suite, key and account.
NEEDS = {
    "share": ["role"], "restore": ["backup"], "clock": ["offset"],
    "interrupt": ["backup", "command", "signal", "after_ms", "role", "step"],
    "cut-network": ["mode", "for"], "kill-server": ["server"], "power-cut": ["cut"],
}


def invalid(op):
    """Why `op` (from a history file, perhaps edited by hand) is not an operation the nemesis draws,
    or None: each field of the kind present, known, and of a value `generate` could have drawn."""
    if not isinstance(op, dict):
        return f"{json.dumps(op, ensure_ascii=False)} is not an object"
    if op.get("kind") not in WEIGHTS:
        return f"kind {op.get('kind')!r} is not one of {', '.join(WEIGHTS)}"
    for field in ["kind", "device", "suite", "key", "account", *NEEDS.get(op["kind"], [])]:
        if field not in op:
            return f"a {op['kind']} operation needs \"{field}\""
    for field, value in op.items():
        if field not in FIELDS:
            return f"unknown field \"{field}\""
        if not FIELDS[field](value):
            return f"\"{field}\": {json.dumps(value, ensure_ascii=False)} is not one the nemesis draws"
    if op.get("step") is not None and op["step"] not in STEPS.get(op.get("command"), []):
        return f"\"step\": {op['step']!r} is not a step of {op.get('command')!r}"
    return None


class History:
    def __init__(self, root, bin_dir, backend, postgres_url, verbose):
        self.root = root
        self.lines = []
        self.verbose = verbose
        self.tools = Tools(bin_dir, self.log)
        self.servers = Servers(self.tools, root, postgres_url)
        self.proxy = Proxy(self.servers.ports)
        self.model = Model()
        self.devices = [Device(i, a, os.path.join(root, f"d{i}")) for i, a in enumerate(DEVICES)]
        self.suites = [Suite(i, *spec) for i, spec in enumerate(SUITES)]
        self.accounts_alive = set(range(len(ACCOUNTS)))
        self.backups = []
        self.audit_expected = []  # (act, account) the server must have recorded
        self.cut_left = 0
        self.op_index = -1
        self.files = 0
        self.power = None
        self.revoked_tokens = []  # (device, token, by what): each must be refused to the end

    def log_file(self, what):
        self.files += 1
        return os.path.join(self.root, f"{what}-{self.op_index}-{self.files}.log")

    def log(self, line):
        self.lines.append(line)
        if self.verbose:
            print(line, flush=True)

    # The world.

    def set_up(self):
        clear_faketime_leftovers()
        for device in self.devices:
            os.makedirs(device.folder, mode=0o700)
        if any(op["kind"] == "power-cut" for op in self.ops):
            device = self.devices[POWER_CUT_DEVICE]
            self.power = PowerSupply(os.path.join(self.root, "power"), device.folder, self.log)
            self.power.start()
            self.tools.power[device.folder] = self.power
        self.servers.start()
        for device in self.devices:
            self.new_token(device, first=True)
        for suite in self.suites:
            self.create_suite(suite)
        # The world's sharing: each account's other device, and members of each role.
        self.op_index = -1
        self.current = {"signal": "INT", "after_ms": 0}
        for device, suite in [(1, 0), (1, 1), (0, 2), (3, 3)]:
            self.join_other(self.devices[device], self.suites[suite])
        for suite, account, role in [(0, 1, "write"), (3, 0, "read"), (4, 0, "admin"), (1, 2, "write")]:
            s = self.suites[suite]
            if not self.share_and_join(s, self.owner_device(s), self.joiner(s, account), role):
                raise Failure(f"the world's sharing failed: {ascii(ACCOUNTS[account])} in {ascii(s.name)}")
        # The operator's nightly backup: a restore may bring the world back to before everything
        # the history changes (which authority must survive).
        self.op_backup({})

    def new_token(self, device, first=False):
        account = ACCOUNTS[device.account]
        if device.account in LEGACY:
            result = self.tools.run(
                "GroupDefaultsLegacyStore", "token", *self.servers.storage(), account, f"d{device.index}"
            )
        else:
            result = self.servers.command(
                "token", "create", "--account", account, "--device", f"d{device.index}", *(["--create"] if first else [])
            )
            if result.rc == 0:
                self.audit_expected.append(("token-create", account))
        if result.rc != 0:
            raise Failure(f"a token for {ascii(account)} was refused: {result!r}")
        device.tokens_given = getattr(device, "tokens_given", []) + [result.out.strip()]
        files = {device.token_file} | set(getattr(device, "token_files", {}).values())
        for path in files:
            temporary = path + ".new"
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.write(fd, result.out.encode())
            os.close(fd)
            os.replace(temporary, path)

    def create_suite(self, suite):
        """The owner's home device makes the suite: a first value, configure, a first sync."""
        if self.cut_left > 0:
            self.cut_left = 0
            self.proxy.set_mode("up")
            self.log("  the network is back (for the suite made again)")
        home = self.devices[suite.home]
        name = suite.name
        self.local_write(home, suite, name, "sound", f"init{suite.index}.{suite.generation}", op=-1, force=True)
        args = ["configure", "--directory", home.folder, name, "--server", self.proxy.url, "--token-file", home.token_file]
        if suite.encrypted:
            args.append("--encrypt")
        result = self.sync_tool(home, *args)
        if result.rc != 0:
            raise Failure(f"configuring {ascii(name)} on its home device failed: {result!r}")
        home.local[suite.index] = name
        home.of_deleted_owner.discard(suite.index)
        self.model.rejoined(home.index, suite.id)
        for w in self.model.of(home.index, suite.id):
            w.standing = "certain"
        suite.members = {}
        suite.holds_keys = {suite.owner}
        suite.removed = {}
        suite.removed_op = {}
        self.sync(home, suite)

    # Running the tools on a device.

    def sync_tool(self, device, *args, timeout=120):
        return self.tools.run("groupdefaults-sync", *args, *self.answer_timeout(args), offset_s=device.offset_s, timeout=timeout)

    @staticmethod
    def answer_timeout(args):
        """A network that swallows requests costs --answer-timeout a request: 8 s, not 30, on loopback."""
        return [] if args[0] == "unconfigure" else ["--answer-timeout", "8"]

    def local_write(self, device, suite, local, key, value, op, force=False):
        start = device.clock_ms()
        if value is None:
            result = self.tools.run("groupdefaults", "delete", "--directory", device.folder, local, key, offset_s=device.offset_s)
        else:
            result = self.tools.run("groupdefaults", "write", "--directory", device.folder, local, key, value, offset_s=device.offset_s)
        end = device.clock_ms()
        if result.rc != 0:
            if value is None:
                return None  # nothing to delete: nothing written
            raise Failure(f"a local write failed: {result!r}")
        return self.model.write(op, device.index, suite.id, key, value, start, end, self.standing(device, suite, force, key))

    def standing(self, device, suite, force=False, key=None):
        if force:
            return "certain"
        if suite.index not in device.local:
            return "outsider"  # a copy that no longer syncs
        role = self.role(device.account, suite)
        if role in ("owner", "write", "admin"):
            if role != "owner" and key in suite.pinned:
                return "outsider"  # docs/guide/sharing.md: a member's write of a pinned key never reaches the suite
            if role != "owner" and key in suite.unsure_pins:
                return "maybe"
            return "certain"
        return "outsider"

    def role(self, account, suite):
        if account not in self.accounts_alive:
            return None
        if account == suite.owner:
            return "owner"
        return suite.members.get(account)

    def sync(self, device, suite):
        local = device.local.get(suite.index)
        if local is None:
            raise Skip("not configured")
        result = self.sync_tool(device, "sync", "--directory", device.folder, local)
        running = suite.index in device.runs
        self.model.pushed(device.index, suite.id, surely=result.rc == 0 and not running)
        return result

    def copy(self, device, suite):
        """The device's copy of the suite, synced or not: (local name, syncing?)."""
        if suite.index in device.local:
            return device.local[suite.index], True
        if suite.index in device.left:
            return device.left[suite.index], False
        return None, False

    def owner_device(self, suite, configured=True):
        for device in self.devices:
            if device.account == suite.owner and not device.retired and (not configured or suite.index in device.local):
                return device
        return None

    # Operations.

    def run_op(self, index, op):
        self.op_index = index
        self.current = op
        kind = op["kind"]
        self.log(f"op {index}: {json.dumps(op, ensure_ascii=False)}")
        started = time.time()
        try:
            getattr(self, "op_" + kind.replace("-", "_"))(op)
        except Skip as skip:
            self.log(f"  skipped: {skip}")
        if time.time() - started > 5:
            self.log(f"  took {time.time() - started:.0f} s")
        if self.cut_left > 0:
            self.cut_left -= 1
            if self.cut_left == 0:
                self.proxy.set_mode("up")
                self.log("  the network is back")
        promises.each_step(self)

    def pick(self, op):
        """The operation's device and the first of its copies from the operation's suite on."""
        device = self.devices[op["device"]]
        if device.retired:
            raise Skip("retired device")
        for step in range(len(self.suites)):
            suite = self.suites[(op["suite"] + step) % len(self.suites)]
            local, _ = self.copy(device, suite)
            if local is not None:
                return device, suite, local
        raise Skip("no copy of any suite")

    def op_write(self, op):
        device, suite, local = self.pick(op)
        self.local_write(device, suite, local, op["key"], f"w{self.op_index}", self.op_index)

    def op_delete(self, op):
        device, suite, local = self.pick(op)
        self.local_write(device, suite, local, op["key"], None, self.op_index)

    def op_transaction(self, op):
        device, suite, local = self.pick(op)
        values = {key: {"string": f"w{self.op_index}.{n}"} for n, key in enumerate(KEYS)}
        start = device.clock_ms()
        result = self.tools.run(
            "groupdefaults", "import", "--directory", device.folder, local, "-",
            offset_s=device.offset_s, stdin=json.dumps({"dictionary": values}),
        )
        end = device.clock_ms()
        if result.rc != 0:
            raise Failure(f"an import failed: {result!r}")
        for key, value in values.items():
            self.model.write(self.op_index, device.index, suite.id, key, value["string"], start, end, self.standing(device, suite, key=key))

    def op_burst(self, op):
        """Three processes write at once."""
        device, suite, local = self.pick(op)
        start = device.clock_ms()
        processes = []
        for n, key in enumerate(KEYS[:3]):
            value = f"w{self.op_index}.{n}"
            path = os.path.join(self.root, f"burst-{self.op_index}-{n}.log")
            processes.append((key, value, self.tools.start(
                "groupdefaults", "write", "--directory", device.folder, local, key, value,
                offset_s=device.offset_s, log_path=path,
            )))
        for key, value, process in processes:
            result = self.tools.finish(process)
            if result.rc != 0:
                raise Failure(f"a write beside others failed: {result!r}")
        end = device.clock_ms()
        for key, value, _ in processes:
            self.model.write(self.op_index, device.index, suite.id, key, value, start, end, self.standing(device, suite, key=key))

    def op_sync(self, op):
        device, suite, _ = self.pick(op)
        self.sync(device, suite)

    def op_run(self, op):
        device, suite, _ = self.pick(op)
        if suite.index not in device.local or suite.index in device.runs:
            raise Skip("not configured, or running")
        if device.offset_s:
            # `run` would run on the true clock (world.py: WAITING) beside writes on the wrong one:
            # two clocks in one device, which no device has.
            raise Skip("the device's clock is off")
        self.start_run(device, suite)

    def start_run(self, device, suite):
        log = os.path.join(self.root, f"run-d{device.index}-s{suite.index}.log")
        device.runs[suite.index] = self.tools.start(
            "groupdefaults-sync", "run", "--directory", device.folder, device.local[suite.index],
            offset_s=device.offset_s, log_path=log,
        )
        self.model.pushed(device.index, suite.id, surely=False)

    def op_stop_run(self, op):
        device = self.devices[op["device"]]
        suite = self.suites[op["suite"]]
        if suite.index not in device.runs:
            raise Skip("no run")
        self.stop_run(device, suite)

    def stop_run(self, device, suite, sig=signal.SIGTERM):
        process = device.runs.pop(suite.index)
        if process.poll() is None:
            self.tools.signal(process, sig)
        result = self.tools.finish(process)
        self.model.pushed(device.index, suite.id, surely=False)
        if sig == signal.SIGTERM and result.rc not in (0, -signal.SIGTERM):
            # `run` ends with 0 at SIGTERM; one that stopped by itself says why (a deleted account).
            self.log(f"  run ended with {result.rc}: {tail(result.out, 300)}")
        return result

    # Sharing.

    def joiner(self, suite, account):
        """A device of `account` to join `suite`: one whose copy was kept, else one with none."""
        candidates = [d for d in self.devices if d.account == account and not d.retired]
        for device in candidates:
            if suite.index in device.left:
                return device
        for device in candidates:
            if suite.index not in device.local:
                return device
        return None

    def outsider_of(self, op):
        """The operation's suite and the account its account number picks among the living ones
        that are neither its owner nor a member (an invitation that finds one more often than a
        random account would)."""
        suite = self.suites[op["suite"]]
        outsiders = [a for a in sorted(self.accounts_alive) if a != suite.owner and a not in suite.members]
        if not outsiders:
            raise Skip("every living account is the owner or a member")
        return suite, outsiders[op["account"] % len(outsiders)]

    def op_share(self, op):
        suite, account = self.outsider_of(op)
        if suite.owner not in self.accounts_alive:
            raise Skip("the owner's account was deleted")
        inviter = self.owner_device(suite)
        joiner = self.joiner(suite, account)
        if inviter is None or joiner is None:
            raise Skip("no device to invite from or to join with")
        self.share_and_join(suite, inviter, joiner, op["role"])

    def share_and_join(self, suite, inviter, joiner, role, interrupt=None):
        local = inviter.local[suite.index]
        log = self.log_file("share")
        share = self.tools.start(
            "groupdefaults-sync", "share", "--directory", inviter.folder, local, "--role", role, "--answer-timeout", "8",
            offset_s=inviter.offset_s, log_path=log, interrupt_at=self.step("share.") if interrupt == "share" else None,
        )
        code = self.await_line(share, log, r"code: ([0-9A-Z]{4}(?:-[0-9A-Z]{4}){6})")
        if code is None:
            result = self.tools.finish(share)
            if result.rc != 0:
                self.log(f"  share refused: {tail(result.out, 300)}")
                return False
            raise Failure(f"share printed no code: {result!r}")
        self.audit_expected.append(("invitation-create", ACCOUNTS[suite.owner]))
        name = suite.local_name(joiner)
        args = [
            "configure", "--directory", joiner.folder, "--invitation", code, "--server", self.proxy.url,
            "--token-file", joiner.token_file, "--as", name,
        ]
        if interrupt in ("join", "share"):
            joined = self.interrupted(joiner, args, interrupt, share)
        else:
            joined = self.sync_tool(joiner, *args).rc == 0
        if share.poll() is None and not suite.encrypted:
            share.wait(timeout=30)
        if share.poll() is None and not joined:
            # The joiner gave up (an error, the network cut): `share` would wait its 10 minutes for
            # it; its person stops it, as the README says (Ctrl-C revokes the invitation, or
            # removes an account that accepted without its keys).
            try:
                share.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.tools.signal(share, signal.SIGINT)
        result = self.tools.finish(share, timeout=60)
        if interrupt is None and result.rc != 0 and joined:
            self.log(f"  share ended with {result.rc}: {tail(result.out, 300)}")
        truth = self.membership(suite)
        if truth is None:
            return False
        if interrupt is None and joined and truth.get(ACCOUNTS[joiner.account]) != role:
            # The server's listing is not its own oracle: an invitation adds the role it offered.
            raise Failure(
                f"{ascii(ACCOUNTS[joiner.account])} joined {suite.label} by an invitation as {role}, and the owner's device lists {truth.get(ACCOUNTS[joiner.account])}"
            )
        if ACCOUNTS[joiner.account] in truth and not joined:
            if suite.encrypted:
                # README: a join stopped before the keys came leaves again (the same command again
                # after a crash; `share`'s Ctrl-C): no member is left without keys.
                raise Failure(
                    f"{ascii(ACCOUNTS[joiner.account])}'s join of {suite.label} did not finish, and the account is still a member"
                )
            # A plain suite's member whose join stopped after the acceptance: its devices join
            # with --shared-from, as another device of a member does.
            joiner.local.pop(suite.index, None)
            self.join_other(joiner, suite)
            joined = suite.index in joiner.local
        if ACCOUNTS[joiner.account] in truth:
            suite.members[joiner.account] = truth[ACCOUNTS[joiner.account]]
            self.audit_expected.append(("member-add", ACCOUNTS[suite.owner]))
            joiner.local[suite.index] = name
            joiner.of_deleted_owner.discard(suite.index)
            joiner.left.pop(suite.index, None)
            if suite.encrypted:
                suite.holds_keys.add(joiner.account)
            self.model.rejoined(joiner.index, suite.id)
            self.may_write_again(suite, joiner.account)
            return True
        return False

    def interrupted(self, device, args, which, share):
        """Runs the joiner's configure and interrupts it, or the inviter's share, as `op` says."""
        op = self.current
        sig = signal.SIGINT if op["signal"] == "INT" else signal.SIGKILL
        log = self.log_file("join")
        join = self.tools.start(
            "groupdefaults-sync", *args, *self.answer_timeout(args), offset_s=device.offset_s, log_path=log,
            interrupt_at=self.step("configure-invitation.") if which == "join" else None,
        )
        if op.get("step") is None:
            time.sleep(op["after_ms"] / 1000)
            victim = join if which == "join" else share
            if victim.poll() is None:
                self.tools.signal(victim, sig)
        if which == "share":
            # The joiner waits for keys that will not come (up to 10 minutes): its person gives up
            # after a while, with Ctrl-C, which leaves the suite again.
            try:
                join.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.tools.signal(join, signal.SIGINT)
        result = self.tools.finish(join, timeout=700)
        joined = result.rc == 0
        if which == "join" and sig == signal.SIGKILL:
            # After a crash, the same command again finishes the join or leaves the suite again; a
            # join killed once its work was done (its copy set up) is done, whatever it says then.
            again = self.sync_tool(device, *args)
            self.log(f"  the same command again: {again.rc}: {tail(again.err, 200)}")
            joined = joined or again.rc == 0 or self.syncs(device, args[args.index("--as") + 1])
        if which == "share" and share.poll() is not None:
            # After a crash of `share`, the next `invitations` on that device ends what it left.
            inviter = self.owner_device(self.suites[op["suite"]])
            if inviter is not None:
                self.sync_tool(inviter, "invitations", "--directory", inviter.folder, inviter.local[op["suite"]])
        elif share.poll() is None:
            self.tools.signal(share, signal.SIGINT)
        return joined

    def syncs(self, device, name):
        """Whether the local suite `name` on `device` is set up to sync (`status --json`)."""
        result = self.sync_tool(device, "status", "--directory", device.folder, name, "--json")
        try:
            return json.loads(result.out).get("synced") is True
        except ValueError:
            return False

    def await_line(self, process, log, pattern, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with open(log) as f:
                match = re.search(pattern, f.read())
            if match:
                return match.group(1)
            if process.poll() is not None:
                with open(log) as f:
                    match = re.search(pattern, f.read())
                return match.group(1) if match else None
            time.sleep(0.02)
        return None

    def membership(self, suite):
        """The suite's members as the owner's device lists them: {account: role}; when it cannot
        (its token revoked, the network cut), as the server's operator sees them (`accounts
        export` of each account: its memberships)."""
        owner = self.owner_device(suite)
        if owner is None:
            return None
        result = self.sync_tool(owner, "members", "--directory", owner.folder, owner.local[suite.index], "--json")
        if result.rc == 0:
            listed = json.loads(result.out)
            return {m["account"]: m["role"] for m in listed["members"] if m["role"] != "owner"}
        self.log(f"  members failed: {tail(result.err, 300)}")
        members = {}
        for account in sorted(self.accounts_alive):
            exported = self.servers.command("accounts", "export", ACCOUNTS[account])
            if exported.rc != 0:
                raise Failure(f"accounts export failed: {exported!r}")
            for m in json.loads(exported.out).get("memberships", []):
                if m["owner"] == ACCOUNTS[suite.owner] and m["suite"] == suite.name:
                    members[m["account"]] = m["role"]
        return members

    def op_join_other(self, op):
        """Another device of the owner or of a member joins: plain by token, encrypted by pairing."""
        device = self.devices[op["device"]]
        suite = self.suites[op["suite"]]
        if device.retired or suite.index in device.local or suite.index in device.left:
            raise Skip("retired, or has a copy")
        role = self.role(device.account, suite)
        if role is None:
            raise Skip("not a member")
        self.join_other(device, suite)

    def join_other(self, device, suite, interrupt=False):
        """Joins the device to a suite its account may sync: plain by its token, encrypted by
        pairing with a device of the account that holds the keys (also to pair a device again
        after `rotate-key`, which hands the new key to no other device)."""
        name = device.local.get(suite.index) or suite.local_name(device)
        shared = [] if device.account == suite.owner else ["--shared-from", f"{ACCOUNTS[suite.owner]}/{suite.name}"]
        if not suite.encrypted:
            result = self.sync_tool(
                device, "configure", "--directory", device.folder, name, "--server", self.proxy.url,
                "--token-file", device.token_file, *shared,
            )
        else:
            helper = next(
                (
                    d for d in self.devices
                    if d.account == device.account and suite.index in d.local and not d.retired and d is not device
                ),
                None,
            )
            if helper is None:
                raise Skip("no device of the account holds the keys")
            log = self.log_file("pair")
            pair = self.tools.start(
                "groupdefaults-sync", "pair", "--directory", helper.folder, helper.local[suite.index], "--answer-timeout", "8",
                offset_s=helper.offset_s, log_path=log, interrupt_at=self.step("pair.") if interrupt else None,
            )
            code = self.await_line(pair, log, r"pairing code: (\S+)")
            if code is None:
                self.log(f"  pair printed no code: {tail(self.tools.finish(pair).out, 300)}")
                return
            token_file = os.path.join(device.folder, f"pairing-{suite.index}-{self.files}.token")
            args = [
                "configure", "--directory", device.folder, name, "--server", self.proxy.url, "--pairing-code", code,
                "--token-file", token_file, "--device", f"d{device.index}", *shared,
            ]
            if interrupt:
                op = self.current
                configure = self.tools.start(
                    "groupdefaults-sync", *args, *self.answer_timeout(args), offset_s=device.offset_s, log_path=log + ".join",
                    interrupt_at=self.step("configure-pairing."),
                )
                if op.get("step") is None:
                    time.sleep(op["after_ms"] / 1000)
                    victim = pair if op["signal"] == "INT" else configure
                    sig = signal.SIGINT if op["signal"] == "INT" else signal.SIGKILL
                    if victim.poll() is None:
                        self.tools.signal(victim, sig)
                elif self.step("pair."):
                    # The pairing device stopped at its step: the new device waits for keys that
                    # may not come (up to 10 minutes); its person gives up with Ctrl-C.
                    while pair.poll() is None and configure.poll() is None:
                        time.sleep(0.02)
                    try:
                        configure.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        self.tools.signal(configure, signal.SIGINT)
                result = self.tools.finish(configure, timeout=700)
                if pair.poll() is None:
                    self.tools.signal(pair, signal.SIGINT)
            else:
                result = self.sync_tool(device, *args)
            self.tools.finish(pair, timeout=60)
            if result.rc == 0:
                device.token_files = getattr(device, "token_files", {})
                device.token_files[suite.index] = token_file
        if result.rc == 0:
            device.local[suite.index] = name
            device.of_deleted_owner.discard(suite.index)
            self.model.rejoined(device.index, suite.id)
        else:
            self.log(f"  joining failed: {tail(result.err, 300)}")

    def member_of(self, op):
        """The operation's suite and the member its account number picks among the suite's
        members (a removal that finds one more often than a random account would)."""
        suite = self.suites[op["suite"]]
        members = sorted(suite.members)
        if not members:
            raise Skip("no member")
        return suite, members[op["account"] % len(members)]

    def op_unshare(self, op):
        suite, account = self.member_of(op)
        self.unshare(suite, account)

    def unshare(self, suite, account, interrupt=None):
        owner = self.owner_device(suite)
        if owner is None:
            raise Skip("no owner device")
        args = ["unshare", "--directory", owner.folder, owner.local[suite.index], "--account", ACCOUNTS[account]]
        held = suite.encrypted and account in suite.holds_keys
        before = self.epoch(suite) if held else None
        result = None
        if interrupt:
            self.signal_midway(owner, args)
        else:
            result = self.sync_tool(owner, *args)
            if result.rc != 0:
                self.log(f"  unshare failed: {tail(result.err, 300)}")
            elif held and before is not None and self.epoch(suite) <= before:
                # docs/guide/sharing.md: `unshare` removes the member, then moves the suite to a new key epoch.
                raise Failure(f"unshare removed {ascii(ACCOUNTS[account])} from {suite.label} but left it at key epoch {before}")
        self.learn_membership(suite)
        if result is not None and result.rc == 0 and account in suite.members:
            raise Failure(f"unshare of {ascii(ACCOUNTS[account])} from {suite.label} ended with 0, and the account is still listed")

    def op_pin(self, op):
        """The owner's device pins the operation's key for the suite's members, or unpins it if
        pinned (docs/guide/sharing.md, "Pinned keys")."""
        suite = self.suites[op["suite"]]
        owner = self.owner_device(suite)
        if owner is None:
            raise Skip("no owner device")
        key = op["key"]
        verb = "unpin" if key in suite.pinned else "pin"
        result = self.sync_tool(owner, verb, "--directory", owner.folder, owner.local[suite.index], key)
        if result.rc != 0:
            # Refused, or its answer lost: whether the key is pinned is not known until a pin of it
            # succeeds again, and members' writes of it may or may not reach the suite.
            self.log(f"  {verb} failed: {tail(result.err, 300)}")
            suite.unsure_pins.add(key)
            self.model.pin_changed(suite.id, key, self.member_devices(suite))
            return
        pinned = {name.strip() for name in result.out.split(":", 1)[-1].split(",")} if "pinned for" in result.out else set()
        if key in pinned and verb == "unpin" or key not in pinned and verb == "pin":
            raise Failure(f"{verb} {ascii(key)} of {suite.label} ended with 0, and the pinned keys are {sorted(pinned)}")
        suite.unsure_pins.discard(key)
        if verb == "pin":
            suite.pinned.add(key)
            self.audit_expected.append(("key-pin", ACCOUNTS[suite.owner]))
        else:
            suite.pinned.discard(key)
            self.audit_expected.append(("key-unpin", ACCOUNTS[suite.owner]))
        self.model.pin_changed(suite.id, key, self.member_devices(suite))

    def member_devices(self, suite):
        """The devices of the suite's write and admin members that sync a copy of it."""
        return [
            device.index for device in self.devices
            if self.role(device.account, suite) in ("write", "admin") and suite.index in device.local
        ]

    def epoch(self, suite):
        """The suite's newest key epoch, as the server's key bags say (None when the owner's
        device's token is refused: its `unshare` is refused too)."""
        token = promises.owner_token(self, suite)
        status, bags = self.servers.http(
            "GET", f"/v1/suites/{quote(suite.name)}/key-bags?owner={quote(ACCOUNTS[suite.owner])}", token
        )
        if status in (401, 403):
            return None
        if status != 200:
            raise Failure(f"the owner's token reads no key bags of {suite.label}: {status} {bags}")
        return max((int(e) for e in bags.get("epochs", {})), default=1)

    def learn_membership(self, suite):
        """After an operation whose outcome is not known (refused, interrupted): what the owner's
        device lists, and what follows for the removed."""
        truth = self.membership(suite)
        if truth is None:
            return
        for account in list(suite.members):
            if ACCOUNTS[account] not in truth:
                self.removed(suite, account)
        for account, role in list(suite.members.items()):
            if truth.get(ACCOUNTS[account]) != role:
                suite.members[account] = truth[ACCOUNTS[account]]
                self.may_write_again(suite, account)

    def may_write_again(self, suite, account):
        """docs/guide/sharing.md ("Roles are enforced by the server"): a device follows its account's role; a copy
        that kept a read member's changes sends them once the account writes again."""
        if suite.members.get(account) not in ("write", "admin"):
            return
        for device in self.devices:
            if device.account == account and suite.index in device.local:
                self.model.rejoined(device.index, suite.id)

    def removed(self, suite, account, audited=True):
        suite.members.pop(account, None)
        suite.removed_op[account] = self.op_index
        if audited:  # an account's deletion is recorded once, as account-delete
            self.audit_expected.append(("member-remove", ACCOUNTS[suite.owner]))
        for device in self.devices:
            if device.account == account:
                self.lost_authority(device, suite)
        if suite.encrypted and account in suite.holds_keys:
            suite.removed[account] = now_ms()
            suite.holds_keys.discard(account)

    def lost_authority(self, device, suite):
        """The device can no longer push to the suite. A `run` of it still running may already
        have pushed what was written since it started (the model learns of a run's pushes only when
        it stops), so those writes may or may not be in the suite."""
        if suite.index in device.runs:
            self.model.pushed(device.index, suite.id, surely=False)
        self.model.lost_authority(device.index, suite.id)

    def step(self, prefix=""):
        """Where the current interruption lands when it lands on a named step of the process whose
        steps start with `prefix`: GROUPDEFAULTS_INTERRUPT_AT's value for it (None: after a time,
        or on another process's step)."""
        step = self.current.get("step")
        if step is None or not step.startswith(prefix):
            return None
        return f"{step}@{'SIGINT' if self.current['signal'] == 'INT' else 'SIGKILL'}"

    def signal_midway(self, device, args):
        op = self.current
        log = self.log_file("midway")
        process = self.tools.start(
            "groupdefaults-sync", *args, *self.answer_timeout(args), offset_s=device.offset_s, log_path=log,
            interrupt_at=self.step(),
        )
        if op.get("step") is None:
            time.sleep(op["after_ms"] / 1000)
            if process.poll() is None:
                sig = signal.SIGINT if op["signal"] == "INT" else signal.SIGKILL
                self.tools.signal(process, sig)
        return self.tools.finish(process, timeout=700)

    def op_leave(self, op, interrupt=False):
        device = self.devices[op["device"]]
        # The first suite from the operation's on whose members' copy the device is.
        suite = next(
            (
                self.suites[(op["suite"] + step) % len(self.suites)]
                for step in range(len(self.suites))
                if (op["suite"] + step) % len(self.suites) in device.local
                and device.account in self.suites[(op["suite"] + step) % len(self.suites)].members
            ),
            None,
        )
        if device.retired or suite is None:
            raise Skip("not a member's configured copy")
        args = ["leave", "--directory", device.folder, device.local[suite.index]]
        if interrupt:
            self.signal_midway(device, args)
            # A `leave` stopped after the server's part is finished by the next `leave`.
            truth = self.membership(suite)
            if truth is not None and ACCOUNTS[device.account] not in truth:
                self.sync_tool(device, *args)
        else:
            self.sync_tool(device, *args)
        self.learn_membership(suite)
        for other in self.devices:
            if other.account == device.account and suite.index in other.local and device.account not in suite.members:
                if other is device:
                    other.left[suite.index] = other.local.pop(suite.index)
                    if suite.index in other.runs:
                        self.stop_run(other, suite)

    def op_rotate_key(self, op, interrupt=False):
        suite = self.suites[op["suite"]]
        owner = self.owner_device(suite)
        if not suite.encrypted or owner is None:
            raise Skip("plain, or no owner device")
        args = ["rotate-key", "--directory", owner.folder, owner.local[suite.index]]
        if interrupt:
            self.signal_midway(owner, args)
        else:
            self.sync_tool(owner, *args)

    # Tokens, devices, accounts.

    def op_revoke_token(self, op):
        device = self.devices[op["device"]]
        if device.retired:
            raise Skip("retired")
        listing = self.servers.command("token", "list")
        held = self.tokens_of(device)
        revoked = 0
        for line in listing.out.splitlines():
            fields = line.split("\t")
            if len(fields) >= 7 and fields[1] == ACCOUNTS[device.account] and fields[5] == "active" and fields[6] == f"device d{device.index}":
                if self.servers.command("token", "revoke", fields[0]).rc == 0:
                    revoked += 1
                    self.audit_expected.append(("token-revoke", ACCOUNTS[device.account]))
        if revoked == 0:
            raise Skip("no active token")
        self.revoked_tokens += [(device.index, token, "token revoke") for token in held]

    def tokens_of(self, device):
        """Every token of the device: those the nemesis gave it (the files may have lost them to
        a power cut), and those pairing wrote (the tool flushes them)."""
        tokens = list(getattr(device, "tokens_given", []))
        for path in set(getattr(device, "token_files", {}).values()):
            try:
                with open(path) as f:
                    token = f.read().strip()
            except OSError:
                continue
            if token and token.isascii() and token.isprintable():
                tokens.append(token)
        return tokens

    def op_new_token(self, op):
        device = self.devices[op["device"]]
        if device.retired or device.account not in self.accounts_alive:
            raise Skip("retired")
        self.new_token(device)

    def op_revoke_device(self, op):
        device = self.devices[op["device"]]
        if device.retired:
            raise Skip("retired")
        listing = self.servers.command("devices", "list", "--account", ACCOUNTS[device.account], "--json")
        if listing.rc != 0:
            raise Skip("no devices listed")
        for entry in json.loads(listing.out):
            if entry.get("name") == f"d{device.index}" and not entry.get("revoked"):
                result = self.servers.command("devices", "revoke", entry["id"])
                if result.rc != 0:
                    raise Failure(f"devices revoke of a listed device failed: {result!r}")
                self.audit_expected.append(("device-revoke", ACCOUNTS[device.account]))
                return
        raise Skip("the device is not listed")

    def server_command(self, *args, interrupt=False):
        """A server command; interrupted, it is stopped midway and then run again, as an operator
        whose terminal closed would."""
        if interrupt:
            process = self.tools.start(
                "groupdefaults-server", *args, *self.servers.storage(), log_path=self.log_file("server-command"),
                interrupt_at=self.step(),
            )
            if self.current.get("step") is None:
                time.sleep(self.current["after_ms"] / 1000)
                self.tools.signal(process, signal.SIGINT if self.current["signal"] == "INT" else signal.SIGKILL)
            stopped = self.tools.finish(process, timeout=120)
            self.log(f"  stopped midway: {stopped.rc}: {tail(stopped.out, 200)}")
        return self.servers.command(*args)

    def op_delete_account(self, op, interrupt=False):
        account = op["account"]
        if account not in self.accounts_alive:
            raise Skip("deleted")
        name = ACCOUNTS[account]
        result = self.server_command("accounts", "delete", name, "--yes", interrupt=interrupt)
        if interrupt and result.rc != 0 and not self.account_exists(name):
            result.rc = 0  # the stopped run had deleted it
        if result.rc != 0:
            raise Failure(f"deleting account {name!r} failed: {result!r}")
        self.audit_expected.append(("account-delete", name))
        self.accounts_alive.discard(account)
        for suite in self.suites:
            if account in suite.members:
                self.removed(suite, account, audited=False)
            if suite.owner == account:
                # Its suites are gone with it, and no member reads them any more. A member's copy
                # stays the deleted account's (README: told `account_deleted`, also where its account
                # joins the new account's suite of that name from another device).
                for member in list(suite.members):
                    self.removed(suite, member, audited=False)
                for device in self.devices:
                    if device.account != account and suite.index in device.local:
                        device.of_deleted_owner.add(suite.index)
        for device in self.devices:
            if device.account == account and not device.retired:
                for index in list(device.runs):
                    self.stop_run(device, self.suites[index])
                for index in list(device.local):
                    self.lost_authority(device, self.suites[index])
                device.retired = True
                promises.retired(self, device)
        # The name again: a new account, whose devices start afresh; a name that looks like a
        # living one's is refused.
        if account in LEGACY:
            return
        probe = self.servers.command("token", "create", "--account", name, "--device", "probe")
        if probe.rc != 0:
            self.log(f"  the name is refused again: {tail(probe.err, 200)}")
            return
        self.servers.command("token", "revoke", re.search(r"token (tok_\w+)", probe.err).group(1))
        self.accounts_alive.add(account)
        for index, device in enumerate(self.devices):
            if device.account == account:
                fresh = Device(index, account, f"{device.folder}.{device.generation + 1}")
                fresh.generation = device.generation + 1
                os.makedirs(fresh.folder, mode=0o700)
                self.devices[index] = fresh
                self.new_token(fresh)
        for suite in self.suites:
            if suite.owner == account:
                suite.generation += 1
                suite.pinned.clear()  # docs/guide/sharing.md: deleting the owner's account removes its pins
                suite.unsure_pins.clear()
                self.create_suite(suite)

    # The server.

    def op_backup(self, op):
        path = os.path.join(self.root, f"backup-{len(self.backups)}")
        if self.servers.postgres_url:
            result = subprocess.run(
                ["pg_dump", "--format=custom", "--exclude-schema=groupdefaults_kept_authority", "--file", path, self.servers.postgres_url],
                capture_output=True, text=True,
            )
            if result.returncode != 0:
                raise Failure(f"pg_dump failed: {result.stderr}")
        else:
            result = self.servers.command("backup", "--to", path)
            if result.rc != 0:
                raise Failure(f"backup failed: {result!r}")
            self.audit_expected.append(("backup", None))
        self.backups.append(path)

    def account_exists(self, name):
        listing = self.servers.command("accounts", "list", "--json")
        if listing.rc != 0:
            raise Failure(f"accounts list failed: {listing!r}")
        return any(entry.get("name", entry.get("account")) == name for entry in json.loads(listing.out))

    def op_restore(self, op, interrupt=False):
        if not self.backups:
            raise Skip("no backup yet")
        path = self.backups[op["backup"] % len(self.backups)]
        self.stop_every_run()
        self.servers.stop()
        if self.servers.postgres_url:
            prepared = self.servers.command("restore", "--prepare")
            kept = re.search(r"id ([0-9a-f]{32})", prepared.out + prepared.err)
            if prepared.rc != 0 or kept is None:
                raise Failure(f"restore --prepare failed: {prepared!r}")
            done = subprocess.run(
                ["pg_restore", "--clean", "--if-exists", "--single-transaction", "--dbname", self.servers.postgres_url, path],
                capture_output=True, text=True,
            )
            if done.returncode != 0:
                raise Failure(f"pg_restore failed: {done.stderr}")
            # Not stopped midway: a second --announce finds the kept authority gone.
            result = self.servers.command("restore", "--announce", "--kept", kept.group(1))
        else:
            result = self.server_command("restore", "--from", path, interrupt=interrupt)
        if result.rc != 0:
            raise Failure(f"restore failed: {result!r}")
        self.audit_expected.append(("restore", None))
        self.servers.start()
        for suite in self.suites:
            self.server_went_back(suite)

    def server_went_back(self, suite):
        """The suite lost what only the server held (a restore, a reset): the model is told who
        may upload what again."""
        self.model.server_went_back(
            suite.id, self.authorized_devices(suite), suite.pinned | suite.unsure_pins, set(self.member_devices(suite))
        )

    def authorized_devices(self, suite):
        return {
            d.index for d in self.devices
            if not d.retired and suite.index in d.local and self.role(d.account, suite) in ("owner", "write", "admin")
        }

    def stop_every_run(self):
        for device in self.devices:
            for index in list(device.runs):
                self.stop_run(device, self.suites[index])

    def op_reset_suite(self, op):
        suite = self.suites[op["suite"]]
        if suite.owner not in self.accounts_alive:
            raise Skip("the owner's account was deleted")
        result = self.servers.command("suites", "reset", "--account", ACCOUNTS[suite.owner], "--suite", suite.name, "--yes")
        if result.rc != 0:
            self.log(f"  reset refused: {tail(result.err, 300)}")
            return
        self.audit_expected.append(("suite-reset", ACCOUNTS[suite.owner]))
        self.server_went_back(suite)

    def op_kill_server(self, op):
        index = op["server"] % len(self.servers.ports)
        self.servers.stop(index, sig=signal.SIGKILL)
        self.servers.start(index)

    def op_clock(self, op):
        device = self.devices[op["device"]]
        if device.retired or device.offset_s == op["offset"]:
            raise Skip("retired, or no change")
        self.set_clock(device, op["offset"])

    def set_clock(self, device, offset):
        running = list(device.runs)
        for index in running:
            self.stop_run(device, self.suites[index])
        if offset < device.offset_s:
            # docs/guide/failures.md: a device stamps again what it wrote while its clock was more than 5 minutes
            # ahead of the clock it has now: those writes may lose to older ones.
            self.model.clock_went_back(device.index, now_ms() + offset * 1000)
        device.offset_s = offset
        for index in running:
            if index in device.local and not offset:
                self.start_run(device, self.suites[index])

    def op_power_cut(self, op):
        """The power of the device on the power-cut file system goes, and it boots again. The
        model does not change: a write a command acknowledged is in the core's durability point
        (made as the command exits); what a `run` pulled after its last point may be lost, and is
        pulled again (README: a suite put back reads the server's state again)."""
        device = self.devices[POWER_CUT_DEVICE]
        if device.retired:
            raise Skip("retired")
        running = list(device.runs)
        for index in running:
            self.stop_run(device, self.suites[index], sig=signal.SIGKILL)
        pages, kept = self.power.cut(random.Random(op["cut"]))
        self.log(f"  the power of d{device.index} went: the cut kept {kept} of {pages} pages not flushed")
        for index in running:
            if index in device.local and not device.offset_s:
                self.start_run(device, self.suites[index])

    def op_cut_network(self, op):
        if self.cut_left > 0:
            raise Skip("already cut")
        self.proxy.set_mode(op["mode"])
        self.cut_left = op["for"]

    def op_interrupt(self, op):
        command = op["command"]
        if command == "sync":
            device, suite, _ = self.pick(op)
            if suite.index not in device.local:
                raise Skip("not configured")
            self.signal_midway(device, ["sync", "--directory", device.folder, device.local[suite.index]])
            self.model.pushed(device.index, suite.id, surely=False)
        elif command in ("join", "share"):
            suite, account = self.outsider_of(op)
            inviter = self.owner_device(suite)
            joiner = self.joiner(suite, account)
            if inviter is None or joiner is None:
                raise Skip("no device to invite from or to join with")
            self.share_and_join(suite, inviter, joiner, op["role"], interrupt=command)
        elif command == "unshare":
            suite, account = self.member_of(op)
            self.unshare(suite, account, interrupt=True)
        elif command == "leave":
            self.op_leave(op, interrupt=True)
        elif command == "pair":
            device = self.devices[op["device"]]
            suite = self.suites[op["suite"]]
            if device.retired or not suite.encrypted or suite.index in device.local or suite.index in device.left:
                raise Skip("retired, plain, or has a copy")
            if self.role(device.account, suite) is None:
                raise Skip("not a member")
            self.join_other(device, suite, interrupt=True)
        elif command == "rotate-key":
            self.op_rotate_key(op, interrupt=True)
        elif command == "restore":
            self.op_restore(op, interrupt=True)
        elif command == "delete-account":
            self.op_delete_account(op, interrupt=True)

    # The end.

    def run(self, ops):
        self.ops = ops
        self.set_up()
        for index, op in enumerate(ops):
            self.run_op(index, op)
        promises.settle(self)
        return promises.check(self)

    def close(self):
        self.tools.stop_all()
        if self.power is not None:
            self.power.close()
        self.proxy.close()
