"""The project package `platform` must keep the standard library's `platform` API working."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
sys.path.insert(0, {root!r})
import platform
assert hasattr(platform, "__path__"), "the project package must win"
import uuid
print(uuid.uuid4().version)
print(platform.system())
print(platform.python_version())
print(platform.machine() is not None)
import platform.settings
print("settings", platform.settings.ROOT_URLCONF)
"""


def test_uuid_and_stdlib_platform_api_work_with_the_project_root_first_on_sys_path():
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(root=str(ROOT))],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        check=False,
    )
    assert result.returncode == 0, result.stderr
    version, system, python_version, machine, settings_line = result.stdout.split("\n")[:5]
    assert version == "4"
    assert system == __import__("platform").system() != ""
    assert python_version == ".".join(str(part) for part in sys.version_info[:3])
    assert machine == "True"
    assert settings_line == "settings platform.urls"


def test_the_project_package_carries_the_stdlib_functions_in_this_process():
    import platform

    assert hasattr(platform, "__path__")
    assert platform.system()
    assert platform.python_version().startswith(f"{sys.version_info.major}.{sys.version_info.minor}")
    assert platform.uname().system == platform.system()
