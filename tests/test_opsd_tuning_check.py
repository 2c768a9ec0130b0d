"""The tuning check records the values a pipeline really uses: its tuning document, else its options/conf."""

import pytest
from prometheus_client import CollectorRegistry

from opsd.checks.tuning.check import TuningCheck
from opsd.checks.tuning.collect import TuningInForce, TuningSources, collect
from opsd.config.models import OpsdConfig
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.telemetry.metrics import Metrics
from streaming_core.cluster import ClusterError
from streaming_core.cluster.base import DOCUMENT
from streaming_core.tuning import Tuning, read_tuning, write_tuning
from ytsaurus_standin.errors import GENERIC
from ytsaurus_standin.http import Fault


def _config(cluster_uri: str, yt_root: str) -> OpsdConfig:
    return OpsdConfig.model_validate({
        "cluster": cluster_uri,
        "spark": {"conf": {"spark.yt.write.dynBatchSize": "2000"}},
        "pipelines": [
            {"name": "tuned", "source": {"format": "yt", "path": f"{yt_root}/q", "options": {
                "consumer_path": f"{yt_root}/c", "max_rows_per_partition": "500"}},
             "sink": {"format": "yt", "path": f"{yt_root}/out"}},
            {"name": "console", "source": {"format": "rate"}, "sink": {"format": "console"}},
        ],
    })


def _recorder() -> Recorder:
    return Recorder(Metrics(CollectorRegistry()), StatusStore())


def test_without_a_document_the_options_and_conf_are_in_force(cluster_uri, yt_root):
    recorder = _recorder()
    found = TuningCheck(recorder, _config(cluster_uri, yt_root)).run()
    assert found == {"tuned": (500, 2000), "console": (None, None)}
    assert recorder.status.get("tuned").max_rows_per_partition == 500
    gauge = recorder.metrics.registry.get_sample_value("opsd_tuning_dyn_batch_size", {"query": "tuned"})
    assert gauge == 2000


def test_the_tuning_document_wins_and_is_re_read_at_every_run(cluster_uri, yt_root, yt):
    recorder = _recorder()
    check = TuningCheck(recorder, _config(cluster_uri, yt_root))
    write_tuning(yt, f"{yt_root}/c_tuning", max_rows_per_partition=80)
    assert check.run()["tuned"] == (80, 2000)
    write_tuning(yt, f"{yt_root}/c_tuning", dyn_batch_size=300)
    assert check.run()["tuned"] == (80, 300)
    gauge = recorder.metrics.registry.get_sample_value("opsd_tuning_max_rows_per_partition", {"query": "tuned"})
    assert gauge == 80


def test_dyn_batch_size_is_clamped_to_the_rows_per_transaction_limit_as_the_sink_does(cluster_uri, yt_root, yt):
    recorder = _recorder()
    check = TuningCheck(recorder, _config(cluster_uri, yt_root))
    write_tuning(yt, f"{yt_root}/c_tuning", dyn_batch_size=250_000)
    assert check.run()["tuned"] == (500, 100_000)


def test_a_sink_with_its_own_tuning_path_is_read_from_that_document(cluster_uri, yt_root, yt):
    config = OpsdConfig.model_validate({
        "cluster": cluster_uri,
        "pipelines": [{"name": "split", "source": {"format": "yt", "path": f"{yt_root}/q", "options": {
            "consumer_path": f"{yt_root}/c"}},
            "sink": {"format": "yt", "path": f"{yt_root}/out", "options": {"tuning_path": f"{yt_root}/sink_t"}}}],
    })
    write_tuning(yt, f"{yt_root}/c_tuning", max_rows_per_partition=70, dyn_batch_size=111)
    write_tuning(yt, f"{yt_root}/sink_t", dyn_batch_size=222)
    assert TuningCheck(_recorder(), config).run()["split"] == (70, 222)


def test_a_document_that_cannot_be_read_now_is_neither_judged_nor_written_over(standin, standin_cluster):
    """A read error is not "no document": the source goes on with its options for that batch, but the checks do not
    judge on them, and a write keeps the person's values instead of replacing the document with its own knob."""
    path = "//tmp/tuning-unreadable/consumer_tuning"
    write_tuning(standin_cluster, path, max_rows_per_partition=700, dyn_batch_size=900, reason="a person")
    standin.faults.append(Fault("get", status=400, code=GENERIC, times=1))
    assert read_tuning(standin_cluster, path) == Tuning()  # the reader's view: ignored, logged
    standin.faults.append(Fault("get", status=400, code=GENERIC, times=1))
    with pytest.raises(ClusterError):
        collect(standin_cluster, TuningSources("q", path, path, 100, 1000))
    standin.faults.append(Fault("get", status=400, code=GENERIC, times=1))
    with pytest.raises(ClusterError):
        write_tuning(standin_cluster, path, max_rows_per_partition=100_000, reason="autotune: slow_batches")
    kept = read_tuning(standin_cluster, path)
    assert (kept.max_rows_per_partition, kept.dyn_batch_size, kept.reason) == (700, 900, "a person")


def test_a_document_that_is_not_a_tuning_document_is_not_in_force_and_not_written_over(yt, yt_root):
    path = f"{yt_root}/broken_tuning"
    yt.create(DOCUMENT, path, recursive=True, attributes={"value": {"max_rows_per_partition": "lots"}})
    assert collect(yt, TuningSources("q", path, path, 100, 1000)) == TuningInForce("q", 100, 1000, None)
    with pytest.raises(ValueError, match=path):
        write_tuning(yt, path, dyn_batch_size=500)
    assert yt.get(path) == {"max_rows_per_partition": "lots"}
