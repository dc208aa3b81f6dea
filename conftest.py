"""Root pytest configuration.

pytest imports the standard library's ``platform`` before any project code runs,
so the name may already be bound to the stdlib module here. Re-import it as our
package (which re-executes the stdlib source, see ``platform/__init__.py``)
before Django loads ``platform.settings``.
"""

import os
import sys

if not hasattr(sys.modules.get("platform"), "__path__"):
    sys.modules.pop("platform", None)
    import platform  # noqa: F401

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform.settings")

pytest_plugins = [
    "tests.fixtures",
    "tests.admin_fixtures",
    "tests.mcp_fixtures",
    "tests.hostile_mcp",
    "tests.celery_fixtures",
    "tests.platform_instance",  # after celery_fixtures, which it imports
    "tests.browser_fixtures",
    "tests.desk_fixtures",
    "tests.production_stack",
    "tests.outbound_fixtures",
]
