"""`Metrics.render` exposes exactly the samples prometheus_client would (less `_created`)."""

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from opsd.telemetry.metrics import Metrics


def _samples(text: bytes) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text.decode())
            for s in family.samples if not s.name.endswith("_created")}


def test_render_matches_generate_latest_sample_for_sample() -> None:
    metrics = Metrics(CollectorRegistry())
    metrics.input_rows.labels(query="q").inc(42)
    metrics.batch_duration_seconds.labels(query="q", phase="addBatch").observe(1.5)
    metrics.source_backlog_rows.labels(query="q", queue="//a", partition="3").set(7)
    metrics.query_failures.labels(query='we"ird\\name\n', exception="ValueError").inc()
    expected = _samples(generate_latest(metrics.registry))
    assert _samples(metrics.render()) == expected
    assert expected[("opsd_input_rows_total", (("query", "q"),))] == 42


def test_render_leaves_out_created_series() -> None:
    metrics = Metrics(CollectorRegistry())
    metrics.input_rows.labels(query="q").inc()
    assert b"_created" not in metrics.render()


def test_histogram_buckets_are_cumulative_with_inf() -> None:
    metrics = Metrics(CollectorRegistry())
    for seconds in (0.02, 0.02, 7.0, 10_000.0):
        metrics.batch_duration_seconds.labels(query="q", phase="addBatch").observe(seconds)
    samples = _samples(metrics.render())
    bucket = "opsd_batch_duration_seconds_bucket"
    labels = (("le", "0.05"), ("phase", "addBatch"), ("query", "q"))
    assert samples[(bucket, labels)] == 2
    assert samples[(bucket, (("le", "+Inf"), ("phase", "addBatch"), ("query", "q")))] == 4
    assert samples[("opsd_batch_duration_seconds_sum", (("phase", "addBatch"), ("query", "q")))] == 10_007.04
