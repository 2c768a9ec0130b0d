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

#: First the guard that a test starting an external program (Spark's JVM, Prometheus, tmux, checkov) carries its
#: marker; then the run's embedded cluster (`cluster_uri`, `yt`, `yt_root`) and Spark session (`spark`); the CLI
#: tests' fixtures (`uri`, `cluster`, `opsd`); a real Prometheus (`prometheus`, `opsd_server`); the YTsaurus stand-in
#: (`standin`, `standin_cluster`, `open_standin`).
pytest_plugins = [
    "tests.support.programs",
    "tests.support.cluster",
    "tests.support.spark",
    "tests.support.cli",
    "tests.support.prometheus",
    "tests.support.standin",
]

#: Fixture -> the marker of every test that uses it, directly or through other fixtures: the run's Spark session, a
#: Prometheus server. Tests that start these in a child process carry the marker explicitly (`tests.support.programs`
#: fails a test that starts one unmarked).
FIXTURE_MARKERS = {"spark": "spark", "prometheus": "prometheus"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by the fixtures it uses, before `-m` selects (tryfirst: ahead of pytest's own selection)."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for fixture, marker in FIXTURE_MARKERS.items():
            if fixture in used:
                item.add_marker(marker)
