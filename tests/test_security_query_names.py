"""Names in the YT query language go through one function per kind (issue 32): a table path or a column name that
could end its brackets is refused, a string literal is escaped; the backend builds every query with them."""

from __future__ import annotations

from typing import Any

import pytest

from streaming_core.cluster import ClusterError
from streaming_core.cluster.ytsaurus import YtsaurusCluster
from streaming_core.cluster.ytsaurus import query as query_names

pytestmark = [pytest.mark.hostile]

HOSTILE_NAMES = ["//q] WHERE 1=1 --", "//q[0]", "col]\n, [secret", "a\x00b", "x\x1b[31m"]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_name_that_could_end_its_brackets_is_refused(name: str) -> None:
    for kind in (query_names.table, query_names.column):
        with pytest.raises(ClusterError, match="cannot appear in a query"):
            kind(name)


def test_plain_names_are_bracketed_and_literals_escaped() -> None:
    assert query_names.table("//home/team/queue-1.v2") == "[//home/team/queue-1.v2]"
    assert query_names.column("$tablet_index") == "[$tablet_index]"
    assert query_names.string('//q" OR "1"="1\\') == '"//q\\" OR \\"1\\"=\\"1\\\\"'


class RecordingClient:
    """Records every query; answers nothing."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def get(self, path: str) -> str:
        return "hahn"  # //sys/@cluster_name

    def select_rows(self, query: str, **kwargs: Any) -> list:
        self.queries.append(query)
        return []


def test_the_backend_refuses_a_hostile_consumer_path_before_any_query() -> None:
    client = RecordingClient()
    cluster = YtsaurusCluster("127.0.0.1:1", client_factory=lambda *a: client)

    with pytest.raises(ClusterError, match="cannot appear in a query"):
        cluster.get_consumer_offsets("//c] WHERE 1=1 --", "//q")
    assert cluster.get_consumer_offsets("//c", '//q" OR "1"="1') == {} and client.queries == [
        '[partition_index], [offset] FROM [//c] WHERE [queue_cluster] = "hahn" AND [queue_path] = '
        '"//q\\" OR \\"1\\"=\\"1"']
