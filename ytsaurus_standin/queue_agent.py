"""The stand-in's Queue Agent: `@queue_status` and `@queue_partitions` on queues, `@queue_consumer_partitions` on
consumers, shaped as YTsaurus' Queue Agent builds them (`yt/yt/server/queue_agent/snapshot_representation.cpp`):
rates as `{current, 1m_raw, 1m, 1h, 1d}` rows per second, times as ISO 8601 text, durations as milliseconds, the
consumer's partitions keyed by the queue's `cluster:path`. Read by name only: the attributes are opaque (not in `@`).

Its trimming follows YTsaurus' switch: the agent trims queues by their `@auto_trim_config` only where its dynamic
config, the document `//sys/queue_agents/config`, says `queue_agent/controller/enable_automatic_trimming` (default
false, `yt/yt/server/queue_agent/config.cpp`). The stand-in serves that document (`get` / `set`, as an administrator
sets it) and its trimmer (`trimmer()`) passes only while it is on.

Like the agent, it judges from snapshots of its own: every read of an attribute takes one (each tablet's row count
and when it was seen), so a write rate is the rows added over the snapshots of the last minute, and a row's commit
time the time of the first snapshot that saw it (0 and absent until two snapshots tell them). A test double of the
agent, not the agent: its rates are only as fine as the reads that sample them.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from streaming_core.cluster.base import ORDERED, QUEUE_CONSUMER_PARTITIONS, QUEUE_PARTITIONS, QUEUE_STATUS, Cluster
from streaming_core.cluster.embedded.auto_trimmer import AutoTrimmer, Trim
from streaming_core.cluster.errors import NoSuchPathError
from streaming_core.cluster.schema import TIMESTAMP

#: The Queue Agent's dynamic config document, and where in it automatic trimming is switched on.
DYNAMIC_CONFIG_PATH = "//sys/queue_agents/config"
AUTOMATIC_TRIMMING_KEYS = ("queue_agent", "controller", "enable_automatic_trimming")
#: The dynamic config that switches automatic trimming on.
AUTOMATIC_TRIMMING_ON = {"queue_agent": {"controller": {"enable_automatic_trimming": True}}}

#: The window of the write rates, and the snapshots kept per tablet.
RATE_WINDOW_SECONDS = 60.0
SNAPSHOTS = 64
ATTRIBUTES = (QUEUE_STATUS, QUEUE_PARTITIONS, QUEUE_CONSUMER_PARTITIONS)


def _rate(value: float) -> dict[str, float]:
    return {"current": value, "1m_raw": value, "1m": value, "1h": value, "1d": value}


def _instant(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class QueueAgent:
    """Serves the Queue Agent's attributes of the objects of `cluster` (named `cluster_name` in references)."""

    def __init__(self, cluster: Cluster, cluster_name: str, clock: Callable[[], float] = time.time) -> None:
        self.cluster = cluster
        self.cluster_name = cluster_name
        self.clock = clock
        self._snapshots: dict[tuple[str, int], deque[tuple[float, int]]] = {}
        self._lock = threading.Lock()
        #: `//sys/queue_agents/config`: empty, so every setting is its default (automatic trimming off).
        self.dynamic_config: dict[str, Any] = {}

    @property
    def automatic_trimming(self) -> bool:
        """Whether the dynamic config switches automatic trimming on."""
        value: Any = self.dynamic_config
        for key in AUTOMATIC_TRIMMING_KEYS:
            value = value.get(key, {}) if isinstance(value, dict) else {}
        return value is True

    def trimmer(self, period_seconds: float) -> AutoTrimmer:
        """The agent's trimming: the embedded cluster's `AutoTrimmer`, passing only while `automatic_trimming`."""
        return _SwitchedTrimmer(self, period_seconds)

    def attribute(self, path: str, name: str) -> Any:
        """The attribute's value; `NoSuchPathError` for an object the agent does not serve it on."""
        info = self.cluster.node_info(path)
        if name == QUEUE_CONSUMER_PARTITIONS and info.attributes.get("treat_as_queue_consumer"):
            return self._consumer_partitions(path)
        if name in (QUEUE_STATUS, QUEUE_PARTITIONS) and info.kind == ORDERED:
            partitions = self._partitions(path)
            if name == QUEUE_PARTITIONS:
                return partitions
            registrations = self.cluster.list_queue_consumer_registrations(queue_path=path)
            return {"queue_agent_host": "standin", "alerts": {}, "exports": {"progress": {}},
                    "family": "ordered_dynamic_table", "partition_count": len(partitions),
                    "registrations": [{"queue": self._reference(r.queue_path),
                                       "consumer": self._reference(r.consumer_path), "vital": r.vital}
                                      for r in registrations],
                    "has_timestamp_column": TIMESTAMP in self.cluster.get_schema(path).names,
                    "has_cumulative_data_weight_column": False,
                    "write_row_count_rate": _rate(sum(p["write_row_count_rate"]["1m"] for p in partitions)),
                    "write_data_weight_rate": _rate(0.0)}
        raise NoSuchPathError(f"{path}: attribute {name!r} is not found")

    def _reference(self, path: str) -> str:
        return f"{self.cluster_name}:{path}"

    def _snapshot(self, path: str) -> list[tuple[int, int, deque[tuple[float, int]]]]:
        """Take a snapshot of the queue's tablets: (trimmed, total, snapshots so far) per tablet."""
        now = self.clock()
        found = []
        with self._lock:
            for t in self.cluster.get_tablet_infos(path):
                seen = self._snapshots.setdefault((path, t.tablet_index), deque(maxlen=SNAPSHOTS))
                if not seen or seen[-1][1] != t.total_row_count:
                    seen.append((now, t.total_row_count))
                found.append((t.trimmed_row_count, t.total_row_count, deque(seen)))
        return found

    def _write_rate(self, seen: deque[tuple[float, int]]) -> float:
        now = self.clock()
        recent = [s for s in seen if now - s[0] <= RATE_WINDOW_SECONDS]
        if len(recent) < 2 or recent[-1][0] <= recent[0][0]:
            return 0.0
        return (recent[-1][1] - recent[0][1]) / (now - recent[0][0])

    @staticmethod
    def _commit_time(seen: deque[tuple[float, int]], row: int) -> float | None:
        """When the row was first seen written (None: before the first snapshot, or not written)."""
        return next((at for i, (at, rows) in enumerate(seen) if rows > row and i > 0), None)

    def _partitions(self, path: str) -> list[dict[str, Any]]:
        now, found = self.clock(), []
        for trimmed, total, seen in self._snapshot(path):
            committed = self._commit_time(seen, total - 1) if total else None
            found.append({"lower_row_index": trimmed, "upper_row_index": total, "available_row_count": total - trimmed,
                          "last_row_commit_time": _instant(committed or 0.0),
                          "commit_idle_time": int((now - committed) * 1000) if committed else 0,
                          "cumulative_data_weight": 0, "trimmed_data_weight": 0, "available_data_weight": 0,
                          "write_row_count_rate": _rate(self._write_rate(seen)),
                          "write_data_weight_rate": _rate(0.0), "meta": {}})
        return found

    def _consumer_partitions(self, consumer: str) -> dict[str, list[dict[str, Any]]]:
        now, found = self.clock(), {}
        for reg in self.cluster.list_queue_consumer_registrations(consumer_path=consumer):
            offsets = self.cluster.get_consumer_offsets(consumer, reg.queue_path)
            partitions = []
            for index, (trimmed, total, seen) in enumerate(self._snapshot(reg.queue_path)):
                offset = offsets.get(index, 0)
                disposition = ("expired" if offset < trimmed else "ahead" if offset > total
                               else "up_to_date" if offset == total else "pending_consumption")
                committed = self._commit_time(seen, offset) if disposition == "pending_consumption" else None
                partition = {"next_row_index": offset, "last_consume_time": _instant(0.0),
                             "disposition": disposition, "unread_row_count": max(0, total - offset),
                             "unread_data_weight": 0, "processing_lag": int((now - committed) * 1000) if committed
                             else 0, "consume_idle_time": 0, "cumulative_data_weight": 0,
                             "read_row_count_rate": _rate(0.0), "read_data_weight_rate": _rate(0.0)}
                if committed:
                    partition["next_row_commit_time"] = _instant(committed)
                partitions.append(partition)
            found[self._reference(reg.queue_path)] = partitions
        return found


class _SwitchedTrimmer(AutoTrimmer):
    """An `AutoTrimmer` whose passes trim nothing while the agent's automatic trimming is off."""

    def __init__(self, agent: QueueAgent, period_seconds: float) -> None:
        super().__init__(agent.cluster, period_seconds=period_seconds)
        self.agent = agent

    def run_pass(self, queues: list[str] | None = None) -> list[Trim]:
        return super().run_pass(queues) if self.agent.automatic_trimming else []
