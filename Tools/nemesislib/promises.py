"""The promises checked after every history (and the cheap ones after every step).

After the operations the world is settled as a person following the tools would: the network
back, every server up, every clock right, every `run` stopped, and each device's `status` acted on
as it says (a new token when paused; `unconfigure` to keep the copy when no longer shared or the
account was deleted; a sync when a rotation is due), syncing every copy until a whole round
changes nothing. Then:
- every device of every current member holds the same suite, and (plain suites) the server's;
- each key holds what the model owes it (model.py): no acknowledged write lost, none that must
  never reach the suite present;
- authority: a removed or deleted account's token reads nothing of the suite, a removed account's
  copy holds nothing written after its removal, an encrypted suite's entries sealed after a removal
  are under an epoch no removed device holds, and no member is left without keys;
- nothing is stuck: every copy's `status` is `ok` (a read member's kept local changes aside);
- the audit log holds every authority change made; no server answered 5xx (but 503); no process
  crashed or hung; every copy `verify`s.
"""
import glob
import json
import os
import re

from .world import ACCOUNTS, KEYS, Failure, Skip, now_ms, quote, tail


def each_step(history):
    history.servers.check_running()
    if history.tools.crashes:
        raise Failure(history.tools.crashes[0])
    errors = history.proxy.server_errors()
    if errors:
        raise Failure(f"the server answered {errors[0][0]}: {errors[0][1][:300]!r}")


def retired(history, device):
    """A device of a deleted account: its tokens must read nothing from now on."""
    history.retired_tokens = getattr(history, "retired_tokens", [])
    history.retired_tokens += [(device.index, token) for token in history.tokens_of(device)]


def settle(history):
    history.log("settling")
    history.cut_left = 0
    history.proxy.set_mode("up")
    history.servers.start()
    for device in history.devices:
        if not device.retired and device.offset_s:
            history.set_clock(device, 0)
    history.stop_every_run()
    history.stuck = []
    history.broken = []
    for suite in history.suites:
        owner = history.owner_device(suite)
        if owner is not None:
            # A `share` that crashed left an invitation or a keyless member: the next
            # `invitations` on that device ends it.
            history.sync_tool(owner, "invitations", "--directory", owner.folder, owner.local[suite.index])
    for round_ in range(6):
        changed = []
        history.stuck = []
        for device in history.devices:
            if device.retired:
                continue
            for index in sorted(device.local):
                suite = history.suites[index]
                what = remedy(history, device, suite)
                if what:
                    changed.append(f"d{device.index} {suite.label}: {what}")
        if not changed and round_ > 0:
            return
    history.stuck.append(f"the devices did not stop changing after 6 rounds of syncs: {'; '.join(changed)}")


def remedy(history, device, suite):
    """One device's copy: acts on its status as it says. Whether anything changed."""
    local = device.local[suite.index]
    status = history.sync_tool(device, "status", "--directory", device.folder, local, "--json")
    try:
        state = json.loads(status.out)["state"]
    except (ValueError, KeyError):
        history.stuck.append(f"status printed no state: {status!r}")
        return False
    if state == "paused":
        history.new_token(device)
    elif state in ("not_shared", "account_deleted"):
        role = history.role(device.account, suite)
        if state == "account_deleted" and suite.index in device.of_deleted_owner:
            role = None  # a copy of the deleted owner's suite: told so rightly
        if role is not None:
            # Kept apart from `stuck`, which each round makes again: the copy is unconfigured below
            # and no later round would see it.
            history.broken.append(f"d{device.index}'s copy of {suite.label} says {state}, but the account is {role}")
        history.sync_tool(device, "unconfigure", "--directory", device.folder, local)
        device.left[suite.index] = device.local.pop(suite.index)
        history.model.lost_authority(device.index, suite.id)
        return f"{state}: unconfigured"
    elif state == "kept_local" and history.role(device.account, suite) == "read":
        pass
    elif state == "failing" and "pair this device again" in status.out:
        # After `rotate-key` on another device (docs/guide/encryption.md: each device that keeps the suite pairs
        # again).
        try:
            history.join_other(device, suite)
        except Skip:
            history.stuck.append(
                f"d{device.index}'s copy of {suite.label} must pair again, and no other device of its account holds the keys: {tail(status.out, 300)}"
            )
            return None
        state = "paired again"
    elif state not in ("ok", "offline", "rotation_due", "not_synced", "paired again"):
        history.stuck.append(f"d{device.index}'s copy of {suite.label} is stuck: {tail(status.out, 600)}")
    result = history.sync(device, suite)
    counts = re.search(r"applied (\d+), pushed (\d+)", result.out)
    if result.rc != 0 and not (state == "kept_local" or history.role(device.account, suite) == "read"):
        history.stuck.append(f"sync of d{device.index}'s {suite.label} failed after the remedy: {result!r}")
        return f"{state}; sync failed: {tail(result.err, 200)}"
    steady = state == "ok" or (state == "kept_local" and history.role(device.account, suite) == "read")
    if counts is None or counts.group(1) != "0" or counts.group(2) != "0" or not steady:
        return f"{state}; {tail(result.out, 200)}"
    return None


def check(history):
    problems = list(history.stuck) + list(history.broken)
    problems += history.tools.crashes
    problems += [f"the server answered {s}: {head[:300]!r}" for s, head in history.proxy.server_errors()]
    for suite in history.suites:
        if suite.owner in history.accounts_alive:
            problems += converged(history, suite)
        problems += authority(history, suite)
    problems += verified(history)
    problems += audited(history)
    return problems


def contents(history, device, local):
    result = history.tools.run("groupdefaults", "export", "--directory", device.folder, local, "-", "--format", "json")
    if result.rc != 0:
        return None
    values = json.loads(result.out)["dictionary"]
    return {key: next(iter(value.values())) for key, value in values.items()}


def owner_token(history, suite):
    owner = history.owner_device(suite)
    path = getattr(owner, "token_files", {}).get(suite.index, owner.token_file)
    with open(path) as f:
        return f.read().strip()


def snapshot(history, suite, token):
    status, body = history.servers.http("GET", f"/v1/suites/{quote(suite.name)}/snapshot?owner={quote(ACCOUNTS[suite.owner])}", token)
    entries = []
    while True:
        if status != 200:
            return status, None
        entries += body["entries"]
        if not body.get("next"):
            return status, entries
        status, body = history.servers.http(
            "GET", f"/v1/suites/{quote(suite.name)}/snapshot?owner={quote(ACCOUNTS[suite.owner])}&after={quote(str(body['next']))}", token
        )


def converged(history, suite):
    problems = []
    copies = {}
    for device in history.devices:
        if device.retired or suite.index not in device.local or history.role(device.account, suite) is None:
            continue
        copies[device.index] = contents(history, device, device.local[suite.index])
    owner = history.owner_device(suite)
    if owner is None or owner.index not in copies:
        return [f"{suite.label}: no device of its owner syncs it at the end"]
    reference = copies[owner.index]
    for index, held in copies.items():
        device = history.devices[index]
        reader = history.role(device.account, suite) == "read"
        for key in set(held) | set(reference):
            if held.get(key) == reference.get(key):
                continue
            own = {w.value for w in history.model.of(index, suite.id) if w.key == key}
            if reader and held.get(key) in own:
                continue  # a read member's own change, kept on its device as promised
            if reader and history.model.held_across_restore(suite.id, key, held.get(key)):
                continue  # held when the server went back: kept on the device, which cannot upload it
            problems.append(f"{suite.label}: d{index} holds {ascii(key)} = {ascii(held.get(key))}, d{owner.index} {ascii(reference.get(key))}")
    if not suite.encrypted:
        status, entries = snapshot(history, suite, owner_token(history, suite))
        if status != 200:
            problems.append(f"{suite.label}: the owner's token reads no snapshot ({status})")
        else:
            served = {e["key"]: next(iter(e["value"].values())) for e in entries if not e.get("deleted") and "value" in e}
            if served != reference:
                problems.append(f"{suite.label}: the server holds {ascii(served)}, the devices {ascii(reference)}")
    for key in sorted(set(KEYS) | set(reference)):
        found = history.model.check_key(suite.id, key, reference.get(key))
        problems += [f"{suite.label}: {p}" for p in found]
        if found and not suite.encrypted:  # a clue to the last problem, not a promise of its own
            problems[-1] += f"\n  the server's versions of {ascii(key)}: {versions(history, suite, key)}"
    return problems


def versions(history, suite, key):
    """What the server keeps of a key, newest first, for the report: value, stamp, device."""
    path = f"/v1/suites/{quote(suite.name)}/keys/{quote(key)}/history?owner={quote(ACCOUNTS[suite.owner])}"
    status, body = history.servers.http("GET", path, owner_token(history, suite))
    if status != 200:
        return f"({status})"
    shown = []
    for v in body.get("versions", body if isinstance(body, list) else []):
        value = "deleted" if v.get("deleted") else next(iter(v.get("value", {"?": "?"}).values()))
        shown.append(f"{value} @{int(v['hlc']) >> 16} from {v.get('origin')}")
    return "; ".join(shown)


def pushed_probe(history, suite, token):
    """A one-op push with `token` to the suite (the last check: one that is taken changes it)."""
    body = {
        "device_id": "1",
        "batch_id": f"nemesis-probe-{len(history.lines)}",
        "ops": [{"key": "probe", "value": {"string": "probe"}, "hlc": str(now_ms() << 16)}],
    }
    path = f"/v1/suites/{quote(suite.name)}/push?owner={quote(ACCOUNTS[suite.owner])}"
    status, _ = history.servers.http("POST", path, token, body)
    return status


def authority(history, suite):
    problems = []
    path = f"/v1/suites/{quote(suite.name)}/snapshot?owner={quote(ACCOUNTS[suite.owner])}"
    # A revoked token, and a deleted account's, stays refused: after new tokens, restores, and the
    # name made again.
    refused = [(f"a token of d{index} revoked by {how}", token) for index, token, how in history.revoked_tokens]
    refused += [(f"a deleted account's token (d{index})", token) for index, token in getattr(history, "retired_tokens", [])]
    for whose, token in refused:
        status, _ = history.servers.http("GET", path, token)
        if status != 401:
            problems.append(f"{whose} reads {suite.label}: {status}")
        status = pushed_probe(history, suite, token)
        if status != 401:
            problems.append(f"{whose} pushes to {suite.label}: {status}")
    alive = suite.owner in history.accounts_alive
    for device in history.devices:
        if device.retired or device.account == suite.owner or device.account in suite.members:
            continue
        with open(device.token_file) as f:
            token = f.read().strip()
        status, body = history.servers.http("GET", path, token)
        if status == 200:
            problems.append(f"{ascii(ACCOUNTS[device.account])}, no member, reads {ascii(ACCOUNTS[suite.owner])}'s {suite.label}")
        if pushed_probe(history, suite, token) == 200:
            problems.append(f"{ascii(ACCOUNTS[device.account])}, no member, pushes to {ascii(ACCOUNTS[suite.owner])}'s {suite.label}")
        # Its copy holds nothing written after its account's removal.
        local = device.left.get(suite.index) or device.local.get(suite.index)
        # "After" by the operations' order: the writers' clocks may be off (a write stamped ahead
        # was still made before the removal).
        removed_op = suite.removed_op.get(device.account)
        if local and removed_op is not None:
            held = contents(history, device, local) or {}
            for key, value in held.items():
                later = [w for w in history.model.writes if w.suite_id == suite.id and w.value == value and w.op > removed_op and w.device != device.index]
                if later:
                    problems.append(f"d{device.index}, removed from {suite.label}, holds {ascii(later[0])} written after")
    if suite.encrypted and alive and history.owner_device(suite) is not None and suite.removed:
        status, entries = snapshot(history, suite, owner_token(history, suite))
        for account, removed_at in suite.removed.items():
            if account in suite.members:
                continue
            # An epoch is held when a device of the account holds the very key the suite uses for it
            # (the owner's device's key file says which): a rotation stopped before its bag was
            # stored leaves a key numbered as the next epoch that the suite never used, and a copy
            # handed over then carries it.
            owner = history.owner_device(suite)
            real = {}
            for keyfile in glob.glob(os.path.join(owner.folder, glob.escape(owner.local[suite.index]) + ".*.keys")):
                with open(keyfile) as f:
                    real.update(json.load(f).get("epochs", {}))
            held = set()
            for device in history.devices:
                if device.account == account:
                    for keyfile in glob.glob(device.folder + "/*.keys"):
                        with open(keyfile) as f:
                            keys = json.load(f)
                        held |= {int(e) for e, key in keys.get("epochs", {}).items() if real.get(e) == key}
            for entry in entries or []:
                epoch = entry.get("sealed", {}).get("epoch")
                if int(entry["hlc"]) >> 16 > removed_at + 1000 and epoch in held:
                    problems.append(
                        f"{suite.label}: an entry stamped after {ascii(ACCOUNTS[account])} was removed is sealed under epoch {epoch}, which its devices hold"
                    )
                    break
    if alive and suite.encrypted:
        owner = history.owner_device(suite)
        if owner is not None:
            result = history.sync_tool(owner, "members", "--directory", owner.folder, owner.local[suite.index], "--json")
            if result.rc == 0:
                for member in json.loads(result.out)["members"]:
                    if member["role"] != "owner" and member.get("admission") is None:
                        problems.append(f"{suite.label}: member {ascii(member['account'])} holds no keys at the end")
    return problems


def verified(history):
    problems = []
    for device in history.devices:
        if device.retired:
            continue
        for local in list(device.local.values()) + list(device.left.values()):
            result = history.tools.run("groupdefaults", "verify", "--directory", device.folder, local)
            if result.rc != 0:
                problems.append(f"d{device.index}'s {ascii(local)} does not verify: {result!r}")
    return problems


def audited(history):
    result = history.servers.command("audit", "--json", "--limit", "100000")
    if result.rc != 0:
        return [f"audit failed: {result!r}"]
    records = json.loads(result.out)
    problems = []
    needed = {}
    for act, account in history.audit_expected:
        needed[(act, account)] = needed.get((act, account), 0) + 1
    for (act, account), count in needed.items():
        have = sum(1 for r in records if r["act"] == act and (account is None or r.get("account") == account))
        if have < count:
            problems.append(f"the audit log holds {have} {act} record(s) of {ascii(account)}, the history made {count}")
    return problems
