"""Fixtures for tests in a real browser: Debian's Chromium driven by Playwright.

Chromium comes from ``scripts/bootstrap --with-chromium`` (``scripts/test`` asks for it); Playwright starts
that binary (``executable_path``) and never downloads a browser of its own. Without Chromium the tests skip
on a developer's machine and fail under ``CI=true``. :func:`screenshot_path` puts screenshots under the test
run's output folder (``test-output/screenshots/``, or ``$TEST_OUTPUT_DIR/screenshots/``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",  # root in CI containers; Chromium's sandbox needs user namespaces it may not have there
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WAIT_MS = 20_000


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _unavailable(reason: str) -> None:
    if _in_ci():
        pytest.fail(f"{reason}; CI must run the browser tests (scripts/test bootstraps --with-chromium).")
    pytest.skip(reason)


def screenshot_path(name: str) -> Path:
    folder = Path(os.environ.get("TEST_OUTPUT_DIR") or ROOT / "test-output") / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


@pytest.fixture(scope="module")
def chromium():
    executable = shutil.which("chromium")
    if executable is None:
        _unavailable("Debian's chromium is not installed (scripts/bootstrap --with-chromium installs it)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (it is in requirements.txt)")
    # Playwright's sync API parks its event loop in this thread between calls, and Django's ORM refuses to run
    # where a loop is running (it guards coroutines against blocking queries). Nothing here is a coroutine:
    # the test's own queries (data, the database flush) run between Playwright calls, never inside one.
    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def browser_viewport() -> dict[str, int]:
    """Override in a test module for another window size."""
    return {"width": 1400, "height": 1000}


@pytest.fixture
def browser_page(chromium, browser_viewport):
    """A fresh page (its own context: no cookies shared between tests); ``page.errors`` collects page errors."""
    context = chromium.new_context(viewport=browser_viewport, locale="en-US", timezone_id="UTC")
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.errors = errors
    yield page
    context.close()


def submit_login(page, username: str, password: str) -> None:
    """Fill the admin's login form on the page and send it; returns once the browser has left the login page (a
    wrong password stays there: the wait times out). Waiting for ``#content-main`` or for the load state would
    return at once, on the login page itself, and the test's next ``goto`` would race the form's post."""
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("#login-form input[type=submit]")
    page.wait_for_url(lambda url: urlsplit(url).path != "/admin/login/")
