"""`opsd desync show | heal` by query name from a config file (no Spark: hand-made checkpoints)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from opsd.cli.main import main
from opsd.results.desync import DesyncState, HealOutcome
from tests.support.checkpoint import job_with_checkpoint

#: A pipeline without a checkpoint: a config needs one, `desync` has nothing to say about it.
RATE_TO_CONSOLE = {"name": "other", "source": {"format": "rate"}, "sink": {"format": "console"}}


@pytest.fixture
def config(yt, yt_root: str, cluster_uri: str, tmp_path: Path) -> tuple[str, str, Path]:
    q, c, location = job_with_checkpoint(yt, yt_root, tmp_path / "cp", {0: {0: 9, 1: 9}, 1: {0: 19, 1: 19}},
                                         committed=1, consumer_at=10)
    path = tmp_path / "opsd.yaml"
    path.write_text(json.dumps({
        "cluster": cluster_uri,
        "pipelines": [RATE_TO_CONSOLE],
        "watch": [{"name": "spyt-job", "checkpoint_location": location, "queue": q, "consumer": c}],
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
    assert f"{HealOutcome.CONSUMER_AHEAD.words}\n" in capsys.readouterr().out
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


LONG_QUERY = "clickstream-sessions-enrichment-watched-for-the-analytics-team-" + "x" * 30


def show(capsys, path: Path, query: str = "spyt-job") -> list[str]:
    assert main(["desync", "show", query, "--config", str(path)]) == 0
    return capsys.readouterr().out.splitlines()


def test_at_80_columns_each_partition_is_a_block_its_state_first_in_words_nothing_cut(
        yt, yt_root: str, cluster_uri: str, capsys, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    deep = f"{yt_root}/a/rather/deeply/nested/directory/of/the/analytics/team/clickstream_" + "y" * 20
    q, c, location = job_with_checkpoint(yt, deep, tmp_path / "cp", {0: {0: 9, 1: 9}, 1: {0: 19, 1: 19}},
                                         committed=1, consumer_at=10)
    yt.advance_consumer(c, q, 1, None, 20)
    path = tmp_path / "opsd.yaml"
    path.write_text(json.dumps({"cluster": cluster_uri, "pipelines": [RATE_TO_CONSOLE],
                                "watch": [{"name": LONG_QUERY, "checkpoint_location": location, "queue": q,
                                           "consumer": c}]}))
    lines = show(capsys, path, LONG_QUERY)
    out = "\n".join(lines)

    assert "…" not in out and max(len(line) for line in lines) <= 80
    assert LONG_QUERY in "".join(lines) and q in "".join(line.strip() for line in lines)
    states = [line.split(None, 1)[1] for line in lines if line.startswith("  state ")]
    assert states == [DesyncState.LAGGING_ONE_BATCH.words, DesyncState.IN_SYNC.words]
    first_facts = [line.split()[0] for line in lines if re.match(r"  [a-z]", line)][:2]
    assert first_facts == ["state", "partition"], "the state comes first"
    assert re.search(r"\n  difference +10\n", out) and not re.search(r"[a-z]+_[a-z_]+", " ".join(states))


def test_at_200_columns_the_partitions_are_a_table(config, capsys, monkeypatch) -> None:
    q, _, path = config
    monkeypatch.setenv("COLUMNS", "200")
    lines = show(capsys, path)

    assert lines[1].split() == ["query", "/", "queue", "state", "partition", "checkpoint", "next", "consumer",
                                "difference", "rows", "trimmed", "problem"]
    rows = [line.split() for line in lines if line.startswith(" spyt-job")]
    assert [row[:3] + row[-6:] for row in rows] == [["spyt-job", q, "one", str(p), "20", "10", "10", "20", "0"]
                                                   for p in (0, 1)]


def test_piped_output_is_whole_blocks(config, capsys, monkeypatch) -> None:
    q, _, path = config
    monkeypatch.delenv("COLUMNS", raising=False)
    lines = show(capsys, path)

    assert lines.count(f"spyt-job {q}") == 2 and lines.count(f"  state            "
                                                             f"{DesyncState.LAGGING_ONE_BATCH.words}") == 2


def test_a_partition_added_by_a_reshard_is_shown_as_added_and_left_to_the_query(yt, config, capsys,
                                                                                monkeypatch) -> None:
    q, c, path = config
    yt.reshard(q, 3)  # its new partition is empty: the query is idle
    monkeypatch.setenv("COLUMNS", "200")

    assert main(["desync", "show", "spyt-job", "--config", str(path)]) == 0
    [row] = [line for line in capsys.readouterr().out.splitlines() if "2 added" in line]
    assert main(["desync", "heal", "spyt-job", "--config", str(path)]) == 0

    assert DesyncState.IN_SYNC.words in row
    assert "moved partition 0 10 -> 20, partition 1 10 -> 20" in capsys.readouterr().out
    assert yt.get_consumer_offsets(c, q) == {0: 20, 1: 20}
