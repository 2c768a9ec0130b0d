"""The tuning check records the values a pipeline really uses: its tuning document, else its options/conf."""

from prometheus_client import CollectorRegistry

from opsd.config import OpsdConfig
from opsd.metrics import Metrics
from opsd.recorder import Recorder
from opsd.status import StatusStore
from opsd.tuning_check import TuningCheck
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
    found = TuningCheck(_config(cluster_uri, yt_root), recorder).run()
    assert found == {"tuned": (500, 2000), "console": (None, None)}
    assert recorder.status.get("tuned").max_rows_per_partition == 500
    gauge = recorder.metrics.registry.get_sample_value("opsd_tuning_dyn_batch_size", {"query": "tuned"})
    assert gauge == 2000


def test_the_tuning_document_wins_and_is_re_read_at_every_run(cluster_uri, yt_root, yt):
    recorder = _recorder()
    check = TuningCheck(_config(cluster_uri, yt_root), recorder)
    write_tuning(yt, f"{yt_root}/c_tuning", max_rows_per_partition=80)
    assert check.run()["tuned"] == (80, 2000)
    write_tuning(yt, f"{yt_root}/c_tuning", dyn_batch_size=300)
    assert check.run()["tuned"] == (80, 300)
    gauge = recorder.metrics.registry.get_sample_value("opsd_tuning_max_rows_per_partition", {"query": "tuned"})
    assert gauge == 80
