"""The operator console in a real browser (chromium through Playwright), on both storage backends.

Each test uses accounts and suites of its own, so they do not depend on one another's order. Values
are written with the `groupdefaults` tool into a device's local suite and reach the server with
`groupdefaults-sync sync`, as they would from a user's device.
"""

import datetime
import os
import pathlib
import re
import time
import urllib.parse

import pytest
from playwright.sync_api import expect

from conftest import (DESKTOP, OPERATOR, PASSWORD, PHONE, SCREENSHOTS, Device, Server, account_path, run,
                      sign_in, suite_path)

FOREIGN_REFUSAL = "did not come from this console"


def path(page):
    return urllib.parse.urlsplit(page.url).path


def submit(page, button):
    """Clicks a form's submit button; the response the browser navigated to (after redirects)."""
    with page.expect_navigation() as navigation:
        button.click()
    return navigation.value


def redirect_status(response):
    """The status of the response that redirected to `response`, or None."""
    previous = response.request.redirected_from
    return previous.response().status if previous else None


def reload_until(page, condition, what, timeout=10.0):
    """Reloads the page until `condition()` holds (servers record devices about a second late)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not seen after {timeout:.0f} s of reloads of {page.url}")
        page.wait_for_timeout(250)
        page.reload()


def assert_post_forms_carry_csrf(page):
    """Every POST form of the page has a non-empty hidden csrf field."""
    forms = page.locator("form[method=post], form[method=POST]")
    assert forms.count() > 0, f"no POST form on {page.url}"
    for i in range(forms.count()):
        form = forms.nth(i)
        field = form.locator("input[type=hidden][name=csrf]")
        assert field.count() == 1, f"form {form.get_attribute('id') or form.get_attribute('class')} on {page.url} has no hidden csrf field"
        assert field.input_value(), f"the csrf field of a form on {page.url} is empty"


def device_row(page, name):
    return page.locator("table#devices tr[data-device-id]").filter(
        has=page.locator(".device-name", has_text=name))


def wait_for_device(page, account, name):
    """Opens the account page and reloads it until the device `name` is listed with a last-seen
    time; the row."""
    page.goto(account_path(account))
    row = device_row(page, name)
    reload_until(page, lambda: row.count() == 1 and row.locator(".last-seen time[datetime]").count() == 1,
                 f"device {name!r} of {account} with a last-seen <time>")
    return row


def key_row(page, key):
    return page.locator(f'table#keys tr[data-key="{css_string(key)}"]')


def css_string(text):
    """`text` for a double-quoted CSS attribute value."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def wait_until_live(page):
    expect(page.locator("#tail-status")).to_have_text("live", timeout=10_000)


def tail_row(page, key):
    return page.locator("#tail-rows tr").filter(has=page.locator(".key", has_text=key))


# --- 1. Signing in --------------------------------------------------------------------------------

def test_sign_in(server, anonymous_page, tmp_path):
    page = anonymous_page
    # An account to list, with a name to percent-encode, and a suite.
    device = Device(server, tmp_path, "fay", "group.com.example.fay", server.token("fay?z"))
    device.write("hello", "world")
    device.sync()

    # Without a session, /console/* sends to the sign-in page.
    answer = page.request.get("/console", max_redirects=0)
    assert answer.status == 303, f"GET /console without a session: {answer.status}"
    assert urllib.parse.urlsplit(answer.headers["location"]).path == "/console/sign-in"
    answer = page.request.get(account_path("fay?z"), max_redirects=0)
    assert answer.status == 303, f"GET an account page without a session: {answer.status}"
    page.goto("/console")
    assert path(page) == "/console/sign-in"
    form = page.locator('form#sign-in[method=post][action="/console/sign-in"]')
    expect(form).to_have_count(1)
    assert form.locator("input[type=hidden][name=csrf]").input_value()

    # The wrong password: 401, an error, still the sign-in form.
    response = sign_in(page, OPERATOR, PASSWORD + " (not)")
    assert response.status == 401, f"a wrong password: {response.status}"
    expect(page.locator(".error")).to_contain_text("Wrong name or password")
    expect(page.locator("form#sign-in")).to_be_visible()
    assert path(page) == "/console/sign-in"
    expect(page.locator("form#sign-out")).to_have_count(0)

    # The right one: 303 to the overview.
    response = sign_in(page)
    assert redirect_status(response) == 303, f"a right password: {redirect_status(response)} then {response.status}"
    assert path(page) == "/console"
    assert response.status == 200
    expect(page.locator("form#sign-out")).to_have_count(1)
    expect(page.locator("form#sign-out").get_by_role("button", name="Sign out")).to_be_visible()
    expect(page.locator("#health")).to_contain_text("embedded" if server.backend == "embedded" else "PostgreSQL")
    expect(page.locator("svg#chart-pushes")).to_have_count(1)
    expect(page.locator("svg#chart-streams")).to_have_count(1)
    link = page.locator("table#accounts a", has_text="fay?z")
    expect(link).to_have_count(1)
    assert link.get_attribute("href") == "/console/accounts/fay%3Fz"
    assert_post_forms_carry_csrf(page)

    # Signing out ends the session.
    submit(page, page.locator("form#sign-out").get_by_role("button", name="Sign out"))
    assert path(page) == "/console/sign-in"
    answer = page.request.get("/console", max_redirects=0)
    assert answer.status == 303, f"GET /console after signing out: {answer.status}"


# --- 2. A token made in the console, used by a device ---------------------------------------------

def test_create_token_and_see_the_device(server, page, tmp_path):
    account, suite = "ana", "group.com.example.chat"
    # An account that nothing has yet is no page: 404, saying so, with no form.
    response = page.goto(account_path(account))
    assert response.status == 404
    expect(page.locator("main")).to_contain_text(f"There is no account {account}")
    expect(page.locator("form#create-token")).to_have_count(0)
    # An account begins with its first token, made beside the server.
    server.token(account)
    page.goto(account_path(account))
    assert_post_forms_carry_csrf(page)
    form = page.locator("form#create-token")
    expect(form.locator("input[name=suites]")).to_have_value("*")
    expect(form.locator("input[name=read_only]")).not_to_be_checked()
    form.locator("input[name=device]").fill("phone")
    response = submit(page, form.get_by_role("button", name="Create token"))
    assert redirect_status(response) == 303, f"creating a token: {redirect_status(response)} then {response.status}"
    assert path(page) == account_path(account)

    token = page.locator("code#new-token").inner_text().strip()
    assert token and " " not in token, f"code#new-token holds {token!r}"
    # The hint is a command that works: it names this server.
    expect(page.locator("code#new-token-hint")).to_have_text(
        f"groupdefaults-sync configure SUITE --server {server.url} --token-file PATH")
    copy = page.locator("button#copy-token")
    expect(copy).to_be_visible()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    copy.click()
    expect(copy).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()").strip() == token
    expect(page.locator("table#tokens tr[data-token-id]")).to_have_count(2)
    expect(page.locator("table#tokens tr[data-token-id] form.revoke-token")
           .get_by_role("button", name="Revoke")).to_have_count(2)
    page.reload()
    expect(page.locator("code#new-token")).to_have_count(0)  # shown once

    device = Device(server, tmp_path, "phone", suite, token)
    device.write("sound", "bell.wav")
    device.sync()

    row = wait_for_device(page, account, "phone")
    assert row.get_attribute("data-device-id").startswith("dev_")
    seen = row.locator(".last-seen time").get_attribute("datetime")
    seen_at = datetime.datetime.fromisoformat(seen.replace("Z", "+00:00"))
    now = datetime.datetime.now(datetime.timezone.utc)
    assert abs((now - seen_at).total_seconds()) < 300, f"last seen {seen}, now {now.isoformat()}"
    expect(row.locator("form.revoke-device").get_by_role("button", name="Revoke device")).to_be_visible()
    expect(page.locator(f'table#suites tr[data-suite="{suite}"]')).to_have_count(1)
    expect(page.locator(f'table#suites tr[data-suite="{suite}"] meter')).to_have_count(1)


# --- 3. A suite's keys and a key's history --------------------------------------------------------

def test_browse_suite_and_history(server, page, tmp_path):
    account, suite = "bo", "group.com.example.notes"
    device = Device(server, tmp_path, "laptop", suite, server.token(account, device="laptop"))
    device.write("volume", "loud")
    device.write("theme", "dark")
    device.sync()
    device.write("volume", "quiet")
    device.sync()

    page.goto(account_path(account))
    link = page.locator(f'table#suites tr[data-suite="{suite}"] a', has_text=suite)
    expect(link).to_have_count(1)
    assert link.get_attribute("href") == suite_path(account, suite)
    submit(page, link)
    assert path(page) == suite_path(account, suite)
    assert_post_forms_carry_csrf(page)

    volume = key_row(page, "volume")
    expect(volume).to_have_count(1)
    expect(key_row(page, "theme")).to_have_count(1)
    assert volume.locator(".key").inner_text().strip() == "volume"
    expect(volume.locator(".value")).to_contain_text("quiet")
    assert volume.locator(".written time[datetime]").count() == 1
    assert volume.locator(".rev").inner_text().strip(), "no revision shown"
    # The writer's name comes from the device record, made about a second after its first request.
    reload_until(page, lambda: "laptop" in volume.locator(".writer").inner_text(), "the writer 'laptop' of volume")

    # The key filter.
    field = page.locator("form#filter input[name=key]")
    field.fill("vol")
    with page.expect_navigation():
        field.press("Enter")
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query).get("key") == ["vol"]
    expect(key_row(page, "volume")).to_have_count(1)
    expect(key_row(page, "theme")).to_have_count(0)

    # The history: two versions, the newest first.
    submit(page, volume.locator(".key a"))
    assert path(page) == suite_path(account, suite) + "/history"
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query).get("key") == ["volume"]
    rows = page.locator("table#history tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0).locator(".value")).to_contain_text("quiet")
    expect(rows.nth(1).locator(".value")).to_contain_text("loud")
    revs = [int(rows.nth(i).locator(".rev").inner_text().strip()) for i in range(2)]
    assert revs[0] > revs[1], f"history revisions {revs}: not newest first"
    for i in range(2):
        expect(rows.nth(i).locator(".writer")).to_contain_text("laptop")
        assert rows.nth(i).locator(".written time[datetime]").count() == 1
        # To the millisecond, as the API has them.
        written = rows.nth(i).locator(".written time").inner_text().strip()
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC", written), f"written {written!r}"


# --- 4. The live tail ------------------------------------------------------------------------------

def test_live_tail(server, page, tmp_path):
    account, suite = "cy", "group.com.example.live"
    device = Device(server, tmp_path, "tablet", suite, server.token(account, device="tablet"))
    device.write("first", "1")
    device.sync()

    page.goto(suite_path(account, suite))
    wait_until_live(page)
    device.write("ping", "pong-1")
    device.sync()
    # Measured from the moment the push has finished.
    row = tail_row(page, "ping")
    expect(row).to_be_visible(timeout=1_000)
    assert row.locator(".key").inner_text().strip() == "ping"
    expect(row.locator(".value")).to_contain_text("pong-1")
    assert row.locator(".rev").inner_text().strip(), "the tail row has no revision"

    # The next change goes on top.
    device.write("ping", "pong-2")
    device.sync()
    expect(tail_row(page, "ping")).to_have_count(2, timeout=1_000)
    expect(page.locator("#tail-rows tr").first.locator(".value")).to_contain_text("pong-2")


def test_open_event_streams_one_figure(server, page):
    """The overview's tile and its chart's "now" count the same streams, also once a stream ended
    within the minute (the chart's line is each minute's peak)."""
    import http.client

    token = server.token("dee")
    stream = http.client.HTTPConnection("127.0.0.1", urllib.parse.urlsplit(server.url).port, timeout=30)
    stream.request("GET", "/v1/suites/group.com.example.streams/events", headers={"Authorization": f"Bearer {token}"})
    assert stream.getresponse().status == 200

    page.goto("/console")
    tile = page.locator(".tile", has_text="open event streams").locator(".figure")
    caption = page.locator("figure.chart figcaption", has_text="Open event streams")

    def now_in_chart():
        found = re.search(r": (\d+) now,", caption.inner_text())
        assert found, f"the streams chart's caption: {caption.inner_text()!r}"
        return int(found.group(1))

    reload_until(page, lambda: int(tile.inner_text()) >= 1, "the open stream in the tile")
    assert now_in_chart() == int(tile.inner_text())
    # The server notices a closed stream at its next write, a heartbeat (at most 15 s later).
    stream.close()
    reload_until(page, lambda: tile.inner_text() == "0", "no open stream in the tile", timeout=40)
    assert now_in_chart() == 0, f"tile 0, chart {caption.inner_text()!r}"


# --- 5. Revoking a device -------------------------------------------------------------------------

def test_revoke_device(server, page, tmp_path):
    account, suite = "dee", "group.com.example.revoked"
    device = Device(server, tmp_path, "watch", suite, server.token(account, device="watch"))
    device.write("steps", "-int", "100")
    device.sync()

    page.on("dialog", lambda dialog: dialog.accept())  # should the console ask first
    row = wait_for_device(page, account, "watch")
    device_id = row.get_attribute("data-device-id")
    form = row.locator("form.revoke-device")
    assert form.locator("input[type=hidden][name=csrf]").input_value()
    response = submit(page, form.get_by_role("button", name="Revoke device"))
    assert redirect_status(response) == 303, f"revoking a device: {redirect_status(response)} then {response.status}"
    assert path(page) == account_path(account)

    device.write("steps", "-int", "200")
    result = device.sync(check=False)
    assert result.returncode == 3, (f"a sync after revoking {device_id} exited {result.returncode}, not 3\n"
                                    f"stdout: {result.stdout}\nstderr: {result.stderr}")


def test_remove_member(server, page, tmp_path):
    """An owner shares a suite with another account (the real tools) and pins keys; the operator
    sees the member, its role and the pinned keys on the suite's page and removes the member; the
    member's next sync is refused."""
    owner, member, suite = "fay", "hal", "family"
    phone = Device(server, tmp_path, "fay-phone", suite, server.token(owner, device="phone"))
    phone.write("doorbell", "ding.caf")
    phone.sync()
    shared = run([phone.sync_tool, "share", suite, "--directory", phone.directory, "--role", "write"])
    code = next(line for line in shared.stdout.splitlines() if line.startswith("code: "))[len("code: "):]
    laptop_dir = pathlib.Path(tmp_path) / "hal-laptop"
    laptop_token = pathlib.Path(tmp_path) / "hal.token"
    fd = os.open(laptop_token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(server.token(member, device="laptop") + "\n")
    run([phone.sync_tool, "configure", "--invitation", code, "--server", server.url, "--token-file", laptop_token,
         "--as", "home", "--directory", laptop_dir])
    run([phone.sync_tool, "sync", "home", "--directory", laptop_dir])
    # Keys pinned for the members are listed, as text (a name is escaped, never markup).
    run([phone.sync_tool, "pin", suite, "--directory", phone.directory, "doorbell", "<b>loud</b>"])

    page.goto(server.url + suite_path(owner, suite))
    expect(page.locator("#pinned code.pin")).to_have_text(["<b>loud</b>", "doorbell"])
    assert page.locator("#pinned b").count() == 0
    row = page.locator(f"table#members tr[data-member={css_string(member)}]")
    expect(row.locator("td.role")).to_have_text("write")
    expect(page.locator("table#invitations td.state")).to_have_text("accepted")
    form = row.locator("form.remove-member")
    assert form.locator("input[type=hidden][name=csrf]").input_value()
    response = submit(page, form.get_by_role("button", name="Remove"))
    assert redirect_status(response) == 303, f"removing a member: {redirect_status(response)} then {response.status}"
    expect(page.locator("#sharing")).to_contain_text("No other account shares this suite.")

    refused = run([phone.sync_tool, "sync", "home", "--directory", laptop_dir], check=False)
    assert refused.returncode == 3 and "not shared with this account" in refused.stderr, (
        f"a sync after the removal exited {refused.returncode}\nstderr: {refused.stderr}")
    page.goto(server.url + "/console/audit?account=" + owner)
    expect(page.locator("table#audit tbody tr").nth(0).locator("td.act")).to_have_text("member-remove")
    expect(page.locator("table#audit tbody tr").nth(0).locator("td.actor")).to_have_text(OPERATOR)


def test_audit_log(server, page, tmp_path):
    account, suite = "eli", "group.com.example.audited"
    device = Device(server, tmp_path, "tablet", suite, server.token(account, device="tablet"))
    device.write("steps", "-int", "1")
    device.sync()
    row = wait_for_device(page, account, "tablet")
    device_id = row.get_attribute("data-device-id")
    page.on("dialog", lambda dialog: dialog.accept())
    submit(page, row.locator("form.revoke-device").get_by_role("button", name="Revoke device"))

    # The header's link leads to the log; filtered by account, newest first.
    page.locator("header a.audit-link").click()
    assert path(page) == "/console/audit"
    page.locator("input[name=account]").fill(account)
    page.get_by_role("button", name="Filter").click()
    rows = page.locator("table#audit tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0).locator("td.act")).to_have_text("device-revoke")
    expect(rows.nth(0).locator("td.actor")).to_have_text(OPERATOR)
    expect(rows.nth(0)).to_contain_text(device_id)
    expect(rows.nth(0)).to_contain_text("console, ")
    expect(rows.nth(1).locator("td.act")).to_have_text("token-create")
    expect(rows.nth(1).locator("td.actor")).to_have_text("command line")
    assert PASSWORD not in page.content()


# --- 6. Names and values are text, never markup ---------------------------------------------------

HOSTILE_KEY = "<img src=x onerror=alert(1)>"
HOSTILE_VALUE = "<script>alert(2)</script>"
HOSTILE_VALUE_2 = "<script>alert(3)</script><img src=y onerror=alert(4)>"


def test_markup_is_rendered_inert(server, page, tmp_path):
    account, suite = "eve", "group.com.example.xss"
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    device = Device(server, tmp_path, "desktop", suite, server.token(account, device="desktop"))
    device.write(HOSTILE_KEY, HOSTILE_VALUE)
    device.sync()

    page.goto(suite_path(account, suite))
    row = key_row(page, HOSTILE_KEY)
    expect(row).to_have_count(1)
    assert row.locator(".key").inner_text().strip() == HOSTILE_KEY
    assert HOSTILE_VALUE in row.locator(".value").inner_text()
    assert page.locator("#keys img").count() == 0

    # The live tail.
    wait_until_live(page)
    device.write(HOSTILE_KEY, HOSTILE_VALUE_2)
    device.sync()
    tail = page.locator("#tail-rows tr").first
    expect(tail).to_be_visible(timeout=1_000)
    assert tail.locator(".key").inner_text().strip() == HOSTILE_KEY
    assert HOSTILE_VALUE_2 in tail.locator(".value").inner_text()
    assert page.locator("#tail img").count() == 0

    # The history.
    submit(page, row.locator(".key a"))
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query).get("key") == [HOSTILE_KEY]
    rows = page.locator("table#history tbody tr")
    expect(rows).to_have_count(2)
    assert HOSTILE_VALUE_2 in rows.nth(0).locator(".value").inner_text()
    assert HOSTILE_VALUE in rows.nth(1).locator(".value").inner_text()
    assert page.locator("#history img").count() == 0
    assert HOSTILE_KEY in page.locator("body").inner_text()  # the key named on the page, as text

    page.wait_for_timeout(200)  # an onerror would have fired by now
    assert dialogs == [], f"dialogs opened: {dialogs}"


# --- 7. Forms refuse posts without their CSRF token, and cross-site posts -------------------------

def test_csrf(server, page):
    account = "gus"
    server.token(account)  # the account, with one token made beside the server
    page.goto(account_path(account))
    form = page.locator("form#create-token")
    csrf = form.locator("input[name=csrf]").input_value()
    action = urllib.parse.urljoin(page.url, form.get_attribute("action") or page.url)
    fields = {"device": "", "suites": "*"}

    # In the browser: the form without its hidden field.
    page.evaluate("document.querySelector('form#create-token input[name=csrf]').remove()")
    form.locator("input[name=device]").fill("no-csrf")
    response = submit(page, form.get_by_role("button", name="Create token"))
    assert response.status == 403, f"a form posted without its csrf field: {response.status}"
    expect(page.locator("body")).to_contain_text(FOREIGN_REFUSAL)

    # With the session cookie: no csrf field, a wrong one, and the right one from another site.
    page.goto(account_path(account))
    csrf = form.locator("input[name=csrf]").input_value()
    same_site = {"Origin": server.url}
    for what, form_fields, headers in [
        ("no csrf field", fields, same_site),
        ("a wrong csrf field", {**fields, "csrf": "0" * len(csrf)}, same_site),
        ("an empty csrf field", {**fields, "csrf": ""}, same_site),
        ("the right csrf field from another site", {**fields, "csrf": csrf}, {"Origin": "https://evil.example"}),
    ]:
        answer = page.request.post(action, form=form_fields, headers=headers, max_redirects=0)
        assert answer.status == 403, f"a post with {what}: {answer.status}"
        assert FOREIGN_REFUSAL in answer.text(), f"a post with {what}: {answer.text()[:500]}"

    # None of those made a token; the right field from this site does.
    page.goto(account_path(account))
    expect(page.locator("table#tokens tr[data-token-id]")).to_have_count(1)
    csrf = form.locator("input[name=csrf]").input_value()
    answer = page.request.post(action, form={**fields, "csrf": csrf}, headers=same_site, max_redirects=0)
    assert answer.status == 303, f"a post with the right csrf field: {answer.status}: {answer.text()[:500]}"
    page.goto(account_path(account))
    expect(page.locator("table#tokens tr[data-token-id]")).to_have_count(2)


def test_sign_in_lockout_from_elsewhere(server, anonymous_page):
    """Failed sign-ins for the operator's name from another address (127.0.0.2) end in 429 there,
    and never lock the operator out of their own (the browser, 127.0.0.1)."""
    import http.client
    import re

    port = int(urllib.parse.urlsplit(server.url).port)

    def attempt():
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=("127.0.0.2", 0))
        connection.request("GET", "/console/sign-in")
        form = connection.getresponse()
        body = form.read().decode()
        cookie = "; ".join(c.split(";")[0] for c in form.headers.get_all("Set-Cookie") or [])
        csrf = re.search(r'name="csrf" value="([^"]+)"', body).group(1)
        fields = urllib.parse.urlencode({"csrf": csrf, "name": OPERATOR, "password": "not the password"})
        connection.request("POST", "/console/sign-in", body=fields, headers={
            "Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie, "Origin": server.url})
        answer = connection.getresponse()
        answer.read()
        connection.close()
        return answer.status

    statuses = [attempt() for _ in range(11)]
    assert statuses[:10] == [401] * 10, f"the first ten wrong passwords from 127.0.0.2: {statuses}"
    assert statuses[10] == 429, f"the eleventh from 127.0.0.2: {statuses}"

    # The operator, from their own address, signs in as ever.
    page = anonymous_page
    page.goto(server.url + "/console/sign-in")
    response = sign_in(page)
    assert response.status in (200, 303), f"the operator's own sign-in: {response.status}"
    expect(page.locator("form#sign-out")).to_have_count(1)


# --- Pictures for the docs -------------------------------------------------------------------------

@pytest.mark.skipif(not SCREENSHOTS, reason="pictures only with Tools/console-test --screenshots")
def test_screenshots(browser, tmp_path):
    """The docs' pictures, from a server of their own (embedded storage) with a small, plausible
    account: docs/console-{overview,account,suite,history,phone}.png."""
    server = Server("embedded").start()
    context = None
    try:
        suite = "group.com.example.chat"
        phone = Device(server, tmp_path, "phone", suite, server.token("ana", device="Ana's iPhone"))
        tablet = Device(server, tmp_path, "tablet", suite, server.token("ana", device="Ana's iPad"))
        notes = Device(server, tmp_path, "notes", "group.com.example.notes", server.token("bo", device="Bo's Mac"))
        phone.write("sound", "ring.wav")
        phone.write("volume", "-int", "7")
        phone.write("preview", "-bool", "true")
        phone.sync()
        tablet.sync()
        tablet.write("sound", "bell.wav")
        tablet.write("preview", "-bool", "false")
        tablet.sync()
        notes.write("sort", "date")
        notes.sync()
        server.token("cy", suites="group.com.example.*")

        context = browser.new_context(base_url=server.url, viewport=DESKTOP)
        page = context.new_page()
        sign_in(page)
        assert path(page) == "/console"
        wait_for_device(page, "ana", "Ana's iPad")
        wait_for_device(page, "ana", "Ana's iPhone")
        shots = SCREENSHOTS
        os.makedirs(shots, exist_ok=True)
        page.goto("/console")
        page.screenshot(path=os.path.join(shots, "console-overview.png"))
        page.goto(account_path("ana"))
        page.screenshot(path=os.path.join(shots, "console-account.png"))
        page.goto(suite_path("ana", suite))
        wait_until_live(page)
        phone.write("volume", "-int", "9")
        phone.sync()
        expect(tail_row(page, "volume")).to_be_visible(timeout=1_000)
        page.screenshot(path=os.path.join(shots, "console-suite.png"))
        page.set_viewport_size(PHONE)
        page.screenshot(path=os.path.join(shots, "console-phone.png"))
        page.set_viewport_size(DESKTOP)
        page.goto(suite_path("ana", suite) + "/history?key=sound")
        expect(page.locator("table#history tbody tr")).to_have_count(2)
        page.screenshot(path=os.path.join(shots, "console-history.png"))
    finally:
        if context:
            context.close()
        server.stop()
