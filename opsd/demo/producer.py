"""The producer: rows for a queue, generated to fit its schema and paced at a rate (the demo's, `opsd queue produce`'s).

Batches remember which input lines (or row numbers) they hold, so that an error of the cluster about "row 617" of
a batch can be traced back to the input. `paced` spreads batches over time for a target rate; `Producer` appends
them to a queue from a thread.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from streaming_core.cluster import Cluster, TableSchema
from streaming_core.cluster.schema import VARIANT_PREFIX, variant_alternatives

#: Rows per insert when no rate limits them: large enough to amortise a transaction, small enough to
#: keep one insert's memory bounded.
DEFAULT_BATCH_ROWS = 10_000
#: Inserts per second when producing at a fixed rate: often enough for a smooth rate.
PACED_INSERTS_PER_S = 10


@dataclass(frozen=True)
class Batch:
    """Rows for one insert and the (1-based) input lines or row numbers they came from."""

    rows: list[dict[str, Any]]
    first: int
    last: int
    #: Each row's input line, where lines between were skipped (blank ones); empty when the rows are `first`..`last`.
    lines: tuple[int, ...] = ()

    def number_of(self, row: int) -> int:
        """The input line or row number of `rows[row]`."""
        return self.lines[row] if self.lines else self.first + row


def generated_batches(schema: TableSchema, count: int, batch_rows: int) -> Iterator[Batch]:
    """`count` rows that fit `schema`, numbered from 1, in batches of `batch_rows`."""
    for start in range(0, count, batch_rows):
        stop = min(count, start + batch_rows)
        rows = [{c.name: sample_value(c.type_v3, i) for c in schema.columns if not c.name.startswith("$")}
                for i in range(start, stop)]
        yield Batch(rows, start + 1, stop)


def paced(batches: Iterable[Batch], rate: float, *, clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep) -> Iterator[Batch]:
    """The batches, each released no earlier than its first row is due at `rate` rows/s (0: at once)."""
    started = clock()
    for batch in batches:
        if rate > 0:
            delay = started + (batch.first - 1) / rate - clock()
            if delay > 0:
                sleep(delay)
        yield batch


def batch_rows_for(rate: float) -> int:
    """Rows per insert: big batches when unpaced, about `PACED_INSERTS_PER_S` inserts per second else."""
    if rate <= 0:
        return DEFAULT_BATCH_ROWS
    return max(1, min(DEFAULT_BATCH_ROWS, int(rate / PACED_INSERTS_PER_S)))


_INT_BITS = {"int8": 7, "int16": 15, "int32": 31, "int64": 63, "uint8": 8, "uint16": 16, "uint32": 32,
             "uint64": 63}
_SIMPLE_SAMPLES: dict[str, Callable[[int], Any]] = {
    "string": lambda i: f"row-{i}", "utf8": lambda i: f"row-{i}", "json": lambda i: json.dumps({"row": i}),
    "uuid": lambda i: str(uuid.UUID(int=i)), "double": lambda i: i / 2, "float": lambda i: i / 2,
    "bool": lambda i: i % 2 == 0, "boolean": lambda i: i % 2 == 0, "interval": lambda i: i, "interval64": lambda i: i,
    "date": lambda i: dt.date(2024, 1, 1) + dt.timedelta(days=i % 3650),
    "datetime": lambda i: dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i),
    "timestamp": lambda i: dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=i),
    "date32": lambda i: dt.date(1900, 1, 1) + dt.timedelta(days=i % 3650),
    "datetime64": lambda i: dt.datetime(1900, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i),
    "timestamp64": lambda i: dt.datetime(1900, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=i),
    "yson": lambda i: None, "any": lambda i: None, "null": lambda i: None, "void": lambda i: None,
}


def sample_value(type_v3: Any, i: int) -> Any:
    """A deterministic value of YT type `type_v3` for row `i` (what the generator of `produce` writes)."""
    if isinstance(type_v3, str):
        if type_v3 in _INT_BITS:
            return i % (1 << _INT_BITS[type_v3])
        return _SIMPLE_SAMPLES[type_v3](i)
    name = type_v3["type_name"]
    if name in ("optional", "tagged"):
        return sample_value(type_v3["item"], i)
    if name == "list":
        return [sample_value(type_v3["item"], i)]
    if name == "struct":
        return {m["name"]: sample_value(m["type"], i) for m in type_v3["members"]}
    if name == "tuple":
        return {f"_{k + 1}": sample_value(e["type"], i) for k, e in enumerate(type_v3["elements"])}
    if name == "dict":
        return {sample_value(type_v3["key"], i): sample_value(type_v3["value"], i)}
    if name == "variant":  # the first alternative held (the Arrow form: a struct of `_v<name>`)
        alternatives = variant_alternatives(type_v3)
        return {VARIANT_PREFIX + n: sample_value(t, i) if k == 0 else None for k, (n, t) in enumerate(alternatives)}
    if name == "decimal":
        digits = int(type_v3["precision"]) - int(type_v3["scale"])
        return decimal.Decimal(i % (10 ** digits))
    return sample_value(name, i)


@dataclass
class Producer:
    """Appends generated rows to the queue at `rate` rows/s in a thread until stopped."""

    cluster: Cluster
    queue: str
    schema: TableSchema
    rate: float
    produced: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def run(self) -> None:
        for batch in paced(generated_batches(self.schema, 10**12, batch_rows_for(self.rate)), self.rate):
            if self._stop.is_set():
                return
            self.cluster.insert_rows(self.queue, batch.rows)
            self.produced += len(batch.rows)

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="opsd-producer", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop producing; returns once the insert in flight (if any) is done, so `produced` is final."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
