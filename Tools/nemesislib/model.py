"""What the user is promised about values, written from the README and docs/guide, not from the code.

Last writer wins per key by HLC (docs/guide/sync.md): the value every device of a
suite ends with is the acknowledged write with the largest stamp, deletions included. The nemesis
cannot see a stamp as it is made, but it knows when each write's command ran on which clock: a
write's HLC is at least its device's wall clock when the command started (`lo`), and at most the
larger of that clock when it ended and every stamp made before (`hi`: an HLC moves past what it
pulls, never further). So a write is certainly newer than another when its `lo` is above the
other's `hi`; the model accuses only then, and stays sound whatever the clocks did.

Each write has a standing, from what happened to its device afterwards:
- `certain`: its device could push it and kept that right until it did (or until the end): the
  suite must hold it or something newer.
- `maybe`: it may or may not reach the suite (a push whose answer was lost, a device removed with
  it pending while `run` was running, a value held before joining, a restore or reset that lost
  what only the server held): it may win, it is never owed.
- `outsider`: it was written where it must never reach the suite (a read member's write, a
  removed member's, a revoked account's, a member's write of a key pinned for the members):
  seeing it in the suite is a broken promise.
"""


class Write:
    def __init__(self, op, device, suite_id, key, value, lo, hi, standing, pushed):
        self.op, self.device, self.suite_id, self.key, self.value = op, device, suite_id, key, value
        self.lo, self.hi, self.standing, self.pushed = lo, hi, standing, pushed

    def __repr__(self):
        what = "delete" if self.value is None else ascii(self.value)
        return (
            f"op {self.op}: d{self.device} {what} -> {ascii(self.key)} "
            f"(stamp in [{self.lo}, {self.hi}] ms, {self.standing}, pushed {self.pushed})"
        )


class Model:
    def __init__(self):
        self.writes = []
        self.high = 0  # the largest `hi` so far: no HLC made until now is above it
        self.before_restore = {}  # suite id -> how many writes were made before its last restore

    def write(self, op, device, suite_id, key, value, start_ms, end_ms, standing):
        # The device's earlier writes of the key not known to be pushed are replaced on it: their
        # fate is this write's (its stamp is later, unless the device's clock went back more than
        # 5 minutes, when the suite stamps again from the wrong clock, as the README says).
        for earlier in self.of(device, suite_id):
            if earlier.key == key and earlier.standing == "certain" and earlier.pushed != "yes":
                earlier.standing = "maybe"
        hi = max(end_ms, self.high)
        self.high = hi
        w = Write(op, device, suite_id, key, value, start_ms, hi, standing, "no")
        self.writes.append(w)
        return w

    def clock_went_back(self, device, clock_ms):
        """The device's clock now reads `clock_ms`: what it stamped more than 5 minutes ahead of
        that is stamped again (docs/guide/failures.md, "What one bad device, value or clock can do": a pending
        write with the corrected clock, a pushed one as older than any later write), so it may lose
        to older writes."""
        for w in self.writes:
            if w.device == device and w.standing == "certain" and w.hi > clock_ms + 5 * 60 * 1000:
                w.standing = "maybe"

    def of(self, device, suite_id):
        return [w for w in self.writes if w.device == device and w.suite_id == suite_id]

    def pushed(self, device, suite_id, surely):
        """A sync of the device's suite ended (0: everything written before it was accepted)."""
        for w in self.of(device, suite_id):
            if w.standing != "outsider" and w.pushed != "yes":
                w.pushed = "yes" if surely else "maybe"

    def pin_changed(self, suite_id, key, members):
        """The key was pinned or unpinned (or may have been) for the members' devices `members`:
        their writes of it not known to be pushed may or may not reach the suite now (a pin refuses
        their push; an unpin lets a write kept while pinned through)."""
        for w in self.writes:
            if w.suite_id == suite_id and w.key == key and w.device in members and w.pushed != "yes":
                if w.standing in ("certain", "outsider"):
                    w.standing = "maybe"

    def lost_authority(self, device, suite_id):
        """The device can no longer push to the suite: what it had not pushed stays on it."""
        for w in self.of(device, suite_id):
            if w.standing == "certain" and w.pushed != "yes":
                w.standing = "outsider" if w.pushed == "no" else "maybe"

    def rejoined(self, device, suite_id):
        """The device's copy syncs again: what it holds may be uploaded (joining never overwrites)."""
        for w in self.of(device, suite_id):
            if w.standing == "outsider":
                w.standing = "maybe"

    def server_went_back(self, suite_id, authorized, pinned=(), members=()):
        """A restore or a reset: what only the server held may be gone; devices that can push
        upload what they hold again at their next sync, so their writes stay owed until then. A
        device that loses its right to push before that sync takes them with it (README: what
        only the server held and no syncing device still has is lost): `pushed` is "again" until
        the device syncs. A member's write of a key `pinned` now comes back only if one of the
        owner's devices carries it (docs/guide/sharing.md, "Pinned keys": a member's device cannot
        upload it): it may or may not."""
        self.before_restore[suite_id] = len(self.writes)
        for w in self.writes:
            if w.suite_id == suite_id and w.standing == "certain":
                if w.device not in authorized or (w.device in members and w.key in pinned):
                    w.standing = "maybe"
                elif w.pushed == "yes":
                    w.pushed = "again"

    def held_across_restore(self, suite_id, key, value):
        """Whether `value` (None: a deletion) was written to the key before the suite's last
        restore or reset. A read member's device holds such a value as a local change it keeps
        (README: after a restore each device marks what it holds pending; a read member cannot
        upload it), so its copy may differ from the suite there."""
        before = self.writes[: self.before_restore.get(suite_id, 0)]
        return any(w.suite_id == suite_id and w.key == key and w.value == value for w in before)

    def check_key(self, suite_id, key, final):
        """The broken promises about one key whose converged value is `final` (None: absent)."""
        candidates = [w for w in self.writes if w.suite_id == suite_id and w.key == key]
        problems = []
        if final is not None:
            sources = [w for w in candidates if w.value == final]
            if not sources:
                return [f"{ascii(key)} holds {ascii(final)}, which no write of this suite made"]
            if all(w.standing == "outsider" for w in sources):
                return [f"{ascii(key)} holds {ascii(final)}, which must never reach the suite: {sources[0]!r}"]
            winner_hi = max(w.hi for w in sources if w.standing != "outsider")
        else:
            deletions = [w for w in candidates if w.value is None and w.standing != "outsider"]
            winner_hi = max((w.hi for w in deletions), default=None)
        for w in candidates:
            if w.standing != "certain" or w.value == final:
                continue
            if w.value is None and final is None:
                continue
            if winner_hi is None or w.lo > winner_hi:
                now = "is absent" if final is None else f"holds {ascii(final)}"
                problems.append(f"{ascii(key)} {now}, but this acknowledged write is newer and was lost: {w!r}")
        return problems
