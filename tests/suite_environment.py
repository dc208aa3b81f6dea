"""What the suite's processes need from the environment that a deployment says for itself, set before Django reads
its settings: loaded with ``-p tests.suite_environment`` (``addopts`` in pyproject.toml), as ``tests.xdist_worker``
is, so that the processes a test starts (servers, Celery workers, ``manage.py``) inherit it. A value the environment
already has is kept.

* ``OUTBOUND_ALLOWED``: the suite's own servers — the example MCP servers, the scripted OpenAI-compatible server,
  the webhook receivers, the hosts of ``tests/test_multi_host.py`` — listen on loopback, which the outbound policy
  (``common/outbound.py``) refuses unless the operator allows it. The suite allows loopback, as ``scripts/start``
  allows its own servers; the tests of the policy itself allow less.
* ``ROLLOUT_WEBHOOK_SECRET``: a rollout plan's webhook is signed with a secret of its own, or not posted.

One value is overridden, not kept: ``PYTHONDONTWRITEBYTECODE`` (the image sets it, and so may a shell). With it, every
process of a run compiled the project's modules again, and pytest rewrote every test module's assertions again in each
worker: about 19 s of CPU a worker to collect the suite, and half a second each ``manage.py``, server or Celery start.
The suite's processes write their bytecode beside the sources (``__pycache__``, ignored by git; where the folder is
read-only, Python and pytest go on without a cache), each module compiled once a run, not once a process.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("OUTBOUND_ALLOWED", "127.0.0.0/8,::1")
os.environ.setdefault("ROLLOUT_WEBHOOK_SECRET", "suite-rollout-webhook-secret-not-for-production")

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # for the processes started from here on
sys.dont_write_bytecode = False  # for this one (read from the variable when it started)
