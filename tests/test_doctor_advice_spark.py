"""The user's report, run for real: a queue trimmed past its vital consumer fails the query for good
(`TrimmedRowsError`); `opsd doctor` names the rows lost and the seek to the trim, `opsd run --check` refuses the
checkpoint until then, and after the advised seek the same checkpoint resumes in Spark and reads every row still
there. (Every other finding's advice is followed without Spark in `test_doctor_advice.py`.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

from tests.support.cluster import make_queue
from tests.support.doctor import advised_commands, doctor, finding, follow, write_config
from tests.support.source import checkpoint_of, numbered, read_queue, run_to_end


def test_a_query_behind_a_trim_past_its_vital_consumer_resumes_with_its_checkpoint_after_the_advised_seek(
        spark, yt, yt_root: str, cluster_uri: str, capsys, tmp_path: Path) -> None:
    q, c, cp = f"{yt_root}/queue", f"{yt_root}/consumer", checkpoint_of(yt_root)
    make_queue(yt, q)
    yt.create_consumer(c)
    yt.register_queue_consumer(q, c, vital=True)
    yt.insert_rows(q, numbered(10), tablet_index=0)
    yt.insert_rows(q, numbered(10, start=100), tablet_index=1)
    run_to_end(read_queue(spark, q, c), cp)  # the checkpoint has read rows 0..9 of each partition
    yt.insert_rows(q, numbered(10, start=10), tablet_index=0)
    yt.insert_rows(q, numbered(10, start=110), tablet_index=1)
    yt.trim_rows(q, 1, 15, past_vital_consumers=True)  # rows 10..14 of partition 1 gone before the query read them
    config = write_config(tmp_path / "opsd.yaml", cluster_uri, q, c, cp)

    with pytest.raises(StreamingQueryException, match="TrimmedRowsError") as failure:
        run_to_end(read_queue(spark, q, c), cp)
    code, report = doctor(capsys, "--config", str(config), "--json")
    found = finding(report, "run", "behind_trim")
    refused = follow(capsys, ["run", "--check", str(config)])
    [command] = advised_commands(found["advice"])
    sought = follow(capsys, command)
    ready = follow(capsys, ["run", "--check", str(config)])
    resumed = run_to_end(read_queue(spark, q, c), cp)

    assert f"5 rows lost. To go on without them, stop the query, move the consumer to the first row still there " \
        f"(opsd consumer seek {q} {c} --partition 1 --to trim)" in str(failure.value)
    assert code == 1 and "rows [10, 15) of partition 1 were trimmed before the query read them (5 rows; although " \
        f"consumer {c} is registered as vital" in found["what"]
    assert "register" not in found["advice"], "the consumer is vital already"
    assert refused[0] == 1 and f"opsd consumer seek {q} {c} --partition 1 --to trim" in refused[1]
    assert sought[:2] == (0, f"{c} on {q}: moved partition 1 10 -> 15\n")
    assert ready[:2] == (0, "1 pipeline(s) checked: ready to run\n")
    assert sorted(r["n"] for r in resumed.rows) == [*range(10, 20), *range(115, 120)]
    code, report = doctor(capsys, "--config", str(config), "--json")
    assert code == 0 and [f["kind"] for f in report["queries"]["run"]["findings"]] == ["lagging_one_batch"]
