"""The example servers' tests run them as real processes, with the fixtures of ``tests/mcp_fixtures.py``."""

import pytest


def pytest_configure(config):
    # A no-op once the root conftest lists "tests.mcp_fixtures" in pytest_plugins.
    config.pluginmanager.import_plugin("tests.mcp_fixtures")


@pytest.fixture
def anyio_backend():
    return "asyncio"
