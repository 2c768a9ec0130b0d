"""The tuning check records the values a pipeline really uses: its tuning document, else its options/conf."""

from prometheus_client import CollectorRegistry

from opsd.checks.tuning.check import TuningCheck
from opsd.config.models import OpsdConfig
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.telemetry.metrics import Metrics
from streaming_core.tuning import write_tuning


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
