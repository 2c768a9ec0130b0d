"""`opsd desync show | heal` by query name from a config file (no Spark: hand-made checkpoints)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opsd.cli.main import main
from tests.support.checkpoint import job_with_checkpoint


@pytest.fixture
def config(yt, yt_root: str, cluster_uri: str, tmp_path: Path) -> tuple[str, str, Path]:
    q, c, location = job_with_checkpoint(yt, yt_root, tmp_path / "cp", {0: {0: 9, 1: 9}, 1: {0: 19, 1: 19}},
                                         committed=1, consumer_at=10)
    path = tmp_path / "opsd.yaml"
    path.write_text(json.dumps({
        "cluster": cluster_uri,
        "pipelines": [{"name": "other", "source": {"format": "rate"}, "sink": {"format": "console"}}],
        "watch": [{"name": "spyt-job", "checkpoint_location": location, "consumer": c}],
    }))
    return q, c, path


def test_a_watched_query_is_shown_and_healed_by_its_name(yt, config, capsys) -> None:
    q, c, path = config

    assert main(["desync", "show", "spyt-job", "--config", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[q]["state"] == "lagging_one_batch"
    assert main(["desync", "heal", "spyt-job", "--config", str(path)]) == 0
    assert "moved partition 0 10 -> 20, partition 1 10 -> 20" in capsys.readouterr().out
    assert yt.get_consumer_offsets(c, q) == {0: 20, 1: 20}
    assert main(["history", "spyt-job", "--config", str(path), "--json"]) == 0
    assert [(e["kind"], e["outcome"], e["after"]) for e in json.loads(capsys.readouterr().out)] == [
        ("heal", "healed", {"0": 20, "1": 20})]


def test_a_heal_refused_exits_1_and_says_why(yt, config, capsys) -> None:
    q, c, path = config
    yt.insert_rows(q, [{"data": "x", "n": i} for i in range(20)])  # 30 rows per partition
    yt.advance_consumer(c, q, 1, None, 25)

    assert main(["desync", "heal", "spyt-job", "--config", str(path)]) == 1
    assert "refused_consumer_ahead" in capsys.readouterr().out
    assert yt.get_consumer_offsets(c, q) == {0: 10, 1: 25}
    assert main(["history", "spyt-job", "--config", str(path), "--json"]) == 0
    assert [(e["outcome"], e["before"]) for e in json.loads(capsys.readouterr().out)] == [
        ("refused_consumer_ahead", {"0": 10, "1": 25})]


@pytest.mark.parametrize(("args", "message"), [
    (["nobody"], "no pipeline with a checkpoint_location nor watch entry named 'nobody'"),
    (["other"], "no pipeline with a checkpoint_location nor watch entry named 'other'"),
    ([], "name a query (QUERY --config FILE) or a checkpoint (--checkpoint LOCATION), not both"),
])
def test_a_query_that_cannot_be_found_is_named(config, capsys, args: list[str], message: str) -> None:
    assert main(["desync", "show", *args, "--config", str(config[2])]) == 1
    assert message in capsys.readouterr().err


def test_a_partition_added_by_a_reshard_is_shown_as_added_and_left_to_the_query(yt, config, capsys,
                                                                                monkeypatch) -> None:
    q, c, path = config
    yt.reshard(q, 3)  # its new partition is empty: the query is idle
    monkeypatch.setenv("COLUMNS", "200")

    assert main(["desync", "show", "spyt-job", "--config", str(path)]) == 0
    [row] = [line for line in capsys.readouterr().out.splitlines() if "2 added" in line]
    assert main(["desync", "heal", "spyt-job", "--config", str(path)]) == 0

    assert "in_sync" in row
    assert "moved partition 0 10 -> 20, partition 1 10 -> 20" in capsys.readouterr().out
    assert yt.get_consumer_offsets(c, q) == {0: 20, 1: 20}
