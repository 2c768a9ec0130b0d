"""Fenced zombie attempts of the sink's producer mode, recorded where they happen so that opsd can count them.

A zombie (a task attempt Spark gave up on that still runs) learns it was fenced off when its push is refused for an
older epoch (`streaming_core.sink_producer`): in a Spark worker, after its batch may have committed without it. Its
failure never reaches the batch's commit message nor the query's failure (Spark ignores a superseded attempt), so
the refused attempt records itself, before it fails, as one attribute of the query's fences document, next to the
tuning document its sink reads: `@<session>_<epoch % FENCE_SLOTS>`. A session's epoch identifies the one attempt that
opened it at that epoch, so two fenced attempts never share an attribute unless `FENCE_SLOTS` epochs apart (the older
record is replaced then: the document never grows past `FENCE_SLOTS` records a session). A record that cannot be
stored is logged, never raised: the attempt fails with its own error all the same. This module is pure (opsd's pure
steps read it); the refused attempt stores its fence and opsd reads them through `streaming_core.sink_producer`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: Fenced attempts kept per session (by epoch modulo this).
FENCE_SLOTS = 16


def fences_path(tuning_path: str | None) -> str | None:
    """Where a query's fenced attempts are recorded: next to the tuning document its sink reads (none without one)."""
    return f"{tuning_path}_producer_fences" if tuning_path else None


def fence_attribute(fence: Fence) -> str:
    """The fences document's attribute that records `fence`."""
    return f"{fence.session}_{fence.epoch % FENCE_SLOTS}"


@dataclass(frozen=True)
class Fence:
    """One attempt refused for an older epoch: its session and the epoch it held, its task, and when (unix
    seconds)."""

    session: str
    epoch: int
    batch_id: int
    partition: int
    attempt: int
    at: float

    @property
    def key(self) -> str:
        """What tells this fence from every other: its session, epoch and time."""
        return f"{self.session}@{self.epoch}@{self.at!r}"

    @classmethod
    def from_document(cls, value: object) -> Fence | None:
        """A record as stored; None for anything else (the document is read, never trusted)."""
        if not isinstance(value, Mapping):
            return None
        try:
            return cls(str(value["session"]), int(value["epoch"]), int(value["batch_id"]), int(value["partition"]),
                       int(value["attempt"]), float(value["at"]))
        except (KeyError, TypeError, ValueError):
            return None
