"""Signals the conversation store sends when rows that may be counted already change.

Sent inside the transaction that changes the rows; receivers run in it too. The analytics' daily totals
listen (analytics/apps.py) and mark the days stale, so that no writer has to know about them.
"""

from __future__ import annotations

from django.dispatch import Signal

# A conversation changed what it is counted under (its cohort, language, or the kinds of move it has had).
# Keyword arguments: ``created_at``, when the conversation was created (the day it is counted on); ``every_day``
# (optional, default false): what its rows of every day since are counted under changed too.
conversation_recounted = Signal()

# An escalation changed: opened, taken, a person's message, transferred, returned, closed. Keyword arguments:
# ``escalation`` (the row), ``kind`` (that word) and, for a message, ``message`` (as the sessions API shows it) —
# for a transfer, and a hand-back with a note, the internal note it left.
# Sent once the change is committed; the external desks listen (their webhook).
escalation_changed = Signal()

# Rows of the store were deleted (a session's history cleared). Keyword argument: ``hours``, the UTC hours (their
# starts) the deleted rows had been written in.
store_rows_deleted = Signal()

# Outcome rows are about to change or go: a decided conversation's ratings counted again, its outcome replaced, or
# the conversation opened again by a customer's message. Keyword argument: ``hours``, the UTC hours (their starts)
# the rows were decided in.
outcomes_changed = Signal()

# A rating of an answer was given or changed (up to down, down to up): what the ratings of that answer's hour count
# changed. Keyword argument: ``hours``, the UTC hours (their starts) the rated answers were given in — a rating counts
# by when its answer was given, not when it was rated. (A rating goes only with its answer: a cleared session's
# ``store_rows_deleted``, a retention purge's ``store_rows_retiring``, a tenant's deletion with every row of it.)
ratings_changed = Signal()

# Rows of the store are about to be deleted for good (a tenant's retention purge). Keyword arguments: ``since`` and
# ``before``, the span the rows were written in (``before`` a UTC midnight). Sent before any of them goes, outside a
# transaction: the analytics sum the closed days of the span first, and from then on keep those days' totals as they
# are (tenants.RetentionPurge records the cutoffs), so the dashboard's figures stay what they were.
store_rows_retiring = Signal()
