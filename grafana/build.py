"""Build the Grafana dashboards from code and write their JSON.

Run ``python -m grafana.build`` after changing this file and commit the output. Dashboards are code
so that a review shows the PromQL, not a diff of panel coordinates, and so that a test can prove they
use only metrics that :mod:`opsd.telemetry.metrics` defines. The same JSON is written twice, to
``grafana/dashboards/`` (for import by hand) and to the Helm chart's ``files/dashboards/`` (for the
dashboards ConfigMap): Helm can only read files inside the chart, and a symlink would not survive
``helm package``. This script is the one source of both copies; a test checks they equal a fresh build.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from grafana.promql import defined_series, unknown_labels, unknown_metrics

REPO_ROOT = Path(__file__).resolve().parent.parent
OUTPUT_DIRS = (REPO_ROOT / "grafana" / "dashboards", REPO_ROOT / "helm" / "opsd" / "files" / "dashboards")

# Every panel and variable queries the data source picked in the `datasource` variable, so the
# dashboard imports into any Grafana whatever its Prometheus data source is called.
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# The matcher every per-query selector carries; a test checks no panel forgets it.
Q = 'query=~"$query"'
GRID_WIDTH = 24
BATCH_DURATION = "opsd_batch_duration_seconds"
_LABEL_VALUES = re.compile(r"label_values\((\w+),\s*(\w+)\)")


@dataclass(frozen=True)
class Target:
    """One PromQL query of a panel and the legend of its series."""

    expr: str
    legend: str = ""
    instant: bool = False


@dataclass(frozen=True)
class Panel:
    """A panel before layout: what it shows, not where."""

    title: str
    description: str
    targets: tuple[Target, ...]
    unit: str = "short"
    kind: str = "timeseries"
    width: int = 12
    height: int = 8
    # For state timelines of 0/1 gauges: (text, colour) shown for 0 and for 1.
    states: tuple[tuple[str, str], tuple[str, str]] | None = None


@dataclass(frozen=True)
class Row:
    """A titled row of panels, laid out left to right and wrapped at the grid width."""

    title: str
    panels: tuple[Panel, ...]


def quantile(q: float, metric: str, by: str, matchers: str) -> str:
    """The ``q`` quantile of a histogram over the panel's interval, per ``by`` labels."""
    return (
        f"histogram_quantile({q}, sum by (le, {by}) "
        f"(rate({metric}_bucket{{{matchers}}}[$__rate_interval])))"
    )


def boolean_panel(title: str, description: str, expr: str, one: str, one_is_good: bool = False) -> Panel:
    """A state timeline of a 0/1 gauge per query, so a flapping query shows as stripes."""
    good, bad = "green", "red"
    states = (("no", bad), (one, good)) if one_is_good else (("no", good), (one, bad))
    return Panel(title, description, (Target(expr, "{{query}}"),), kind="state-timeline", width=8,
                 states=states)


def knob_panel(title: str, in_force: str, knob: str, description: str) -> Panel:
    """A live-tuning knob: the value in force, the auto-tuner's recommendation and its bounds."""
    return Panel(title, f"{description}, the auto-tuner's recommendation and its bounds.", (
        Target(f"{in_force}{{{Q}}}", "{{query}} in force"),
        Target(f'opsd_autotune_recommended{{{Q}, knob="{knob}"}}', "{{query}} recommended"),
        Target(f'opsd_autotune_bound{{{Q}, knob="{knob}"}}', "{{query}} {{bound}}"),
    ), unit="suffix:rows", width=8)


def overview_rows() -> tuple[Row, ...]:
    """The rows of the opsd overview dashboard, top to bottom in the order an operator triages."""
    return (
        Row("Query health", (
            boolean_panel("Query up", "1 while the streaming query is active.",
                          f"opsd_query_up{{{Q}}}", "up", one_is_good=True),
            boolean_panel("Crash loop", "1 while the restart backoff is at its cap.",
                          f"opsd_query_crash_loop{{{Q}}}", "crash loop"),
            boolean_panel("Stalled", "1 when no progress is made although the sources have backlog.",
                          f"opsd_query_stalled{{{Q}}}", "stalled"),
            boolean_panel("Failed permanently",
                          "1 when opsd stopped the query for good: its failure cannot pass by restarting "
                          "(a config or code error); /status and the log say why.",
                          f"opsd_query_failed_permanently{{{Q}}}", "failed"),
            Panel("Restarts, terminations and failures",
                  "Lifecycle events per interval; failures are split by exception class.", (
                      Target(f"increase(opsd_query_restarts_total{{{Q}}}[$__rate_interval])",
                             "{{query}} restarts"),
                      Target(f"increase(opsd_query_terminations_total{{{Q}}}[$__rate_interval])",
                             "{{query}} terminations"),
                      Target(f"sum by (query, exception) "
                             f"(increase(opsd_query_failures_total{{{Q}}}[$__rate_interval]))",
                             "{{query}} {{exception}}"),
                  )),
            Panel("Time since last progress",
                  "Seconds since the query last reported progress; grows while a batch runs or hangs.", (
                      Target(f"time() - opsd_last_progress_timestamp_seconds{{{Q}}}", "{{query}}"),
                  ), unit="s"),
        )),
        Row("Micro-batches", (
            Panel("Batch duration p50 by phase", "Median duration of each micro-batch phase.", (
                Target(quantile(0.5, BATCH_DURATION, "query, phase", Q), "{{query}} {{phase}}"),
            ), unit="s"),
            Panel("Batch duration p95 by phase", "95th percentile duration of each micro-batch phase.", (
                Target(quantile(0.95, BATCH_DURATION, "query, phase", Q), "{{query}} {{phase}}"),
            ), unit="s"),
            Panel("Input vs processed rows/s",
                  "Arrival rate against processing rate of the last batch; input above processed means "
                  "the backlog grows.", (
                      Target(f"opsd_input_rows_per_second{{{Q}}}", "{{query}} input"),
                      Target(f"opsd_processed_rows_per_second{{{Q}}}", "{{query}} processed"),
                  ), unit="suffix:rows/s"),
            Panel("Rows read and written", "Rows per second from the input and output row counters.", (
                Target(f"rate(opsd_input_rows_total{{{Q}}}[$__rate_interval])", "{{query}} read"),
                Target(f"rate(opsd_output_rows_total{{{Q}}}[$__rate_interval])", "{{query}} written"),
            ), unit="suffix:rows/s"),
            Panel("Last batch id", "Id of the last micro-batch that reported progress.", (
                Target(f"opsd_last_batch_id{{{Q}}}", "{{query}}"),
            ), width=24),
        )),
        Row("Sources", (
            Panel("Backlog per queue partition", "Rows waiting in each queue partition.", (
                Target(f"opsd_source_backlog_rows{{{Q}}}", "{{query}} {{queue}}/{{partition}}"),
            ), unit="suffix:rows"),
            Panel("Latest vs end offset", "Latest available row index against the end of the last batch.", (
                Target(f"opsd_source_latest_offset{{{Q}}}", "{{query}} {{queue}}/{{partition}} latest"),
                Target(f"opsd_source_end_offset{{{Q}}}", "{{query}} {{queue}}/{{partition}} end"),
            )),
        )),
        Row("Backlog, lag and time to drain", (
            Panel("Unread rows per partition", "The queue's end minus the next row the query reads.", (
                Target(f"opsd_queue_unread_rows{{{Q}}}", "{{query}} {{queue}}/{{partition}}"),
            ), unit="suffix:rows", width=6),
            Panel("Lag per partition", "Age of the next row to read; 0 when nothing is unread.", (
                Target(f"opsd_queue_lag_seconds{{{Q}}}", "{{query}} {{queue}}/{{partition}}"),
            ), unit="s", width=6),
            Panel("Queue input vs read rows/s", "Rows written to the queues against rows the query moved past, "
                  "averaged over opsd's lag window.", (
                      Target(f"opsd_queue_input_rows_per_second{{{Q}}}", "{{query}} input"),
                      Target(f"opsd_queue_read_rows_per_second{{{Q}}}", "{{query}} read"),
                  ), unit="suffix:rows/s", width=6),
            Panel("Time to drain", "Backlog / (read rate - input rate); +Inf (not drawn) while not draining.", (
                Target(f"opsd_time_to_drain_seconds{{{Q}}}", "{{query}}"),
            ), unit="s", width=6),
        )),
        Row("Offset desync", (
            Panel("Desync state per partition",
                  "1 for the state of each queue partition: the checkpoint's committed batch against the consumer "
                  "(lagging_one_batch is the documented late acknowledgement of an idle query).", (
                      Target(f"opsd_desync_state{{{Q}}} == 1", "{{query}} {{queue}}/{{partition}} {{state}}"),
                  ), width=8),
            Panel("Desync rows", "Checkpoint's next row minus the consumer's offset; negative: consumer ahead.", (
                Target(f"opsd_desync_rows{{{Q}}}", "{{query}} {{queue}}/{{partition}}"),
            ), unit="suffix:rows", width=8),
            Panel("Heals", "Heals of lagging consumers per interval, by outcome.", (
                Target(f"sum by (query, outcome) (increase(opsd_desync_heals_total{{{Q}}}[$__rate_interval]))",
                       "{{query}} {{outcome}}"),
            ), width=8),
        )),
        Row("State and event time", (
            Panel("Watermark delay", "Progress time minus the event-time watermark.", (
                Target(f"opsd_watermark_delay_seconds{{{Q}}}", "{{query}}"),
            ), unit="s", width=8),
            Panel("State rows", "Rows held by each stateful operator.", (
                Target(f"opsd_state_rows{{{Q}}}", "{{query}} {{operator}}"),
            ), unit="suffix:rows", width=8),
            Panel("State memory", "Memory used by each stateful operator's state store.", (
                Target(f"opsd_state_memory_bytes{{{Q}}}", "{{query}} {{operator}}"),
            ), unit="bytes", width=8),
        )),
        Row("Live tuning", (
            knob_panel("max_rows_per_partition", "opsd_tuning_max_rows_per_partition", "max_rows_per_partition",
                       "Read limit per partition in force for the query's source (tuning document, else the option)"),
            knob_panel("dynBatchSize", "opsd_tuning_dyn_batch_size", "dyn_batch_size",
                       "Rows per insert in force for the query's yt sink (tuning document, else the option or conf)"),
            Panel("Auto-tuner decisions", "Changes the auto-tuner decided, by knob, direction and reason (holds "
                  "left out).", (
                Target(f'sum by (query, knob, direction, reason) (increase(opsd_autotune_decisions_total{{{Q}, '
                       f'direction!="hold"}}[$__rate_interval]))', "{{query}} {{knob}} {{direction}} {{reason}}"),
            ), unit="short", width=8),
        )),
        Row("OOM risk of the next batch", (
            Panel("OOM risk",
                  "Predicted peak of the next micro-batch over each memory pool's limit; 1.0 = out of memory.", (
                Target(f"opsd_oom_risk{{{Q}}}", "{{query}} {{pool}}"),
            ), unit="percentunit", width=8),
            Panel("Memory peak: predicted, observed, limit",
                  "Per pool: the next batch's predicted peak, the last batch's measured peak, the pool's limit.",
                  tuple(Target(f"opsd_oom_{series}_bytes{{{Q}}}", f"{{{{query}}}} {{{{pool}}}} {series}")
                        for series in ("predicted_peak", "observed_peak", "limit")), unit="bytes", width=8),
            Panel("Next batch size", "Planned bytes of the next micro-batch (backlog under the cap in force).", (
                Target(f"opsd_oom_batch_bytes{{{Q}}}", "{{query}}"),
            ), unit="bytes", width=8),
            Panel("Safe max_rows_per_partition",
                  "Largest cap that keeps every pool's OOM risk under the target, against the cap in force.", (
                Target(f"opsd_oom_safe_max_rows_per_partition{{{Q}}}", "{{query}} safe"),
                Target(f"opsd_tuning_max_rows_per_partition{{{Q}}}", "{{query}} in force"),
            ), unit="suffix:rows"),
            Panel("Memory failures", "Failures whose cause is memory, by the pool the failure blames.", (
                Target(f"sum by (query, pool) (increase(opsd_memory_failures_total{{{Q}}}[$__rate_interval]))",
                       "{{query}} {{pool}}"),
            ), unit="short"),
        )),
        Row("opsd itself", (
            Panel("Check errors", "Runs and failed runs of opsd's periodic checks.", (
                Target("sum by (check) (rate(opsd_check_errors_total[$__rate_interval]))",
                       "{{check}} errors"),
                Target("sum by (check) (rate(opsd_check_runs_total[$__rate_interval]))",
                       "{{check}} runs"),
            ), unit="ops", width=8),
            Panel("Check duration p95", "95th percentile duration of each periodic check.", (
                Target(quantile(0.95, "opsd_check_duration_seconds", "check", ""), "{{check}}"),
            ), unit="s", width=8),
            Panel("Listener events", "Streaming listener events received and dropped (queue full).", (
                Target("sum by (event) (rate(opsd_listener_events_total[$__rate_interval]))", "{{event}}"),
                Target("rate(opsd_listener_dropped_events_total[$__rate_interval])", "dropped"),
            ), unit="ops", width=8),
            Panel("Build", "Versions of opsd and PySpark running per instance.", (
                Target("opsd_build_info", instant=True),
            ), kind="table", width=24, height=5),
        )),
    )


def target_json(target: Target, ref_id: str) -> dict:
    """A Prometheus target; instant targets feed tables, which need one row per series."""
    body = {"datasource": DATASOURCE, "expr": target.expr, "legendFormat": target.legend, "refId": ref_id}
    if target.instant:
        body |= {"format": "table", "instant": True, "range": False}
    return body


def panel_options(panel: Panel) -> tuple[dict, dict]:
    """Field defaults and options per panel kind: a state timeline maps 0/1 to words and colours."""
    if panel.states:
        options = {str(value): {"color": color, "index": value, "text": text}
                   for value, (text, color) in enumerate(panel.states)}
        return {"mappings": [{"options": options, "type": "value"}]}, {"showValue": "never"}
    if panel.kind == "table":
        return {}, {"showHeader": True}
    legend = {"calcs": ["lastNotNull", "max"], "displayMode": "table", "placement": "bottom"}
    return {"unit": panel.unit}, {"legend": legend, "tooltip": {"mode": "multi", "sort": "desc"}}


def panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict:
    """One panel at a grid position."""
    defaults, options = panel_options(panel)
    return {
        "datasource": DATASOURCE,
        "description": panel.description,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "id": panel_id,
        "options": options,
        "targets": [target_json(t, chr(ord("A") + i)) for i, t in enumerate(panel.targets)],
        "title": panel.title,
        "type": panel.kind,
    }


def layout(rows: tuple[Row, ...]) -> Iterator[dict]:
    """Place rows and panels on Grafana's 24-column grid with stable ids, wrapping full lines."""
    panel_id, y = 0, 0
    for row in rows:
        panel_id += 1
        yield {"collapsed": False, "gridPos": {"h": 1, "w": GRID_WIDTH, "x": 0, "y": y},
               "id": panel_id, "panels": [], "title": row.title, "type": "row"}
        y += 1
        x, line_height = 0, 0
        for panel in row.panels:
            if x + panel.width > GRID_WIDTH:
                x, y, line_height = 0, y + line_height, 0
            panel_id += 1
            yield panel_json(panel, panel_id, x, y)
            x, line_height = x + panel.width, max(line_height, panel.height)
        y += line_height


def templating() -> dict:
    """The data source and query variables; `query` lists every query opsd reports on."""
    datasource = {"current": {}, "hide": 0, "label": "Data source", "name": "datasource",
                  "query": "prometheus", "refresh": 1, "regex": "", "type": "datasource"}
    query = {"allValue": ".*", "current": {}, "datasource": DATASOURCE,
             "definition": "label_values(opsd_query_up, query)", "hide": 0, "includeAll": True,
             "label": "Query", "multi": True, "name": "query",
             "query": "label_values(opsd_query_up, query)", "refresh": 2, "regex": "", "sort": 1,
             "type": "query"}
    return {"list": [datasource, query]}


def overview() -> dict:
    """The opsd overview dashboard: one screen from "is it up" down to opsd's own health."""
    return {
        "annotations": {"list": []},
        "description": "Streaming queries run by opsd: health, micro-batches, backlog, state, tuning.",
        "editable": True,
        "graphTooltip": 1,
        "links": [],
        "panels": list(layout(overview_rows())),
        "refresh": "30s",
        "schemaVersion": 39,
        "tags": ["opsd", "spark", "ytsaurus"],
        "templating": templating(),
        "time": {"from": "now-6h", "to": "now"},
        "timezone": "",
        "title": "opsd overview",
        "uid": "opsd-overview",
        "version": 1,
    }


DASHBOARDS = {"opsd-overview.json": overview}


def expressions(dashboard: dict) -> Iterator[str]:
    """Every PromQL expression of a dashboard's panels."""
    for panel in dashboard["panels"]:
        yield from (target["expr"] for target in panel.get("targets", []))


def variable_sources(dashboard: dict) -> Iterator[tuple[str, str]]:
    """(metric, label) of each ``label_values(metric, label)`` variable query (Grafana, not PromQL)."""
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            metric, label = _LABEL_VALUES.fullmatch(variable["query"]).groups()
            yield metric, label


def problems(dashboard: dict) -> Iterator[str]:
    """Each expression or variable that queries a metric or label opsd does not export."""
    for expr in expressions(dashboard):
        if unknown_metrics(expr) or unknown_labels(expr):
            yield f"{expr!r}: unknown metrics {sorted(unknown_metrics(expr))}, labels {unknown_labels(expr)}"
    series = defined_series()
    for metric, label in variable_sources(dashboard):
        if metric not in series or label not in series[metric].labels:
            yield f"variable label_values({metric}, {label}): no such metric or label"


def check(dashboard: dict) -> None:
    """Refuse a dashboard that queries a metric or label opsd does not export.

    Raises:
        ValueError: naming each offending expression.
    """
    if found := list(problems(dashboard)):
        raise ValueError("dashboard uses undefined metrics or labels:\n" + "\n".join(found))


def render(dashboard: dict) -> str:
    """Serialise deterministically, so an unchanged dashboard gives an unchanged file."""
    return json.dumps(dashboard, indent=2, sort_keys=True) + "\n"


def build() -> dict[str, str]:
    """File name to JSON text of every dashboard, each checked against the metric definitions."""
    built = {}
    for filename, make in DASHBOARDS.items():
        dashboard = make()
        check(dashboard)
        built[filename] = render(dashboard)
    return built


def main() -> None:
    """Write every dashboard into each output directory."""
    for filename, text in build().items():
        for directory in OUTPUT_DIRS:
            directory.mkdir(parents=True, exist_ok=True)
            (directory / filename).write_text(text)


if __name__ == "__main__":
    main()
