"""The watchdog: the scheduled health check. Collect (status snapshots, backlog) -> evaluate (`is_stalled`) ->
apply (the verdicts, through the recorder)."""

from __future__ import annotations

import time
from collections.abc import Callable

from opsd.checks.health.evaluate import is_stalled
from opsd.observe.readiness import ProgressPolicy
from opsd.observe.recorder import Recorder
from opsd.observe.status import QueryStatus

# Where the backlog comes from: by default the last progress event; the desync check can supply a
# fresher number read from the cluster.
BacklogProvider = Callable[[QueryStatus], int | None]


def last_reported_backlog(status: QueryStatus) -> int | None:
    return status.backlog_rows


class Watchdog:
    """The stalled-query watchdog (`opsd.checks.registry` builds it)."""

    name = "watchdog"

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
