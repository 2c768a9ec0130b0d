"""`opsd consumer seek`: to an offset, to the trim or to the end, per partition or all, dry run; never below the trim
nor past the end, and never back below what the query's checkpoint committed unless `--past-checkpoint`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.checkpoint import job_with_checkpoint
from tests.support.doctor import follow, write_config


@pytest.fixture
def job(yt, yt_root: str, tmp_path: Path) -> tuple[str, str, str]:
    """2 partitions of 40 rows, trimmed to 5 and 8, a checkpoint whose committed batch ends at row 20 of each, and
    the consumer at 30 on both."""
    q, c, location = job_with_checkpoint(yt, yt_root, tmp_path / "cp", {0: {0: 9, 1: 9}, 1: {0: 19, 1: 19}},
                                         committed=1, rows=80, consumer_at=30)
    yt.trim_rows(q, 0, 5)
    yt.trim_rows(q, 1, 8)
    return q, c, location


def seek(capsys, cluster_uri: str, q: str, c: str, *args: str) -> tuple[int, str, str]:
    return follow(capsys, ["consumer", "seek", q, c, *args], cluster_uri)


@pytest.mark.parametrize(("args", "moved", "offsets"), [
    (["--to", "end"], "moved partition 0 30 -> 40, partition 1 30 -> 40", {0: 40, 1: 40}),
    (["--to", "end", "--partition", "1"], "moved partition 1 30 -> 40", {0: 30, 1: 40}),
    (["--offset", "35"], "moved partition 0 30 -> 35, partition 1 30 -> 35", {0: 35, 1: 35}),
    (["--offset", "30", "--partition", "0"], "already partition 0 at 30", {0: 30, 1: 30}),
])
def test_a_seek_forward_moves_to_the_offset_or_the_end(yt, job, cluster_uri, capsys, args, moved, offsets) -> None:
    q, c, _ = job

    assert seek(capsys, cluster_uri, q, c, *args) == (0, f"{c} on {q}: {moved}\n", "")
    assert yt.get_consumer_offsets(c, q) == offsets


def test_a_dry_run_says_what_would_move_and_moves_nothing(yt, job, cluster_uri, capsys) -> None:
    q, c, location = job

    code, out, _ = seek(capsys, cluster_uri, q, c, "--to", "trim", "--checkpoint", location, "--past-checkpoint",
                        "--dry-run")

    assert (code, out) == (0, f"{c} on {q}: would move partition 0 30 -> 5, partition 1 30 -> 8\n")
    assert yt.get_consumer_offsets(c, q) == {0: 30, 1: 30}


def test_a_seek_back_to_the_checkpoints_end_is_allowed_and_below_it_refused_naming_the_partition(
        yt, job, cluster_uri, capsys, tmp_path: Path) -> None:
    q, c, location = job
    config = write_config(tmp_path / "opsd.yaml", cluster_uri, q, c, location)

    unchecked = seek(capsys, cluster_uri, q, c, "--offset", "20")
    below = seek(capsys, cluster_uri, q, c, "--offset", "19", "--partition", "1", "--query", "run",
                 "--config", str(config))
    to_trim = seek(capsys, cluster_uri, q, c, "--to", "trim", "--checkpoint", location)
    unchanged = yt.get_consumer_offsets(c, q)
    back = seek(capsys, cluster_uri, q, c, "--offset", "20", "--checkpoint", location)

    assert unchecked[0] == 1 and f"{q}: partition 0: moving {c} back from 30 to 20: give the query's checkpoint" \
        in unchecked[2] and "--past-checkpoint" in unchecked[2]
    assert below[0] == 1 and (f"{q}: partition 1: moving {c} back from 30 to 19 is below row 20, where the "
                              "checkpoint's committed batch 1 ends") in below[2]
    assert to_trim[0] == 1 and "partition 0: moving" in to_trim[2] and "nothing moved" in to_trim[2]
    assert unchanged == {0: 30, 1: 30}
    assert back[:2] == (0, f"{c} on {q}: moved partition 0 30 -> 20, partition 1 30 -> 20\n")


def test_past_checkpoint_moves_back_to_the_trim_but_never_below_it(yt, job, cluster_uri, capsys) -> None:
    q, c, _ = job

    below = seek(capsys, cluster_uri, q, c, "--offset", "6", "--past-checkpoint")
    to_trim = seek(capsys, cluster_uri, q, c, "--to", "trim", "--past-checkpoint")

    assert below[0] == 1 and (f"{q}: partition 1: consumer {c} not moved to offset 6: rows below 8 were trimmed"
                              in below[2]) and "--to trim" in below[2]
    assert to_trim[:2] == (0, f"{c} on {q}: moved partition 0 30 -> 5, partition 1 30 -> 8\n")
    assert yt.get_consumer_offsets(c, q) == {0: 5, 1: 8}


@pytest.mark.parametrize(("args", "says"), [
    (["--to", "trim", "--offset", "3"], "not allowed with argument"),
    ([], "one of the arguments --offset --to is required"),
    (["--to", "start"], "invalid choice: 'start'"),
])
def test_a_seek_needs_exactly_one_target(job, cluster_uri, capsys, args: list[str], says: str) -> None:
    q, c, _ = job

    with pytest.raises(SystemExit) as exit_:
        seek(capsys, cluster_uri, q, c, *args)

    assert exit_.value.code == 2 and says in capsys.readouterr().err


def test_a_query_of_another_queue_is_named(yt, job, cluster_uri, capsys, tmp_path: Path) -> None:
    q, c, location = job
    config = write_config(tmp_path / "opsd.yaml", cluster_uri, "//tmp/elsewhere", c, location)

    code, _, err = seek(capsys, cluster_uri, q, c, "--offset", "10", "--query", "run", "--config", str(config))

    assert code == 1 and f"query 'run' reads //tmp/elsewhere, not {q}" in err
