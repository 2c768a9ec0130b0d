"""The test run's plugins: every shared fixture lives in `tests.support` and is loaded from here.

Tests that touch the cluster share one embedded cluster and one local Spark session per test run
(`tests.support.cluster`, `tests.support.spark`), each under its own fresh `//tmp/t<uuid>` directory.
"""

from __future__ import annotations

import os
import sys

import pytest

# Helpers in `tests.support` that are not plugins (imported by test modules) get pytest's assertion messages too.
pytest.register_assert_rewrite("tests.support")

os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

#: The run's embedded cluster (`cluster_uri`, `yt`, `yt_root`) and Spark session (`spark`); the CLI tests' fixtures
#: (`uri`, `cluster`, `opsd`); a real Prometheus (`prometheus`, `opsd_server`); the YTsaurus stand-in (`standin`,
#: `standin_cluster`, `open_standin`).
pytest_plugins = [
    "tests.support.cluster",
    "tests.support.spark",
    "tests.support.cli",
    "tests.support.prometheus",
    "tests.support.standin",
]
