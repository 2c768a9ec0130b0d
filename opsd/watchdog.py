"""The stalled-query watchdog: no progress within k trigger intervals while data waits.

A query that is merely idle (nothing to read) is healthy; one that has rows waiting and still does
not complete a batch is stuck (a hung sink, a lost executor, a deadlocked source). The decision is a
pure function of one :class:`~opsd.status.QueryStatus`; :class:`Watchdog` is the scheduled check
that applies it to every known query through the recorder.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from opsd.recorder import Recorder
from opsd.status import ProgressPolicy, QueryStatus

# Where the backlog comes from: by default the last progress event; the desync check can supply a
# fresher number read from the cluster.
BacklogProvider = Callable[[QueryStatus], int | None]


def last_reported_backlog(status: QueryStatus) -> int | None:
    return status.backlog_rows


def is_stalled(status: QueryStatus, backlog_rows: int | None, now: float, policy: ProgressPolicy) -> bool:
    """True when an active query with backlog made no batch progress within its window.

    Before the first batch the start time stands in for the last progress. Unknown backlog is not
    evidence of a stall.
    """
    if not status.active or backlog_rows is None or backlog_rows <= 0:
        return False
    since = status.last_progress_at or status.started_at
    if since is None:
        return False
    return now - since > policy.window_seconds(status)


class Watchdog:
    """The scheduled check: ``scheduler.add_check("watchdog", watchdog.run, interval)``."""

    def __init__(
        self,
        recorder: Recorder,
        policy: ProgressPolicy | None = None,
        backlog: BacklogProvider = last_reported_backlog,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.recorder = recorder
        self.policy = policy or ProgressPolicy()
        self.backlog = backlog
        self.clock = clock

    def run(self) -> dict[str, bool]:
        """Judge every known query and record the verdicts; returns them for logs and tests."""
        now = self.clock()
        verdicts = {
            name: is_stalled(status, self.backlog(status), now, self.policy)
            for name, status in self.recorder.status.snapshot().items()
        }
        for name, stalled in verdicts.items():
            self.recorder.record_stalled(name, stalled)
        return verdicts
