"""`opsd tuning set`: a pipeline's live tuning values written where its source and sink read them, and clear errors
for what cannot be set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming_core.cluster.base import DOCUMENT
from streaming_core.tuning import read_tuning
from tests.support.doctor import follow


@pytest.fixture
def config(yt_root: str, cluster_uri: str, tmp_path: Path) -> Path:
    path = tmp_path / "opsd.yaml"
    path.write_text(json.dumps({"cluster": cluster_uri, "pipelines": [
        {"name": "copy", "source": {"path": f"{yt_root}/queue", "options": {"consumer_path": f"{yt_root}/c"}},
         "sink": {"format": "yt", "path": f"{yt_root}/out", "options": {"tuning_path": f"{yt_root}/sink_tuning"}},
         "checkpoint_location": "cp"},
        {"name": "rate", "source": {"format": "rate"}, "sink": {"format": "console"}}]}))
    return path


def test_each_value_goes_to_the_document_its_reader_reads(yt, yt_root, config, capsys) -> None:
    code, out, _ = follow(capsys, ["tuning", "set", "copy", "--config", str(config), "--max-rows-per-partition", "700",
                                   "--max-bytes-per-partition", "16MiB", "--dyn-batch-size", "300"])

    assert code == 0 and f"copy: max_rows_per_partition 700 in {yt_root}/c_tuning" in out
    source = read_tuning(yt, f"{yt_root}/c_tuning")
    assert (source.max_rows_per_partition, source.max_bytes_per_partition) == (700, 16 << 20)
    assert read_tuning(yt, f"{yt_root}/sink_tuning").dyn_batch_size == 300


@pytest.mark.parametrize(("args", "says"), [
    (["copy"], "give a value to set: --max-rows-per-partition N, --max-bytes-per-partition SIZE and/or "
               "--dyn-batch-size N"),
    (["copy", "--max-bytes-per-partition", "lots"],
     "--max-bytes-per-partition: option 'max_bytes_per_partition' must be a positive number of bytes"),
    (["nobody", "--max-rows-per-partition", "5"], "no pipeline named 'nobody'"),
    (["copy", "--max-rows-per-partition", "0"], "--max-rows-per-partition 0: a number of rows, 1 or more"),
    (["rate", "--max-rows-per-partition", "5"], "--max-rows-per-partition: pipeline 'rate' has no tuning document "
                                                "for it (it needs a yt source)"),
])
def test_what_cannot_be_set_is_named(config, capsys, args: list[str], says: str) -> None:
    code, _, err = follow(capsys, ["tuning", "set", *args, "--config", str(config)])

    assert code == 1 and says in err


def test_a_document_that_is_not_a_tuning_document_is_named_and_left_as_it_is(yt, yt_root, config, capsys) -> None:
    yt.create(DOCUMENT, f"{yt_root}/c_tuning", recursive=True, attributes={"value": ["not", "a", "map"]})
    code, _, err = follow(capsys, ["tuning", "set", "copy", "--config", str(config), "--max-rows-per-partition", "7"])

    assert code == 1 and f"tuning document {yt_root}/c_tuning must be a map" in err and "left as it is" in err
    assert yt.get(f"{yt_root}/c_tuning") == ["not", "a", "map"]
