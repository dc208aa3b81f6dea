"""What the suite's processes need from the environment that a deployment says for itself, set before Django reads
its settings: loaded with ``-p tests.suite_environment`` (``addopts`` in pyproject.toml), as ``tests.xdist_worker``
is, so that the processes a test starts (servers, Celery workers, ``manage.py``) inherit it. A value the environment
already has is kept.

* ``OUTBOUND_ALLOWED``: the suite's own servers — the example MCP servers, the scripted OpenAI-compatible server,
  the webhook receivers, the hosts of ``tests/test_multi_host.py`` — listen on loopback, which the outbound policy
  (``common/outbound.py``) refuses unless the operator allows it. The suite allows loopback, as ``scripts/start``
  allows its own servers; the tests of the policy itself allow less.
* ``ROLLOUT_WEBHOOK_SECRET``: a rollout plan's webhook is signed with a secret of its own, or not posted.
"""

from __future__ import annotations

import os

os.environ.setdefault("OUTBOUND_ALLOWED", "127.0.0.0/8,::1")
os.environ.setdefault("ROLLOUT_WEBHOOK_SECRET", "suite-rollout-webhook-secret-not-for-production")
