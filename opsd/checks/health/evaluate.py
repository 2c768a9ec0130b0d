"""Whether a query is stalled: an active query with backlog that made no batch progress within its window.

A query that is merely idle (nothing to read) is healthy; one that has rows waiting and still does not complete
a batch is stuck (a hung sink, a lost executor, a deadlocked source). Pure: the time is a parameter.
"""

from __future__ import annotations

from opsd.observe.readiness import ProgressPolicy
from opsd.observe.status import QueryStatus


def is_stalled(status: QueryStatus, backlog_rows: int | None, now: float, policy: ProgressPolicy) -> bool:
    """True when an active query with backlog made no batch progress within its window.

    Progress counts from this run's start when that is later than the last batch (a query restarted after a
    long backoff is judged from its new start). Unknown backlog is not evidence of a stall.
    """
    if not status.active or backlog_rows is None or backlog_rows <= 0:
        return False
    since = status.progress_since
    if since is None:
        return False
    return now - since > policy.window_seconds(status)
