"""The consumer commands of the stand-in.

Registrations are answered from the serving proxy's `RegistrationCache` (`registrations.py`), as YTsaurus answers
them: a fresh registration is missing from `list_queue_consumer_registrations` and refused by `pull_consumer` (901,
"not registered") until that proxy's delay has passed.
"""


from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streaming_core.cluster.embedded import normalize_path
from streaming_core.cluster.errors import NotRegisteredError

from ..acl import REMOVE, SERVING_USER
from ..errors import GENERIC, YtCodedError
from .transactions import _Ledger


class ConsumerCommands:
    """Consumers: registrations and offsets."""

    def register(self, p: Mapping[str, Any]) -> None:
        partitions = p.get("partitions")
        self.cluster.register_queue_consumer(
            str(p["queue_path"]), str(p["consumer_path"]), vital=bool(p.get("vital")),
            partitions=None if partitions is None else [int(x) for x in partitions])
        self.registration_caches.observe()

    def unregister(self, p: Mapping[str, Any]) -> None:
        """Remove on the queue or on the consumer (`DoUnregisterQueueConsumer`)."""
        queue, consumer = str(p["queue_path"]), str(p["consumer_path"])
        if not any(self.permissions.allowed(SERVING_USER.get(), REMOVE, path) for path in (queue, consumer)):
            self.permissions.require(REMOVE, queue)
        self.cluster.unregister_queue_consumer(str(p["queue_path"]), str(p["consumer_path"]))
        self.registration_caches.observe()

    def registrations(self, p: Mapping[str, Any]) -> list[dict[str, Any]]:
        found = self.cluster.list_queue_consumer_registrations(
            queue_path=None if p.get("queue_path") is None else str(p["queue_path"]),
            consumer_path=None if p.get("consumer_path") is None else str(p["consumer_path"]))
        return [{"queue_path": r.queue_path, "consumer_path": r.consumer_path, "vital": r.vital,
                 "partitions": None if r.partitions is None else list(r.partitions)} for r in found
                if self.registration_cache.visible(r.queue_path, r.consumer_path)]

    def require_visible_registration(self, queue_path: str, consumer_path: str) -> None:
        """`NotRegisteredError` (901) while this proxy's cache does not see the pair registered."""
        if not self.registration_cache.visible(queue_path, consumer_path):
            raise NotRegisteredError(f"Consumer {consumer_path} is not registered for queue {queue_path}")

    def advance_consumer(self, p: Mapping[str, Any]) -> None:
        """The consumer's row written as YTsaurus' consumer client writes it (`consumer_client.cpp`): no registration
        needed, the partition index not checked against the queue, only a negative offset refused (at the call);
        compare-and-set at the call and row locks at commit (`transactions`)."""
        consumer, queue, partition = str(p["consumer_path"]), str(p["queue_path"]), int(p["partition_index"])
        old, new = None if p.get("old_offset") is None else int(p["old_offset"]), int(p["new_offset"])
        if new < 0:
            raise YtCodedError(GENERIC, f"Queue consumer offset {new} cannot be negative")
        key = {"queue_cluster": self.cluster.name, "queue_path": normalize_path(queue), "partition_index": partition}

        def write(tx: Any) -> None:
            if isinstance(tx, _Ledger):
                tx.advance_consumer(consumer, queue, partition, old, new)
                return
            current = tx.lookup_rows(consumer, [key])
            tx.insert_rows(consumer, [{**key, "offset": new, "meta": current[0]["meta"] if current else None}])

        self._tablet_write(p, write)

