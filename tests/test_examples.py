"""The examples a platform team starts from (`examples/`): every config passes opsd's own loader, every chart
values file renders into a config opsd accepts, and the SQL and Python transform examples run end to end on the
embedded cluster."""

from __future__ import annotations

import sys
from pathlib import Path

import helm_python as helm
import pytest
import yaml

from opsd.config.load import load_config
from opsd.runtime.pipeline import start_query
from tests.support.cluster import make_queue
from tests.support.sink import make_table, ordered_rows
from tests.support.wait import wait_until

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
CONFIGS = sorted((EXAMPLES / "configs").glob("*.yaml"))
VALUES = sorted((EXAMPLES / "values").glob("*.yaml"))
WAIT_SECONDS = 120


def test_there_is_an_example_per_common_case():
    assert {p.stem for p in CONFIGS} >= {
        "queue_to_table", "sql_transform", "callable_transform", "foreach_batch", "transactional_exactly_once",
        "idempotent_receiver", "watch_only", "autotune"}
    assert (EXAMPLES / "attach.py").exists() and VALUES


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_every_example_config_passes_opsds_loader(path):
    config = load_config(path)
    assert config.pipelines


def test_every_callable_an_example_names_exists_in_the_examples_module():
    sys.path.insert(0, str(EXAMPLES))
    try:
        import pipelines
    finally:
        sys.path.remove(str(EXAMPLES))
    refs = [ref for path in CONFIGS for p in load_config(path).pipelines
            for ref in ((p.transform.callable if p.transform else None), p.sink.callable) if ref]
    assert refs
    assert [ref for ref in refs if not callable(getattr(pipelines, ref.partition(":")[2], None))] == []


@pytest.mark.parametrize("path", VALUES, ids=lambda p: p.stem)
def test_every_values_file_renders_a_config_opsd_accepts(path, tmp_path):
    with helm.Chart.load(ROOT / "helm" / "opsd") as chart:
        manifests = chart.render(yaml.safe_load(path.read_text()), name="example", namespace="streaming")
    objects = [doc for text in manifests.values() for doc in yaml.safe_load_all(text) if doc]
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "example-opsd"]
    config_file = tmp_path / "config.yaml"
    config_file.write_text(config_map["data"]["config.yaml"])
    assert load_config(config_file).pipelines


@pytest.mark.spark
@pytest.mark.parametrize(("example", "schema", "expected"), [
    ("sql_transform", [{"name": "data", "type": "string"}, {"name": "data_length", "type": "int32"}],
     lambda data: {"data": data, "data_length": len(data)}),
    ("callable_transform", [{"name": "data", "type": "string"}], lambda data: {"data": data.upper()}),
])
def test_a_transform_example_runs_end_to_end_on_the_embedded_cluster(spark, yt, example, schema, expected,
                                                                     monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    (pipeline,) = load_config(EXAMPLES / "configs" / f"{example}.yaml").pipelines
    queue, consumer = pipeline.source.path, pipeline.source.options["consumer_path"]
    if not yt.exists(queue):
        make_queue(yt, queue, schema=[{"name": "data", "type": "string"}])
    yt.create_consumer(consumer, recursive=True)
    yt.register_queue_consumer(queue, consumer)
    make_table(yt, pipeline.sink.path, schema)
    yt.insert_rows(queue, [{"data": f"{example}-{i}"} for i in range(20)])
    words = [row["data"] for row in ordered_rows(yt, queue)]  # the other example's rows too: same queue
    query = start_query(spark, pipeline)
    try:
        wait_until(lambda: len(ordered_rows(yt, pipeline.sink.path)) >= len(words), WAIT_SECONDS, "the result rows")
    finally:
        query.stop()
    assert sorted(ordered_rows(yt, pipeline.sink.path), key=str) == sorted(map(expected, words), key=str)
