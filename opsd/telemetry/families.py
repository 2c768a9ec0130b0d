"""Metric families kept as plain numbers with cached exposition text: what makes a big scrape cheap.

prometheus_client builds a `Sample` (with a merged label dict) for every series on every scrape; with
50 queries x 64 partitions that is ~16k samples and several hundred milliseconds, against a goal of
50 ms (`python -m bench.opsd_overhead`). A `Family` here is a custom collector, as prometheus_client
recommends for exporters: each labelled child keeps its value and the rendered `name{labels} ` prefix,
so `text()` is one string join per series. `collect()` still yields standard metric families, so the
registry, `generate_latest` and `get_sample_value` work as with prometheus_client's own classes.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

#: The text format `Family.text()` writes (and Prometheus parses).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _escape(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


def _label_text(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    return ",".join(f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True))


def _series(name: str, labels: str) -> str:
    return f"{name}{{{labels}}} " if labels else f"{name} "


class _Value:
    """One counter or gauge series."""

    __slots__ = ("_lock", "key", "prefix", "value")

    def __init__(self, lock: threading.Lock, key: tuple[str, ...], prefix: str) -> None:
        self._lock, self.key, self.prefix, self.value = lock, key, prefix, 0.0

    def set(self, value: float) -> None:
        self.value = float(value)

    def inc(self, amount: float = 1.0) -> None:
        with self._lock:
            self.value += amount

    def text(self) -> str:
        return f"{self.prefix}{floatToGoString(self.value)}\n"


class _Histogram:
    """One histogram series: per-bucket counts (not cumulative), sum and count."""

    __slots__ = ("_lock", "bounds", "counts", "key", "prefixes", "sum")

    def __init__(self, lock: threading.Lock, key: tuple[str, ...], name: str, labels: str,
                 bounds: tuple[float, ...]) -> None:
        self._lock, self.key, self.bounds = lock, key, bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        sep = "," if labels else ""
        les = [floatToGoString(b) for b in bounds] + ["+Inf"]
        self.prefixes = ([f'{name}_bucket{{{labels}{sep}le="{le}"}} ' for le in les]
                         + [_series(f"{name}_count", labels), _series(f"{name}_sum", labels)])

    def observe(self, value: float) -> None:
        with self._lock:
            self.counts[bisect.bisect_left(self.bounds, value)] += 1
            self.sum += value

    def cumulative(self) -> list[int]:
        total, out = 0, []
        for c in self.counts:
            total += c
            out.append(total)
        return out

    def text(self) -> str:
        with self._lock:
            cumulative, total = self.cumulative(), self.sum
        values = [*map(str, cumulative), str(cumulative[-1]), floatToGoString(total)]
        return "".join(f"{p}{v}\n" for p, v in zip(self.prefixes, values, strict=True))


class Family(Collector):
    """A counter, gauge or histogram with fixed label names; see the module docstring.

    The API is the part of prometheus_client's that opsd uses: `labels(**values)` then `set`, `inc` or
    `observe`; label-less families take `inc`/`set`/`observe` directly.
    """

    def __init__(self, name: str, kind: str, help_text: str, labelnames: tuple[str, ...] = (),
                 buckets: tuple[float, ...] = (), registry: CollectorRegistry | None = None, unit: str = "") -> None:
        if kind not in ("counter", "gauge", "histogram"):
            raise ValueError(f"metric {name}: unknown kind {kind!r}")
        self.name, self.kind, self.help, self.labelnames = name, kind, help_text, tuple(labelnames)
        self.unit = unit
        self.buckets = tuple(b for b in buckets if not math.isinf(b))
        self._lock = threading.Lock()
        self._children: dict[tuple[str, ...], _Value | _Histogram] = {}
        escaped = help_text.replace("\\", r"\\").replace("\n", r"\n")
        self.header = f"# HELP {name} {escaped}\n# TYPE {name} {kind}\n"
        if not self.labelnames:
            self.labels()  # a label-less series exists (at 0) from the start, as in prometheus_client
        if registry is not None:
            registry.register(self)

    def labels(self, **values: object) -> _Value | _Histogram:
        if set(values) != set(self.labelnames):
            raise ValueError(f"metric {self.name}: labels {sorted(values)} given, {list(self.labelnames)} expected")
        key = tuple(str(values[n]) for n in self.labelnames)
        child = self._children.get(key)
        if child is None:
            with self._lock:
                child = self._children.get(key) or self._new_child(key)
                self._children[key] = child
        return child

    def retain(self, keep: Callable[[Mapping[str, str]], bool]) -> int:
        """Remove the series whose labels `keep` refuses (what they describe is gone from the world); returns how
        many went."""
        with self._lock:
            gone = [key for key in self._children if not keep(dict(zip(self.labelnames, key, strict=True)))]
            for key in gone:
                del self._children[key]
        return len(gone)

    def _new_child(self, key: tuple[str, ...]) -> _Value | _Histogram:
        labels = _label_text(self.labelnames, key)
        if self.kind == "histogram":
            return _Histogram(self._lock, key, self.name, labels, self.buckets)
        return _Value(self._lock, key, _series(self.name, labels))

    def inc(self, amount: float = 1.0) -> None:
        self.labels().inc(amount)

    def set(self, value: float) -> None:
        self.labels().set(value)

    def observe(self, value: float) -> None:
        self.labels().observe(value)

    def text(self) -> str:
        """The family in the Prometheus text format."""
        children = list(self._children.values())
        return self.header + "".join(c.text() for c in children)

    def collect(self) -> Iterator[Metric]:
        children = list(self._children.values())
        if self.kind == "histogram":
            family = HistogramMetricFamily(self.name, self.help, labels=self.labelnames, unit=self.unit)
            les = [floatToGoString(b) for b in self.buckets] + ["+Inf"]
            for c in children:
                family.add_metric(list(c.key), list(zip(les, c.cumulative(), strict=True)), c.sum)
        else:
            cls = CounterMetricFamily if self.kind == "counter" else GaugeMetricFamily
            family = cls(self.name.removesuffix("_total") if self.kind == "counter" else self.name, self.help,
                         labels=self.labelnames, unit=self.unit)
            for c in children:
                family.add_metric(list(c.key), c.value)
        yield family
