"""`opsd demo` end to end, as `make demo` runs it (in a process of its own: it starts and stops its Spark)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from opsd.demo.scenario import RESULT
from streaming_core.cluster import connect
from tests.sink_support import ordered_rows

pytestmark = pytest.mark.spark

DEMO_TIMEOUT_SECONDS = 400.0


def summary_value(stdout: str, label: str) -> int:
    match = re.search(rf"{re.escape(label)}\s*│\s*([\d,]+)", stdout)
    assert match, f"no {label!r} in the summary:\n{stdout[-2000:]}"
    return int(match.group(1).replace(",", ""))


def test_demo_delivers_every_produced_row_and_prints_the_summary(tmp_path: Path) -> None:
    root = tmp_path / "demo"

    result = subprocess.run(
        [sys.executable, "-m", "opsd.cli", "demo", "--duration", "5", "--rate", "500", "--partitions", "2",
         "--port", "0", "--root", str(root)],
        capture_output=True, text=True, timeout=DEMO_TIMEOUT_SECONDS, env={**os.environ, "COLUMNS": "200"})

    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    produced = summary_value(result.stdout, "rows in (produced)")
    assert produced >= 1000, "5 s at 500 rows/s"
    assert summary_value(result.stdout, "rows out (result table)") == produced
    assert summary_value(result.stdout, "batches") >= 1
    with connect(f"local://{root}") as cluster:
        rows = ordered_rows(cluster, RESULT)
    assert sorted(r["data"] for r in rows) == sorted(f"row-{i}" for i in range(produced))
    assert all(r["data_length"] == len(r["data"]) for r in rows)


def test_the_live_view_counts_batch_zero_as_one_batch():
    from opsd.demo.view import batches_done

    assert [batches_done(None), batches_done(0), batches_done(4)] == [0, 1, 5]
