"""The watchdog: the scheduled health check. Collect (status snapshots, with the backlog the last progress reported)
-> evaluate (`is_stalled`) -> apply (the verdicts, through the recorder)."""

from __future__ import annotations

import time
from collections.abc import Callable

from opsd.checks.health.evaluate import is_stalled
from opsd.observe.readiness import ProgressPolicy
from opsd.observe.recorder import Recorder


class Watchdog:
    """The stalled-query watchdog (`opsd.checks.registry` builds it)."""

    name = "watchdog"

    def __init__(
        self,
        recorder: Recorder,
        policy: ProgressPolicy | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.recorder = recorder
        self.policy = policy or ProgressPolicy()
        self.clock = clock

    def run(self) -> dict[str, bool]:
        """Judge every known query and record the verdicts; returns them for logs and tests."""
        now = self.clock()
        verdicts = {
            name: is_stalled(status, status.backlog_rows, now, self.policy)
            for name, status in self.recorder.status.snapshot().items()
        }
        for name, stalled in verdicts.items():
            self.recorder.record_stalled(name, stalled)
        return verdicts
