"""What every console page in the browser tests must pass: axe-core without violations, nothing
wider than 390 px, and (when named) full-page screenshots at 1366 and 390 px under
``var/screenshots/``; and logging in through the form."""

from __future__ import annotations

from pathlib import Path

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
_AXE = Axe()
#: The elements reaching past the right edge (to say what overflows).
_WIDE = """Array.from(document.querySelectorAll('body *'))
  .filter(e => e.getBoundingClientRect().right > 391)
  .slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + e.getBoundingClientRect().right)"""


def check(page: Page, name: str | None = None) -> None:
    """axe-core finds nothing on the page; at 390 px nothing overflows sideways. With ``name``,
    full-page screenshots at 1366 and 390 px are saved as ``var/screenshots/NAME-WIDTH.png``."""
    results = _AXE.run(page)
    assert results.violations_count == 0, results.generate_report()
    size = page.viewport_size
    for width in (1366, 390):
        page.set_viewport_size({"width": width, "height": 900})
        if width == 390:
            overflow = page.evaluate("document.documentElement.scrollWidth")
            wide = page.evaluate(_WIDE) if overflow > 390 else []
            assert overflow <= 390, f"{page.url} is {overflow} px wide at 390 px: {wide}"
        if name:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=SCREENSHOTS / f"{name}-{width}.png", full_page=True)
    if size:
        page.set_viewport_size(size)


def log_in(page: Page, username: str) -> None:
    """Log in as a demo user through the login form (which passes :func:`check` too)."""
    page.goto("/login/")
    check(page)
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(f"{username}-demo-pass")
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("form.who span")).to_have_text(username)
