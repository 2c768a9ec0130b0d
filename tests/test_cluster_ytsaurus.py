"""`YtsaurusCluster`: the exact `yt.wrapper` calls it makes (against a recording fake `YtClient`), and
the shared cluster contract against a real YTsaurus when `YT_PROXY` is set.

Every call the fake records is bound to the real `yt.wrapper.YtClient` method's signature, so a
misspelt method or argument fails here rather than on a cluster.
"""

from __future__ import annotations

import datetime as dt
import inspect
import io
import os
import pickle
import time
import uuid
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
import structlog.testing
import yt.wrapper as yt
import yt.yson as yson

from streaming_core.cluster import (
    ClusterError,
    ConflictError,
    NoSuchPathError,
    NotRegisteredError,
    Registration,
    SchemaError,
    TableSchema,
    TabletInfo,
    TrimmedRowsError,
    UnreachableClusterError,
    VitalConsumerError,
    connect,
)
from streaming_core.cluster.ytsaurus import CONSUMER_SCHEMA, YtsaurusCluster
from streaming_core.cluster.ytsaurus.client import ARROW_RAW, WIRE_RAW, client_config, client_token, retry_seconds
from streaming_core.cluster.ytsaurus.rows import WIRE_FORMAT, from_yt_rows, to_yt_rows
from streaming_core.cluster.ytsaurus.wire import dump_rows, load_rows
from tests.support.cluster_contract import ClusterContract
from tests.support.ports import free_port
from tests.support.producer_contract import ProducerContract
from tests.support.standin import SESSION_REGISTRATION_WAIT_SECONDS, STANDIN_TOKEN

QUEUE = "//tmp/q"
CONSUMER = "//tmp/c"
SORTED_TABLE = "//tmp/s"
TOKEN = "secret-token-123"
QUEUE_SCHEMA = [{"name": "id", "type_v3": "int64"}, {"name": "text", "type_v3": {"type_name": "optional",
                                                                              "item": "utf8"}}]
SORTED_SCHEMA = [{"name": "k", "type_v3": "int64", "sort_order": "ascending"},
                 {"name": "v", "type_v3": {"type_name": "optional", "item": "utf8"}}]
#: The keyword arguments of the small row calls: Python rows in the adapter's explicit YSON format.
WIRE = {"format": WIRE_FORMAT, "raw": False}
QUEUE_ATTRS = {"type": "table", "dynamic": True, "schema": QUEUE_SCHEMA, "tablet_count": 2}
SORTED_ATTRS = {"type": "table", "dynamic": True, "schema": SORTED_SCHEMA}


def yt_error(code: int, message: str) -> yt.YtResponseError:
    """A `YtResponseError` shaped as the HTTP proxy returns it."""
    return yt.YtResponseError({"code": code, "message": message, "attributes": {}})


class FakeTransaction:
    """Records commit / abort and attach / detach (a `with client.Transaction(transaction_id=...)`)."""

    def __init__(self, client: FakeYtClient, transaction_id: str) -> None:
        self.client = client
        self.transaction_id = transaction_id

    def commit(self) -> None:
        self.client.record("commit", (self.transaction_id,), {})

    def abort(self) -> None:
        self.client.record("abort", (self.transaction_id,), {})

    def __enter__(self) -> FakeTransaction:
        self.client.current_tx = self.transaction_id
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.current_tx = None


class FakeYtClient:
    """A recording stand-in for `yt.wrapper.YtClient`.

    `answers` maps a method name to its return value or to a function computing it from the call's
    arguments; `errors` maps a method name to the exception it raises. Every call is checked against the
    real `YtClient` signature and recorded as `(name, args, kwargs)`, with the attached transaction id
    in `tx_of_call`.
    """

    def __init__(self, answers: dict[str, Any] | None = None, errors: dict[str, Exception] | None = None):
        self.answers = answers or {}
        self.errors = errors or {}
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.tx_of_call: list[str | None] = []
        self.current_tx: str | None = None

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)

        def method(*args: Any, **kwargs: Any) -> Any:
            inspect.signature(getattr(yt.YtClient, name)).bind(None, *args, **kwargs)
            self.record(name, args, kwargs)
            if name in self.errors:
                raise self.errors[name]
            answer = self.answers.get(name)
            answer = answer(*args, **kwargs) if callable(answer) else answer
            # A raw call gets the bytes the proxy would send for those rows.
            return io.BytesIO(dump_rows(list(answer or []))) if kwargs.get("raw") else answer

        return method

    def Transaction(self, **kwargs: Any) -> FakeTransaction:  # mirrors YtClient.Transaction
        inspect.signature(yt.YtClient.Transaction).bind(None, **kwargs)
        self.record("Transaction", (), kwargs)
        return FakeTransaction(self, kwargs.get("transaction_id") or "tx-1")

    def record(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Record the call; a raw row payload (bytes) is recorded as the rows it carries, to compare as such."""
        if kwargs.get("raw"):
            args = tuple(payload_rows(a, kwargs["format"]) if isinstance(a, bytes) else a for a in args)
        self.calls.append((name, args, kwargs))
        self.tx_of_call.append(self.current_tx)

    def names(self) -> list[str]:
        return [name for name, _, _ in self.calls]

    def calls_named(self, name: str) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
        return [(args, kwargs) for n, args, kwargs in self.calls if n == name]


def payload_rows(payload: bytes, fmt: Any) -> list[dict[str, Any]]:
    """The rows of a raw row payload: binary YSON, or the `arrow` input format's IPC stream."""
    if fmt is ARROW_RAW["format"]:
        return pa.ipc.open_stream(payload).read_all().to_pylist()
    return [as_bytes(row) for row in load_rows(payload)]


def as_bytes(value: Any) -> Any:
    """Parsed YSON with its not-UTF-8 strings as bytes (the bindings hand them out as `YsonStringProxy`)."""
    if isinstance(value, yson.YsonStringProxy):
        return yson.get_bytes(value)
    if isinstance(value, dict):
        return {k: as_bytes(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_bytes(v) for v in value]
    return value


def node_getter(nodes: dict[str, Any]) -> Callable[..., Any]:
    """A fake `get` answering from a dict of paths, with a resolve error for the others."""
    def get(path: str, **_: Any) -> Any:
        if path not in nodes:
            raise yt_error(500, f"Error resolving path {path}")
        return nodes[path]
    return get


def tablet_infos(*pairs: tuple[int, int]) -> dict[str, Any]:
    return {"tablets": [{"total_row_count": total, "trimmed_row_count": trimmed} for total, trimmed in pairs]}


#: The proxy the fake clusters pin their tablet transactions to.
PINNED_PROXY = "http://hahn-proxy-2:80"


def make_cluster(client: FakeYtClient, **kwargs: Any) -> YtsaurusCluster:
    return YtsaurusCluster("hahn", token=TOKEN, client_factory=lambda *_: client, pick_proxy=lambda _: PINNED_PROXY,
                           **kwargs)


@pytest.fixture
def nodes() -> dict[str, Any]:
    return {
        QUEUE + "/@": QUEUE_ATTRS, QUEUE + "/@schema": QUEUE_SCHEMA, QUEUE + "/@tablet_count": 2,
        SORTED_TABLE + "/@": SORTED_ATTRS, SORTED_TABLE + "/@schema": SORTED_SCHEMA,
        CONSUMER + "/@": {"type": "table", "dynamic": True, "schema": CONSUMER_SCHEMA, "treat_as_queue_consumer": True},
    }


@pytest.fixture
def client(nodes: dict[str, Any]) -> FakeYtClient:
    return FakeYtClient({"get": node_getter(nodes)})


@pytest.fixture
def cluster(client: FakeYtClient) -> YtsaurusCluster:
    return make_cluster(client)


class TestCreate:
    def test_queue_is_created_dynamic_with_tablets_then_mounted_synchronously(self, cluster, client):
        cluster.create("table", QUEUE, recursive=True, attributes={
            "dynamic": True, "schema": QUEUE_SCHEMA, "tablet_count": 2})

        assert client.calls == [
            ("create", ("table", QUEUE), {"recursive": True, "ignore_existing": False, "attributes": {
                "dynamic": True, "schema": QUEUE_SCHEMA, "tablet_count": 2}}),
            ("mount_table", (QUEUE,), {"sync": True}),
        ]

    def test_old_style_schema_is_sent_as_type_v3(self, cluster, client):
        cluster.create("table", "//tmp/static", attributes={"schema": [
            {"name": "a", "type": "int64", "required": True}]})

        (_, kwargs), = client.calls_named("create")
        assert kwargs["attributes"] == {"schema": [{"name": "a", "type_v3": "int64"}]}
        assert "mount_table" not in client.names()

    def test_consumer_table_has_the_yt_consumer_schema_and_is_mounted(self, cluster, client):
        cluster.create_consumer(CONSUMER, ignore_existing=True)

        (args, kwargs), = client.calls_named("create")
        assert args == ("table", CONSUMER)
        assert kwargs["ignore_existing"] is True
        assert kwargs["attributes"]["treat_as_queue_consumer"] is True
        assert kwargs["attributes"]["dynamic"] is True
        assert kwargs["attributes"]["schema"] == TableSchema.from_yt(CONSUMER_SCHEMA).to_yt()
        assert client.calls_named("mount_table") == [((CONSUMER,), {"sync": True})]

    def test_document_value_is_passed_as_the_value_attribute(self, cluster, client):
        cluster.create("document", "//tmp/doc", attributes={"value": {"a": 1}})

        assert client.calls == [("create", ("document", "//tmp/doc"), {
            "recursive": False, "ignore_existing": False, "attributes": {"value": {"a": 1}}})]


class TestPathTree:
    def test_get_returns_plain_python_values(self, client, cluster):
        client.answers["get"] = yson.loads(b'{a=%true; b=#; c=[1u; "x"]}')

        value = cluster.get("//tmp/doc")

        assert value == {"a": True, "b": None, "c": [1, "x"]}
        assert type(value["a"]) is bool
        assert type(value["c"][1]) is str

    def test_resolve_error_becomes_no_such_path_naming_the_path(self, cluster):
        with pytest.raises(NoSuchPathError, match="//tmp/missing"):
            cluster.get("//tmp/missing/@type")

    def test_list_is_sorted_plain_strings(self, client, cluster):
        client.answers["list"] = [yson.YsonUnicode("b"), yson.YsonUnicode("a")]

        assert cluster.list("//tmp") == ["a", "b"]
        assert client.calls_named("list") == [(("//tmp",), {})]

    def test_move_is_one_yt_move(self, client, cluster):
        cluster.move("//tmp/a", "//tmp/b", force=True)

        assert client.calls_named("move") == [(("//tmp/a", "//tmp/b"), {"force": True})]

    def test_unknown_yt_error_becomes_cluster_error_with_its_message(self, client, cluster):
        client.errors["remove"] = yt_error(1, "Something broke")

        with pytest.raises(ClusterError, match="//tmp/x: Something broke"):
            cluster.remove("//tmp/x", recursive=True)


class TestInsertRows:
    def test_rows_go_to_the_given_tablet(self, cluster, client):
        cluster.insert_rows(QUEUE, [{"id": 1, "text": "a"}, {"id": 2}], tablet_index=1)

        assert client.calls_named("insert_rows") == [((QUEUE, [
            {"$tablet_index": 1, "id": 1, "text": "a"}, {"$tablet_index": 1, "id": 2, "text": None},
        ]), ARROW_RAW)]

    def test_rows_keep_their_own_tablet_index_and_others_are_spread(self, cluster, client):
        batch = pa.record_batch({"$tablet_index": [1, 1], "id": [5, 6]})
        cluster.insert_rows(QUEUE, batch)
        cluster.insert_rows(QUEUE, [{"id": 7}, {"id": 8}, {"id": 9}])

        first, second = client.calls_named("insert_rows")
        assert [r["$tablet_index"] for r in first[0][1]] == [1, 1]
        assert [r["$tablet_index"] for r in second[0][1]] == [0, 1, 0]

    def test_a_bad_row_fails_before_any_insert(self, cluster, client):
        with pytest.raises(SchemaError, match=r"//tmp/q: row 1, column 'id'"):
            cluster.insert_rows(QUEUE, [{"id": 1}, {"id": "not a number"}], tablet_index=0)

        assert "insert_rows" not in client.names()

    def test_a_tablet_out_of_range_fails_before_any_insert(self, cluster, client):
        with pytest.raises(SchemaError, match="tablet 2 out of range"):
            cluster.insert_rows(QUEUE, [{"id": 1}], tablet_index=2)

        assert "insert_rows" not in client.names()

    def test_sorted_table_rows_are_upserted_without_tablet_index(self, cluster, client):
        cluster.insert_rows(SORTED_TABLE, [{"k": 1, "v": "x"}])

        assert client.calls_named("insert_rows") == [((SORTED_TABLE, [{"k": 1, "v": "x"}]), ARROW_RAW)]

    def test_static_table_is_refused(self, cluster, nodes, client):
        nodes["//tmp/static/@"] = {"type": "table", "dynamic": False, "schema": QUEUE_SCHEMA}

        with pytest.raises(SchemaError, match="found static"):
            cluster.insert_rows("//tmp/static", [{"id": 1}])
        assert "insert_rows" not in client.names()


class TestStaticTables:
    @pytest.fixture
    def static(self, nodes: dict[str, Any]) -> str:
        nodes["//tmp/t/@"] = {"type": "table", "dynamic": False, "schema": QUEUE_SCHEMA}
        nodes["//tmp/t/@schema"] = QUEUE_SCHEMA
        return "//tmp/t"

    def test_append_is_a_table_path_attribute(self, cluster, client, static):
        cluster.write_table(static, pa.table({"id": [1, 2]}), append=True)

        ((path, rows), kwargs), = client.calls_named("write_table")
        assert (str(path), path.attributes, rows, kwargs) == (
            static, {"append": True}, [{"id": 1, "text": None}, {"id": 2, "text": None}], WIRE_RAW)

    def test_read_is_streamed_in_batches_of_max_rows(self, cluster, client, static):
        client.answers["read_table"] = iter([{"id": i, "text": None} for i in range(5)])

        batches = list(cluster.read_table(static, max_rows=2))

        assert [b.num_rows for b in batches] == [2, 2, 1]
        assert client.calls_named("read_table") == [((static,), WIRE)]


class TestTablets:
    def test_tablet_infos_are_asked_for_every_tablet_and_mapped(self, cluster, client):
        client.answers["get_tablet_infos"] = tablet_infos((10, 0), (7, 3))

        assert cluster.get_tablet_infos(QUEUE) == [TabletInfo(0, 10, 0), TabletInfo(1, 7, 3)]
        assert client.calls_named("get_tablet_infos") == [((QUEUE, [0, 1]), {})]

    def test_reading_a_trimmed_range_names_queue_partition_and_range(self, cluster, client):
        client.answers["get_tablet_infos"] = tablet_infos((10, 0), (7, 3))

        with pytest.raises(TrimmedRowsError, match=r"//tmp/q: partition 1, rows \[2, 3\) of the requested range"):
            list(cluster.read_tablet(QUEUE, 1, 2, 5))
        assert "select_rows" not in client.names()

    def test_range_is_read_with_bounded_selects_in_row_order(self, cluster, client):
        client.answers["get_tablet_infos"] = tablet_infos((10, 0), (7, 3))
        client.answers["select_rows"] = lambda query, **_: [
            {"$tablet_index": 1, "$row_index": i, "id": i, "text": None}
            for i in reversed(range(int(query.split("BETWEEN ")[1].split()[0]),
                                    int(query.split(" AND ")[-1]) + 1))
        ]

        batches = list(cluster.read_tablet(QUEUE, 1, 3, 7, max_rows=3, service_columns=True))

        assert [q for (q,), _ in client.calls_named("select_rows")] == [
            "[$tablet_index], [$row_index], [id], [text] FROM [//tmp/q]"
            " WHERE [$tablet_index] = 1 AND [$row_index] BETWEEN 3 AND 5",
            "[$tablet_index], [$row_index], [id], [text] FROM [//tmp/q]"
            " WHERE [$tablet_index] = 1 AND [$row_index] BETWEEN 6 AND 6",
        ]
        table = pa.Table.from_batches(batches)
        assert table.column_names == ["$tablet_index", "$row_index", "id", "text"]
        assert table.column("id").to_pylist() == [3, 4, 5, 6]

    def test_rows_trimmed_while_reading_are_reported(self, cluster, client):
        client.answers["get_tablet_infos"] = tablet_infos((10, 0), (7, 0))
        client.answers["select_rows"] = [{"$tablet_index": 1, "$row_index": 4, "id": 4}]

        with pytest.raises(TrimmedRowsError, match=r"rows \[2, 4\) of the requested range \[2, 5\)"):
            list(cluster.read_tablet(QUEUE, 1, 2, 5))

    def test_trim_is_sent_only_when_it_moves_forward(self, cluster, client):
        client.answers["get_tablet_infos"] = tablet_infos((10, 5), (7, 0))
        client.answers["list_queue_consumer_registrations"] = []

        cluster.trim_rows(QUEUE, 0, 4)
        cluster.trim_rows(QUEUE, 0, 8)

        assert client.calls_named("trim_rows") == [((QUEUE, 0, 8), {})]


    def test_trim_past_a_vital_consumers_offset_is_refused_before_any_trim_is_sent(self, cluster, client, nodes):
        nodes["//sys/@cluster_name"] = "hahn"
        client.answers["get_tablet_infos"] = tablet_infos((10, 0), (7, 0))
        client.answers["list_queue_consumer_registrations"] = [
            {"queue_path": QUEUE, "consumer_path": CONSUMER, "vital": True, "partitions": None}]
        client.answers["select_rows"] = [{"partition_index": 0, "offset": 3}]

        with pytest.raises(VitalConsumerError, match=r"\[3, 6\)"):
            cluster.trim_rows(QUEUE, 0, 6)
        cluster.trim_rows(QUEUE, 0, 6, past_vital_consumers=True)

        assert client.calls_named("trim_rows") == [((QUEUE, 0, 6), {})]


class TestConsumers:
    def test_register_passes_vital_and_partitions(self, cluster, client):
        cluster.register_queue_consumer(QUEUE, CONSUMER, vital=True, partitions=(0, 1))

        assert client.calls_named("register_queue_consumer") == [((QUEUE, CONSUMER, True), {"partitions": [0, 1]})]

    def test_register_refuses_a_table_that_is_not_a_consumer_before_calling(self, cluster, client):
        with pytest.raises(SchemaError, match=f"{SORTED_TABLE}: not a consumer"):
            cluster.register_queue_consumer(QUEUE, SORTED_TABLE)
        assert "register_queue_consumer" not in client.names()

    def test_registrations_are_mapped_without_path_attributes(self, cluster, client):
        queue = yson.YsonUnicode(QUEUE)
        queue.attributes["cluster"] = "hahn"
        client.answers["list_queue_consumer_registrations"] = [
            {"queue_path": queue, "consumer_path": CONSUMER, "vital": False, "partitions": yson.YsonEntity()},
        ]

        assert cluster.list_queue_consumer_registrations(queue_path=QUEUE) == [Registration(QUEUE, CONSUMER)]
        assert client.calls_named("list_queue_consumer_registrations") == [
            ((), {"queue_path": QUEUE, "consumer_path": None})]

    def test_pull_consumer_call_and_arrow_result(self, cluster, client):
        client.answers["pull_consumer"] = [
            {"$tablet_index": 1, "$row_index": 5, "id": 1, "text": "a"},
            {"$tablet_index": 1, "$row_index": 6, "id": 2, "text": None},
        ]

        table = cluster.pull_consumer(CONSUMER, QUEUE, 5, 1, max_row_count=2, max_data_weight=100)

        assert client.calls_named("pull_consumer") == [
            ((CONSUMER, QUEUE, 5, 1), {"max_row_count": 2, "max_data_weight": 100, **WIRE_RAW})]
        assert table.to_pylist() == [
            {"$tablet_index": 1, "$row_index": 5, "id": 1, "text": "a"},
            {"$tablet_index": 1, "$row_index": 6, "id": 2, "text": None},
        ]

    def test_pull_by_an_unregistered_consumer_raises_not_registered_after_waiting_out_a_fresh_registration(
            self, cluster, client):
        client.errors["pull_consumer"] = yt_error(
            901, f"Consumer {CONSUMER} is not registered for queue {QUEUE}")
        cluster.registration_visible_within_seconds = 0.6
        started = time.monotonic()

        with structlog.testing.capture_logs() as logs, pytest.raises(NotRegisteredError, match="is not registered"):
            cluster.pull_consumer(CONSUMER, QUEUE, None, 0)

        assert time.monotonic() - started >= 0.6
        assert [e["event"] for e in logs] == ["yt_registration_not_visible_yet"]

    def test_advance_sends_old_offset_for_compare_and_set(self, cluster, client):
        cluster.advance_consumer(CONSUMER, QUEUE, 1, 5, 9)

        assert client.calls == [("advance_consumer", (CONSUMER, QUEUE, 1, 5, 9), {"client_side": True})]

    def test_failed_compare_and_set_is_a_conflict(self, cluster, client):
        client.errors["advance_consumer"] = yt_error(
            3100, "Offset conflict at partition 1 of consumer //tmp/c: expected offset 5, found offset 7")

        with pytest.raises(ConflictError, match="expected offset 5, found offset 7"):
            cluster.advance_consumer(CONSUMER, QUEUE, 1, 5, 9)

    def test_offsets_are_selected_by_queue_cluster_and_path(self, cluster, client, nodes):
        """A consumer may read queues of several clusters: the same path on another cluster is another queue."""
        nodes["//sys/@cluster_name"] = "hahn-main"
        client.answers["select_rows"] = [
            {"partition_index": yson.YsonUint64(1), "offset": yson.YsonUint64(9)}]

        assert cluster.get_consumer_offsets(CONSUMER, QUEUE) == {1: 9}
        assert client.calls_named("select_rows") == [
            (('[partition_index], [offset] FROM [//tmp/c] WHERE [queue_cluster] = "hahn-main" '
              'AND [queue_path] = "//tmp/q"',), WIRE)]


class TestTransaction:
    def test_writes_and_advance_are_attached_to_one_tablet_transaction_then_committed(self, cluster, client):
        with cluster.transaction() as tx:
            tx.insert_rows(QUEUE, [{"id": 1}], tablet_index=0)
            tx.advance_consumer(CONSUMER, QUEUE, 0, None, 1)

        assert client.calls[0] == ("Transaction", (), {"type": "tablet"})
        attached = [(name, tx_id) for (name, _, _), tx_id in zip(client.calls, client.tx_of_call, strict=True)
                    if name in ("insert_rows", "advance_consumer")]
        assert attached == [("insert_rows", "tx-1"), ("advance_consumer", "tx-1")]
        assert client.names()[-1] == "commit"
        assert "abort" not in client.names()

    def test_an_exception_aborts_and_commits_nothing(self, cluster, client):
        with pytest.raises(RuntimeError), cluster.transaction() as tx:
            tx.insert_rows(QUEUE, [{"id": 1}], tablet_index=0)
            raise RuntimeError("boom")

        assert client.names()[-1] == "abort"
        assert "commit" not in client.names()

    def test_lookups_see_the_transactions_own_writes_and_deletes(self, cluster, client):
        client.answers["lookup_rows"] = [{"k": 1, "v": "stored"}, {"k": 2, "v": "stored"}]
        tx = cluster.transaction()
        tx.insert_rows(SORTED_TABLE, [{"k": 1, "v": "mine"}])
        tx.delete_rows(SORTED_TABLE, [{"k": 2}])

        rows = tx.lookup_rows(SORTED_TABLE, [{"k": 1}, {"k": 2}, {"k": 3}])

        assert rows == [{"k": 1, "v": "mine"}]
        assert client.calls_named("lookup_rows") == [((SORTED_TABLE, [{"k": 1}, {"k": 2}, {"k": 3}]), WIRE)]
        assert client.calls_named("delete_rows") == [((SORTED_TABLE, [{"k": 2}]), WIRE)]

    def test_publish_copies_the_static_rows_as_inserts_of_the_transaction(self, cluster, client, nodes):
        nodes["//tmp/staged/@"] = {"type": "table", "dynamic": False, "schema": QUEUE_SCHEMA}
        nodes["//tmp/staged/@schema"] = QUEUE_SCHEMA
        client.answers["read_table"] = iter([{"id": i, "text": None} for i in range(3)])

        with cluster.transaction() as tx:
            assert tx.publish_table("//tmp/staged", QUEUE) == 3

        inserted = [(args[0], [r["id"] for r in args[1]], tx_id) for (name, args, _), tx_id
                    in zip(client.calls, client.tx_of_call, strict=True) if name == "insert_rows"]
        assert inserted == [(QUEUE, [0, 1, 2], "tx-1")]
        assert client.names()[-1] == "commit"

    def test_the_transaction_has_its_own_client_pinned_to_one_proxy_without_discovery(self, client):
        made: list[tuple[str, dict[str, Any] | None, FakeYtClient]] = []

        def factory(proxy: str, _: str | None, config: dict[str, Any] | None) -> FakeYtClient:
            made.append((proxy, config, FakeYtClient(client.answers)))
            return made[-1][2]

        picked_with: list[Any] = []
        cluster = YtsaurusCluster("hahn", client_factory=factory,
                                  pick_proxy=lambda c: picked_with.append(c) or PINNED_PROXY)
        cluster.exists(QUEUE)
        cluster.transaction().commit()

        assert made[0][0] == "hahn" and made[0][2].names() == ["exists"]
        assert picked_with == [made[0][2]]  # picked from /hosts by the cluster's own client
        assert made[1][0] == PINNED_PROXY and made[1][1] == {"proxy": {"enable_proxy_discovery": False}}
        assert made[1][2].names() == ["Transaction", "commit"]


class TestSecretsAndPickling:
    def test_token_is_not_in_repr(self, cluster):
        assert TOKEN not in repr(cluster)
        assert repr(cluster) == "YtsaurusCluster(proxy='hahn')"

    def test_token_is_scrubbed_from_error_messages(self, cluster, client):
        client.errors["exists"] = yt_error(1, f"Bad token {TOKEN}")

        with pytest.raises(ClusterError) as raised:
            cluster.exists(QUEUE)
        assert TOKEN not in str(raised.value)
        assert raised.value.__cause__ is None and raised.value.__suppress_context__

    def test_pickle_holds_configuration_only_and_the_client_is_made_on_first_use(self, cluster, client):
        cluster.exists(QUEUE)

        assert cluster.__getstate__() == {"proxy": "hahn", "token": TOKEN, "config": None}
        copy = pickle.loads(pickle.dumps(cluster))
        assert copy._client_instance is None
        assert (copy.proxy, copy.uri) == ("hahn", "yt://hahn")

    def test_without_a_token_the_client_reads_its_own_sources(self, monkeypatch, tmp_path):
        seen: list[tuple[Any, ...]] = []
        YtsaurusCluster("hahn", client_factory=lambda *a: seen.append(a) or FakeYtClient()).exists(QUEUE)
        assert seen == [("hahn", None, None)]

        monkeypatch.setenv("YT_TOKEN", "from-env")
        assert client_token(yt.YtClient(config=client_config("hahn", None, None))) == "from-env"
        monkeypatch.delenv("YT_TOKEN")
        (tmp_path / "token").write_text("from-file\n")
        monkeypatch.setenv("YT_TOKEN_PATH", str(tmp_path / "token"))
        assert client_token(yt.YtClient(config=client_config("hahn", None, None))) == "from-file"
        assert client_token(yt.YtClient(config=client_config("hahn", "given", None))) == "given"


class TestValueConversion:
    def test_temporal_and_yson_columns_round_trip_through_yt_representation(self):
        schema = TableSchema.from_yt([
            {"name": "ts", "type_v3": "timestamp"}, {"name": "dt", "type_v3": "datetime"},
            {"name": "d", "type_v3": "date"},
            {"name": "y", "type_v3": {"type_name": "optional", "item": "yson"}},
        ])
        when = dt.datetime(2024, 5, 1, 12, 0, 1, tzinfo=dt.UTC)
        table = pa.Table.from_pylist([{"ts": when, "dt": when, "d": dt.date(2024, 5, 1),
                                       "y": yson.dumps({"a": 1})}], schema=schema.arrow_schema())

        (row,) = to_yt_rows(schema, table)

        assert row == {"ts": 1714564801000000, "dt": 1714564801, "d": 19844, "y": {"a": 1}}
        assert from_yt_rows(schema, [row]).to_pylist() == table.to_pylist()


class TestCompositeValuesOnTheWire:
    """The adapter's calls carry values converted to YTsaurus' YSON representation, and what the calls
    return (parsed from YSON bytes, as `yt.wrapper` would) comes back as Arrow / Python values."""

    PRICE = {"type_name": "decimal", "precision": 10, "scale": 2}
    SCHEMA = [
        {"name": "day", "type_v3": "date", "sort_order": "ascending"},
        {"name": "order", "type_v3": {"type_name": "struct", "members": [
            {"name": "price", "type": {"type_name": "optional", "item": PRICE}},
            {"name": "at", "type": "timestamp"}]}},
        {"name": "tags", "type_v3": {"type_name": "dict", "key": "utf8", "value": "int64"}},
        {"name": "pair", "type_v3": {"type_name": "tuple", "elements": [{"type": "int64"}, {"type": "utf8"}]}},
    ]
    WHEN = dt.datetime(2024, 5, 1, 12, 0, 1, tzinfo=dt.UTC)
    ROW = {"day": dt.date(2024, 5, 1), "order": {"price": Decimal("12.34"), "at": WHEN},
           "tags": [("a", 1)], "pair": {"_1": 7, "_2": "x"}}
    WIRE_ROW = {"day": 19844, "order": {"price": (1234 + 2**63).to_bytes(8, "big"), "at": 1714564801000000},
                "tags": [["a", 1]], "pair": [7, "x"]}

    @pytest.fixture
    def composite(self, nodes: dict[str, Any]) -> tuple[str, str]:
        queue_schema = [{k: v for k, v in c.items() if k != "sort_order"} for c in self.SCHEMA]
        nodes["//tmp/cq/@"] = {"type": "table", "dynamic": True, "schema": queue_schema, "tablet_count": 1}
        nodes["//tmp/cq/@schema"] = queue_schema
        nodes["//tmp/cs/@"] = {"type": "table", "dynamic": True, "schema": self.SCHEMA}
        nodes["//tmp/cs/@schema"] = self.SCHEMA
        return "//tmp/cq", "//tmp/cs"

    @staticmethod
    def parsed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Rows as the client returns them: dumped and parsed in the adapter's wire format."""
        stream = io.BytesIO()
        WIRE_FORMAT.dump_rows(rows, stream)
        return list(WIRE_FORMAT.load_rows(io.BytesIO(stream.getvalue())))

    def test_insert_sends_converted_values_in_the_explicit_format(self, cluster, client, composite):
        queue, _ = composite

        cluster.insert_rows(queue, [self.ROW])

        assert client.calls_named("insert_rows") == [((queue, [{"$tablet_index": 0, **self.WIRE_ROW}]), WIRE_RAW)]

    def test_transaction_insert_sends_converted_values_too(self, cluster, client, composite):
        _, sorted_table = composite

        with cluster.transaction() as tx:
            tx.insert_rows(sorted_table, [self.ROW])

        assert client.calls_named("insert_rows") == [((sorted_table, [self.WIRE_ROW]), WIRE_RAW)]

    def test_select_returns_python_values_from_wire_values(self, cluster, client, composite):
        _, sorted_table = composite
        client.answers["select_rows"] = self.parsed([self.WIRE_ROW])

        assert cluster.select_rows(sorted_table) == [self.ROW]
        assert client.calls_named("select_rows") == [((f"* FROM [{sorted_table}]",), WIRE)]

    def test_lookup_keys_are_sent_as_wire_values(self, cluster, client, composite):
        _, sorted_table = composite
        client.answers["lookup_rows"] = self.parsed([self.WIRE_ROW])

        assert cluster.lookup_rows(sorted_table, [{"day": dt.date(2024, 5, 1)}]) == [self.ROW]
        assert client.calls_named("lookup_rows") == [((sorted_table, [{"day": 19844}]), WIRE)]

    def test_pulled_rows_become_arrow_values(self, cluster, client, composite):
        queue, _ = composite
        client.answers["pull_consumer"] = self.parsed([{"$tablet_index": 0, "$row_index": 3, **self.WIRE_ROW}])

        table = cluster.pull_consumer(CONSUMER, queue, 3, 0)

        assert table.to_pylist() == [{"$tablet_index": 0, "$row_index": 3, **self.ROW}]


class TestYtsaurusContract(ClusterContract, ProducerContract):
    """The shared cluster contract (`tests/support/cluster_contract.py`) through the real `ytsaurus-client` over HTTP:
    against the cluster at `$YT_PROXY` when it is set, else against the YTsaurus HTTP stand-in
    (`tests.support.standin`)."""

    #: YTsaurus' `advance_consumer` needs no registration (`consumer_client.cpp`), the embedded cluster's does: the
    #: YTsaurus side is `test_advance_consumer_needs_no_registration_and_refuses_only_a_negative_offset`
    #: (`test_ytsaurus_facts`).
    test_advance_needs_a_registration = None

    @pytest.fixture
    def cluster(self, request: pytest.FixtureRequest) -> Iterator[YtsaurusCluster]:
        if os.environ.get("YT_PROXY"):
            with YtsaurusCluster(os.environ["YT_PROXY"]) as cluster:
                yield cluster
            return
        standin = request.getfixturevalue("standin")
        with connect(standin.uri, token=STANDIN_TOKEN) as cluster:
            assert isinstance(cluster, YtsaurusCluster)
            cluster.registration_visible_within_seconds = SESSION_REGISTRATION_WAIT_SECONDS
            yield cluster

    @pytest.fixture
    def root(self, cluster: YtsaurusCluster) -> Iterator[str]:
        """A path that does not exist yet (the contract's tests create below it), removed afterwards."""
        root = f"//tmp/opsd-tests/{uuid.uuid4().hex}"
        yield root
        cluster.remove(root, recursive=True, force=True)


class TestUnreachableProxy:
    """A proxy that refuses or does not resolve fails in seconds, naming it (the client alone retries ~2 min)."""

    @pytest.fixture
    def closed_port(self) -> int:
        return free_port()

    @pytest.mark.timeout(30)
    def test_refused_and_unresolvable_proxies_are_named_with_where_the_uri_comes_from(self, closed_port):
        for proxy, reason in ((f"127.0.0.1:{closed_port}", "refused"), ("no-such-proxy.invalid", "")):
            with pytest.raises(UnreachableClusterError) as err:
                YtsaurusCluster(proxy, token=TOKEN).exists("//home")
            message = str(err.value)
            assert proxy in message and reason in message.lower() and "--cluster" in message
            assert TOKEN not in message

    @pytest.mark.timeout(30)
    def test_the_cli_fails_fast_naming_the_proxy_and_the_flag(self, closed_port, capsys):
        from opsd.cli import main

        assert main(["queue", "inspect", "//home/q", "--cluster", f"yt://127.0.0.1:{closed_port}"]) == 1
        err = capsys.readouterr().err
        assert err.startswith("opsd: error: YTsaurus proxy 127.0.0.1") and "--cluster" in err
        assert "Traceback" not in err and "urllib3" not in err

    def test_retries_of_errors_that_can_pass_are_bounded_and_configurable(self, monkeypatch):
        monkeypatch.setenv("OPSD_YT_RETRY_SECONDS", "7")
        assert retry_seconds() == 7.0
        monkeypatch.setenv("OPSD_YT_RETRY_SECONDS", "soon")
        with pytest.raises(ValueError, match="OPSD_YT_RETRY_SECONDS"):
            retry_seconds()
