"""A lean renderer of the Prometheus text format (0.0.4) for opsd's own registry.

`prometheus_client.generate_latest` validates and escapes every label name and value of every sample
and adds `_created` series; with 50 queries x 64 partitions that is ~16k samples and far more than the
50 ms a scrape may take (`python -m bench.opsd_overhead` measures both). opsd's metric and label names
are fixed in `opsd.metrics` and valid by construction, so this renderer only escapes label values that
need it and leaves out `_created` samples (Prometheus does not use them in the text format).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.utils import floatToGoString

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_TYPES = {"counter": "counter", "gauge": "gauge", "histogram": "histogram", "summary": "summary"}


def _escape(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


def render(registry: CollectorRegistry) -> bytes:
    """The registry in the Prometheus text format, as Prometheus parses it."""
    out: list[str] = []
    append = out.append
    for metric in registry.collect():
        name = metric.name + "_total" if metric.type == "counter" else metric.name
        help_text = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        append(f"# HELP {name} {help_text}\n# TYPE {name} {_TYPES.get(metric.type, 'untyped')}\n")
        created = metric.name + "_created"
        for sample in metric.samples:
            if sample.name == created:
                continue
            if sample.labels:
                labels = ",".join(f'{k}="{_escape(v)}"' for k, v in sample.labels.items())
                append(f"{sample.name}{{{labels}}} {floatToGoString(sample.value)}\n")
            else:
                append(f"{sample.name} {floatToGoString(sample.value)}\n")
    return "".join(out).encode()
