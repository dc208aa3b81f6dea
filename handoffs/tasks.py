"""The periodic task of the ``agent_handoffs`` table: its partitions made ahead (handoffs/partitions.py)."""

from __future__ import annotations

from handoffs.partitions import partitions_ensure
from platform.celery import app


@app.task(name="handoffs.partitions_ensure", ignore_result=True)
def handoff_partitions_ensure() -> int:
    """Celery beat, every hour (without a broker, ``manage.py periodic``): make the partitions of this month and the
    months ahead, and of any row the DEFAULT partition holds. Returns how many were made."""
    return len(partitions_ensure())
