"""Every page of the operator console passes axe-core (WCAG 2.1 A and AA) with no serious or critical
violation, in the real browser, on both storage backends; the live tail announces new rows to a
screen reader, and links are told apart from text by more than their colour.

axe-core comes with axe-playwright-python (pinned in Tools/console-test); it is injected into each
page and run there, as a person's browser extension would.
"""

import urllib.parse

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from conftest import Device, account_path, path_of, suite_path

WCAG_21_A_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
BLOCKING = {"serious", "critical"}

_axe = Axe()


def blocking_violations(page):
    """axe-core's WCAG 2.1 A/AA violations of serious or critical impact on the page as it is now,
    each as one readable line (rule, impact, help, the first elements it names)."""
    results = _axe.run(page, options={"runOnly": {"type": "tag", "values": WCAG_21_A_AA}})
    found = []
    for violation in results.response["violations"]:
        if violation.get("impact") not in BLOCKING:
            continue
        targets = [" ".join(map(str, node["target"])) for node in violation["nodes"][:3]]
        summary = (violation["nodes"][0].get("failureSummary") or "").replace("\n", " ")
        found.append(f"{violation['id']} ({violation['impact']}): {violation['help']} at {targets}: {summary}")
    return found


def assert_accessible(page, what):
    found = blocking_violations(page)
    assert not found, f"{what} ({urllib.parse.urlsplit(page.url).path}):\n  " + "\n  ".join(found)


@pytest.fixture
def account_with_history(server, tmp_path):
    """An account with a suite of two keys, one of them written twice, and a token: (account,
    suite, device)."""
    account, suite = "axe", "group.com.example.a11y"
    device = Device(server, tmp_path, "phone", suite, server.token(account, device="phone"))
    device.write("sound", "ring.wav")
    device.write("volume", "-int", "7")
    device.sync()
    device.write("sound", "bell.wav")
    device.sync()
    return account, suite, device


def test_every_page_passes_axe(server, page, anonymous_page, account_with_history):
    account, suite, device = account_with_history

    anonymous_page.goto("/console/sign-in")
    assert_accessible(anonymous_page, "the sign-in page")
    anonymous_page.locator("form#sign-in input[name=name]").fill("nobody")
    anonymous_page.locator("form#sign-in input[name=password]").fill("not the password")
    with anonymous_page.expect_navigation():
        anonymous_page.locator("form#sign-in button[type=submit]").click()
    assert_accessible(anonymous_page, "the sign-in page after a refused sign-in")

    page.goto("/console")
    assert_accessible(page, "the overview")
    page.goto(account_path(account))
    assert_accessible(page, "an account's page")
    page.goto(suite_path(account, suite))
    expect(page.locator("#tail-status")).to_have_text("live", timeout=10_000)
    device.write("theme", "dark")
    device.sync()
    expect(page.locator("#tail-rows tr")).to_have_count(1, timeout=5_000)
    assert_accessible(page, "a suite's page with a row in its live tail")
    page.goto(suite_path(account, suite) + "/history?key=sound")
    assert_accessible(page, "a key's history")
    page.goto("/console/audit")
    assert_accessible(page, "the audit log")
    page.goto("/console/audit?account=" + account)
    assert_accessible(page, "an account's audit log")

    # The page that shows a new token once.
    page.goto(account_path(account))
    form = page.locator("form#create-token")
    with page.expect_navigation():
        form.locator("button[type=submit]").click()
    assert_accessible(page, "the page of a token just made")

    # Pages that say something is not there.
    page.goto(path_of("accounts", "nobody-here", "suites", "none"))
    assert_accessible(page, "a suite that does not exist")
    page.goto(suite_path(account, suite) + "/history?key=no-such-key")
    assert_accessible(page, "the history of a key never written")


def test_live_tail_announces_new_rows(server, page, account_with_history):
    account, suite, device = account_with_history
    page.goto(suite_path(account, suite))
    expect(page.locator("#tail-status")).to_have_text("live", timeout=10_000)
    # A live region: what is added to it is read out; the status says when the tail is live.
    live = page.locator("#tail-rows")
    assert live.get_attribute("aria-live") == "polite", "the live tail's rows are not a polite live region"
    assert live.get_attribute("aria-relevant") in (None, "additions", "additions text"), \
        f"the live tail announces {live.get_attribute('aria-relevant')!r}, not its new rows"
    assert page.locator("#tail-status").get_attribute("role") == "status"
    device.write("theme", "dark")
    device.sync()
    expect(page.locator("#tail-rows tr")).to_have_count(1, timeout=5_000)
    # Inside the region, so that it is what the screen reader reads.
    assert page.locator("[aria-live] tr").count() == 1


def test_links_in_text_are_underlined(server, page, account_with_history):
    """A link inside text (not a whole cell, button or menu) is underlined, so that it is told
    apart without seeing colour (WCAG 1.4.1)."""
    account, suite, _ = account_with_history
    for url in ["/console", account_path(account), suite_path(account, suite), suite_path(account, suite) + "/history?key=sound"]:
        page.goto(url)
        decorations = page.eval_on_selector_all(
            "main p a, main li a, main td a, main dd a",
            "links => links.map(a => [a.textContent.trim(), getComputedStyle(a).textDecorationLine])")
        assert decorations, f"no link in the text of {url}"
        plain = [text for text, line in decorations if "underline" not in line]
        assert not plain, f"links on {url} told apart by colour alone: {plain}"
