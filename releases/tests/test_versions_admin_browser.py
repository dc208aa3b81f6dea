"""The admin's home page in a real browser (Debian's Chromium, as tests/browser_fixtures.py starts it): the tool
modules above the app list keep their links on one line beside "Recent actions", at 1400 and 1920 pixels wide.
"""

from __future__ import annotations

import pytest

from tests.browser_fixtures import screenshot_path, submit_login

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(params=[1400, 1920], ids=lambda width: f"{width}px")
def browser_viewport(request) -> dict[str, int]:
    return {"width": request.param, "height": 1000}


def test_the_admin_homes_tool_links_stay_on_one_line_beside_recent_actions(
    live_server, browser_page, staff_user, browser_viewport
):
    page, base = browser_page, live_server.url
    page.goto(base + "/admin/login/?next=/admin/")
    submit_login(page, "analyst", "analyst-password")
    page.screenshot(path=str(screenshot_path(f"admin-home-{browser_viewport['width']}.png")), full_page=True)

    line_height = page.evaluate("parseFloat(getComputedStyle(document.querySelector('#chat-module th a')).lineHeight)")
    for link in ("#routing-tools-module th a", "#chat-module th a", "#analytics-module th a"):
        box = page.locator(link).bounding_box()
        assert box is not None, link
        assert box["height"] < 1.5 * line_height, f"{link} wraps: {box}"
    main = page.locator("#content-main").bounding_box()
    recent = page.locator("#content-related").bounding_box()
    for module in ("#routing-tools-module", "#chat-module", "#analytics-module"):
        box = page.locator(module).bounding_box()
        assert box["x"] + box["width"] <= main["x"] + main["width"] + 1, f"{module} is wider than the page's column"
        assert box["x"] + box["width"] <= recent["x"], f"{module} runs under Recent actions"
    assert page.errors == []
