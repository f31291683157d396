"""Fixtures of the operator console's browser tests (run them with Tools/console-test).

Every test runs twice, once per storage backend: a module-scoped groupdefaults-server with embedded
storage (a temporary --data-dir), then one on a throwaway PostgreSQL (Tools/postgres). Each server
has one operator, made with `groupdefaults-server admin create`; the operator signs in once per
server and the tests reuse that session (sign-in attempts are rate limited). One chromium (Debian's,
launched by Playwright from its path) serves the whole run; each test has a browser context of its
own.

Environment (Tools/console-test sets it):
    GROUPDEFAULTS_BIN_DIR       where groupdefaults-server, groupdefaults-sync and groupdefaults are
                                (default: .build/debug)
    CONSOLE_TEST_CHROMIUM       the browser (default: /usr/bin/chromium)
    CONSOLE_TEST_SCREENSHOTS    a directory: test_screenshots saves the docs' pictures there
                                (unset: that test is skipped and nothing is written outside
                                temporary directories)
"""

import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse

import pytest
from playwright.sync_api import expect, sync_playwright

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN_DIR = pathlib.Path(os.environ.get("GROUPDEFAULTS_BIN_DIR") or ROOT / ".build" / "debug")
CHROMIUM = os.environ.get("CONSOLE_TEST_CHROMIUM") or "/usr/bin/chromium"
SCREENSHOTS = os.environ.get("CONSOLE_TEST_SCREENSHOTS") or None

OPERATOR = "ops"
PASSWORD = "a long operator password, 7 words"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
COMMAND_TIMEOUT = 60  # seconds for one command-line call

expect.set_options(timeout=5_000)


def executable(name):
    path = BIN_DIR / name
    if not os.access(path, os.X_OK):
        pytest.exit(f"no executable {path}: build it (Tools/console-test does) or set GROUPDEFAULTS_BIN_DIR", 2)
    return str(path)


def run(args, *, input=None, check=True, cwd=None):
    """Runs a command; with `check`, a failure is an assertion that shows its output."""
    result = subprocess.run([str(a) for a in args], input=input, capture_output=True, text=True,
                            timeout=COMMAND_TIMEOUT, cwd=cwd, stdin=None if input is not None else subprocess.DEVNULL)
    if check and result.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, args))} exited {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}")
    return result


def path_of(*segments):
    """/console/… with every segment percent-encoded (names may hold spaces, '<', '?' …)."""
    return "/console/" + "/".join(urllib.parse.quote(s, safe="") for s in segments)


def account_path(account):
    return path_of("accounts", account)


def suite_path(account, suite):
    return path_of("accounts", account, "suites", suite)


# --- The server ----------------------------------------------------------------------------------

class Server:
    """A groupdefaults-server on a free loopback port with `backend` storage ("embedded" or
    "postgres"), its operator, and the server's command-line verbs on the same storage."""

    def __init__(self, backend):
        self.backend = backend
        self.work = pathlib.Path(tempfile.mkdtemp(prefix=f"console-test-{backend}."))
        self.binary = executable("groupdefaults-server")
        self.postgres_url = None
        self.process = None
        self.url = None

    @property
    def storage_args(self):
        if self.backend == "postgres":
            return ["--postgres-url", self.postgres_url]
        return ["--data-dir", str(self.work / "data")]

    def start(self):
        if self.backend == "postgres":
            started = run([ROOT / "Tools" / "postgres", "start", "--until-exit", os.getpid()])
            self.postgres_url = started.stdout.strip()
            assert self.postgres_url.startswith("postgres://"), f"Tools/postgres start printed {started.stdout!r}"
        out = open(self.work / "server.out", "w")
        err = open(self.work / "server.log", "w")
        self.process = subprocess.Popen(
            [self.binary, "serve", *self.storage_args, "--port", "0", "--log-level", "warning"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        out.close()
        err.close()
        # Its one line on stdout once it accepts connections: `listening on http://127.0.0.1:PORT`.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for line in (self.work / "server.out").read_text().splitlines():
                if line.startswith("listening on "):
                    self.url = line[len("listening on "):].strip().rstrip("/")
                    break
            if self.url:
                break
            if self.process.poll() is not None:
                raise AssertionError(f"groupdefaults-server exited {self.process.returncode} before it listened:\n"
                                     + self.log_tail())
            time.sleep(0.05)
        else:
            raise AssertionError("groupdefaults-server did not print 'listening on …' within 60 s:\n" + self.log_tail())
        assert self.url.startswith("http://127.0.0.1:"), f"unexpected address {self.url}"
        # The operator, made while the server runs (as `token create` is).
        self.admin("create", "--name", OPERATOR, input=PASSWORD + "\n")
        return self

    def stop(self, check=True):
        """SIGTERM, and the server's exit status (with `check`, it must be 0 within 10 s); then its
        PostgreSQL, and the temporary directory."""
        status = None
        try:
            if self.process and self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)
                try:
                    status = self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
                    status = "still running 10 s after SIGTERM (killed)"
            elif self.process:
                status = f"had exited already with {self.process.returncode}"
        finally:
            if self.postgres_url:
                run([ROOT / "Tools" / "postgres", "stop", self.postgres_url], check=False)
            log = self.log_tail()
            shutil.rmtree(self.work, ignore_errors=True)
        if check:
            assert status == 0, f"groupdefaults-server on SIGTERM: {status}\n{log}"

    def log_tail(self, lines=40):
        try:
            text = (self.work / "server.log").read_text(errors="replace").splitlines()
        except OSError:
            return "(no server log)"
        return "server log (last lines):\n" + "\n".join(text[-lines:])

    def cli(self, *args, input=None, check=True):
        return run([self.binary, *args, *self.storage_args], input=input, check=check)

    def admin(self, *args, input=None):
        return self.cli("admin", *args, input=input)

    def token(self, account, suites="*", device=None):
        """A token made with `token create` (printed once, one line)."""
        args = ["token", "create", "--account", account, "--suites", suites]
        if device:
            args += ["--device", device]
        token = self.cli(*args).stdout.strip()
        assert token and "\n" not in token, f"token create printed {token!r}"
        return token


# --- A device: a local suite mirrored by groupdefaults-sync ---------------------------------------

class Device:
    """A folder of suites on one device (so one device id), with `suite` configured for sync with
    `token` (kept in a token file of mode 0600)."""

    def __init__(self, server, root, name, suite, token):
        self.suite = suite
        self.directory = pathlib.Path(root) / name
        self.directory.mkdir(parents=True)
        self.token_file = pathlib.Path(root) / f"{name}.token"
        fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
        self.sync_tool = executable("groupdefaults-sync")
        self.defaults_tool = executable("groupdefaults")
        run([self.sync_tool, "configure", suite, "--directory", self.directory, "--server", server.url,
             "--token-file", self.token_file])

    def write(self, key, *value):
        """`groupdefaults write --directory DIR SUITE KEY VALUE…` (a string, or -TYPE VALUE)."""
        run([self.defaults_tool, "write", "--directory", self.directory, self.suite, key, *value])

    def sync(self, check=True):
        """`groupdefaults-sync sync SUITE`: pull, push, pull; the finished process."""
        return run([self.sync_tool, "sync", self.suite, "--directory", self.directory], check=check)


# --- Browser and sessions -------------------------------------------------------------------------

@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, "report_" + report.when, report)


@pytest.fixture(scope="session")
def browser():
    if not os.access(CHROMIUM, os.X_OK):
        pytest.exit(f"no browser at {CHROMIUM}: run Tools/install-deps console", 2)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture(scope="module", params=["embedded", "postgres"])
def server(request):
    server = Server(request.param)
    try:
        server.start()
    except BaseException:
        server.stop(check=False)
        raise
    yield server
    server.stop()


def sign_in(page, name=OPERATOR, password=PASSWORD):
    """Fills and submits the sign-in form; the response of the navigation (after redirects)."""
    page.goto("/console/sign-in")
    form = page.locator("form#sign-in")
    form.locator("input[name=name]").fill(name)
    form.locator("input[name=password]").fill(password)
    with page.expect_navigation() as navigation:
        form.locator("button[type=submit]").click()
    return navigation.value


@pytest.fixture(scope="module")
def operator_session(server, browser):
    """The operator's signed-in browser state on `server` (cookies), made by one sign-in."""
    context = browser.new_context(base_url=server.url)
    try:
        page = context.new_page()
        sign_in(page)
        assert urllib.parse.urlsplit(page.url).path == "/console", \
            f"signing in as {OPERATOR} ended at {page.url}:\n{page.content()[:2000]}"
        return context.storage_state()
    finally:
        context.close()


def dump_on_failure(request, page, server):
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        try:
            print(f"--- page {page.url}\n{page.content()[:4000]}")
        except Exception as error:  # the page may be gone
            print(f"--- page unavailable: {error}")
        print(server.log_tail())


@pytest.fixture
def page(request, browser, server, operator_session):
    """A page signed in as the operator, in a context of its own (1280x800)."""
    context = browser.new_context(base_url=server.url, storage_state=operator_session, viewport=DESKTOP)
    page = context.new_page()
    yield page
    dump_on_failure(request, page, server)
    context.close()


@pytest.fixture
def anonymous_page(request, browser, server):
    """A page with no session."""
    context = browser.new_context(base_url=server.url, viewport=DESKTOP)
    page = context.new_page()
    yield page
    dump_on_failure(request, page, server)
    context.close()
