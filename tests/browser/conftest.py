"""Real-browser fixtures: Debian's Chromium driven by Playwright, one context per test, and a
full-page screenshot of every page a test visits (``var/test-artifacts/screenshots/``)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Response, expect, sync_playwright
from pytest_django.live_server_helper import LiveServer

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts" / "screenshots"
#: How long an expectation or action waits before failing the test (milliseconds).
TIMEOUT_MS = 10_000

Screenshot = Callable[[str], Path]
_CALL_REPORT = pytest.StashKey[pytest.TestReport]()


def _slug(text: str) -> str:
    return re.sub(r"[^\w.-]+", "-", text)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep the call-phase report on the item so the page fixture can see a failure."""
    report = yield
    if report.when == "call":
        item.stash[_CALL_REPORT] = report
    return report


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """One headless Chromium for all browser tests.

    Package scope, not session: while Playwright's sync API runs, its asyncio loop counts as
    running in the main thread. Stopping it after the last browser test keeps that loop (and
    ``DJANGO_ALLOW_ASYNC_UNSAFE``, which lets these tests use the ORM meanwhile) away from every
    other test of a full run.
    """
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium package (.ci/run does)")
    expect.set_options(timeout=TIMEOUT_MS)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                yield launched
            finally:
                launched.close()


@pytest.fixture
def screenshot_dir(request: pytest.FixtureRequest) -> Path:
    """This test's screenshot folder, emptied of an earlier run's pictures."""
    folder = SCREENSHOTS / _slug(request.node.name)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


@pytest.fixture
def expected_errors() -> set[int]:
    """Error statuses this test means to see (it adds them); any other fails the test."""
    return set()


@pytest.fixture
def page(
    browser: Browser,
    live_server: LiveServer,
    screenshot_dir: Path,
    expected_errors: set[int],
    request: pytest.FixtureRequest,
) -> Iterator[Page]:
    """A page in a fresh context (no cookies) on the live server. Fails the test when the console
    answered any request with an error status not in ``expected_errors`` or a script threw."""
    context = browser.new_context(
        base_url=live_server.url, viewport={"width": 1280, "height": 800}, locale="en-US"
    )
    context.set_default_timeout(TIMEOUT_MS)
    tab = context.new_page()
    problems: list[str] = []

    def on_response(response: Response) -> None:
        if response.status >= 400 and response.status not in expected_errors:
            problems.append(f"HTTP {response.status} {response.request.method} {response.url}")

    tab.on("response", on_response)
    tab.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    try:
        yield tab
        report = request.node.stash.get(_CALL_REPORT, None)
        if report is not None and report.failed and not tab.is_closed():
            tab.screenshot(path=screenshot_dir / "99-failure.png", full_page=True)
    finally:
        context.close()
    assert not problems, "\n".join(problems)


@pytest.fixture
def screenshot(page: Page, screenshot_dir: Path) -> Screenshot:
    """``screenshot("step")`` saves the whole current page as ``NN-step.png`` in this test's
    folder and returns its path."""
    taken = 0

    def take(step: str) -> Path:
        nonlocal taken
        taken += 1
        path = screenshot_dir / f"{taken:02d}-{_slug(step)}.png"
        page.wait_for_load_state("load")
        page.screenshot(path=path, full_page=True)
        return path

    return take
