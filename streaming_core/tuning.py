"""The live tuning document: how opsd changes batch sizes of a running query without restarting it.

The source's control calls, its readers and the sink's writers run in different processes (see the
architecture), so a value changed at run time must travel through storage they all reach: a small
document node in the cluster. The source reads it at every `latestOffset`, the sink at every `write()`;
the option or Spark conf value is the starting point and the fallback.

The source's keys are `max_rows_per_partition` and `max_bytes_per_partition` (each partition's batch stops at
whichever binds first), the sink's `dyn_batch_size`.

This module is the one owner of the rules both sides share: where a query's document is by default, and which
value is in force (the document's, else the fallback, and for `dyn_batch_size` never above YTsaurus' rows per
tablet transaction). The source, the sink and opsd all call it.

A missing or malformed document never fails a query: the fallback is used and the problem logged.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace

from .cluster import Cluster, ClusterError
from .cluster.base import DOCUMENT, MAX_ROWS_PER_TABLET_TRANSACTION
from .log import get_logger

log = get_logger(__name__)


def default_tuning_path(consumer_path: str | None) -> str | None:
    """A query's tuning document when its options name none: next to its consumer."""
    return f"{consumer_path}_tuning" if consumer_path else None


#: The document's tuned values (positive integers; a missing one means "use the option / conf value").
KNOBS = ("max_rows_per_partition", "max_bytes_per_partition", "dyn_batch_size")


@dataclass(frozen=True)
class Tuning:
    """Values in force for one query; None means "use the option / conf value"."""

    max_rows_per_partition: int | None = None
    dyn_batch_size: int | None = None
    updated_at: float | None = None
    reason: str | None = None
    max_bytes_per_partition: int | None = None

    @classmethod
    def from_document(cls, value: object, path: str) -> Tuning:
        if not isinstance(value, dict):
            raise ValueError(f"tuning document {path} must be a map, got {type(value).__name__}")
        for key in KNOBS:
            v = value.get(key)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise ValueError(f"tuning document {path}: {key} must be a positive integer, got {v!r}")
        return cls(max_rows_per_partition=value.get("max_rows_per_partition"),
                   dyn_batch_size=value.get("dyn_batch_size"), updated_at=value.get("updated_at"),
                   reason=value.get("reason"), max_bytes_per_partition=value.get("max_bytes_per_partition"))


def load_tuning(cluster: Cluster, path: str | None) -> Tuning:
    """The document at `path` as stored, an empty `Tuning` if there is none: what a writer (the auto-tuner, `opsd
    tuning`) goes by. `ClusterError` when it cannot be read now, `ValueError` naming the path when it is not a tuning
    document: a writer that took either for "no document" would write its knob over a person's values."""
    if not path or not cluster.exists(path):
        return Tuning()
    return Tuning.from_document(cluster.get(path), path)


def read_tuning(cluster: Cluster, path: str | None) -> Tuning:
    """The document at `path`, or an empty `Tuning` if there is none or it cannot be read or used (logged): what the
    source and the sink go by, so that a batch never fails on its tuning document."""
    try:
        return load_tuning(cluster, path)
    except (ClusterError, ValueError) as e:
        log.warning("tuning_document_ignored", path=path, error=str(e))
        return Tuning()


def max_rows_in_force(tuning: Tuning, fallback: int | None) -> int | None:
    """The source's per-partition cap: the document's, else the option's (None = no cap)."""
    return tuning.max_rows_per_partition or fallback


def max_bytes_in_force(tuning: Tuning, fallback: int | None) -> int | None:
    """The source's per-partition byte cap: the document's, else the option's (None = no byte cap)."""
    return tuning.max_bytes_per_partition or fallback


def dyn_batch_size_in_force(tuning: Tuning, fallback: int) -> int:
    """The sink's rows per insert call: the document's, else the option / conf, never above the transaction limit."""
    return min(tuning.dyn_batch_size or fallback, MAX_ROWS_PER_TABLET_TRANSACTION)


def write_tuning(cluster: Cluster, path: str, *, max_rows_per_partition: int | None = None,
                 dyn_batch_size: int | None = None, max_bytes_per_partition: int | None = None,
                 reason: str | None = None) -> Tuning:
    """Set values in the document (creating it), keeping the ones not given. Returns what is in force. A document
    that cannot be read now, or is not a tuning document, is left as it is (`load_tuning`'s errors)."""
    given = {"max_rows_per_partition": max_rows_per_partition, "max_bytes_per_partition": max_bytes_per_partition,
             "dyn_batch_size": dyn_batch_size}
    given = {k: v for k, v in given.items() if v is not None}
    Tuning.from_document(given, path)  # names a bad value, writes nothing
    current = load_tuning(cluster, path)
    tuning = replace(current, **given, updated_at=time.time(), reason=reason)
    if cluster.exists(path):
        cluster.set(path, asdict(tuning))
    else:
        cluster.create(DOCUMENT, path, recursive=True, ignore_existing=True, attributes={"value": asdict(tuning)})
        cluster.set(path, asdict(tuning))
    return tuning
