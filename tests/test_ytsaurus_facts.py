"""The facts of a real YTsaurus (`../shared/YTSAURUS-FACTS.md`) that touch a command the backend calls, each served by
the stand-in as YTsaurus' sources say and met by the backend, through the real `ytsaurus-client`.

Every test is named after the fact it proves (the source file that states it is in its docstring).
"""

from __future__ import annotations

import io
import pickle
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest
import structlog.testing
import yt.wrapper as yt
import yt.yson as yson
from pyspark.sql.types import StructType
from yt.common import YtError

from opsd.checks.lag.collect import written_at
from opsd.cli import main
from streaming_core.cluster import Cluster, connect
from streaming_core.cluster.errors import AccessDeniedError
from streaming_core.cluster.ytsaurus.client import WIRE, default_client_factory
from streaming_core.cluster.ytsaurus.queues import QUEUE_AGENT_CONFIG
from streaming_core.datasource import YtDataSource
from streaming_core.options import SourceOptions
from streaming_core.source import check_readable
from tests.support.standin import SESSION_REGISTRATION_DELAY_SECONDS, STANDIN_TOKEN, SteppedClock
from tests.support.wait import registered_and_seen, wait_until
from ytsaurus_standin import StandinProxy
from ytsaurus_standin.commands.tables import PULL_STORE_ROWS
from ytsaurus_standin.queue_agent import AUTOMATIC_TRIMMING_ON
from ytsaurus_standin.registrations import REGISTRATION_DELAY_SECONDS, RegistrationCache, RegistrationCaches

SCHEMA_VIOLATION = 307
#: Tokens of users other than root: a team granted read and write on its consumer only, and a reader of nothing.
TEAM_TOKEN, READER_TOKEN = "team-token-5fJq", "reader-token-8kWz"
#: The team's consumer a stream reads through.
STREAM_CONSUMER = "//home/team/stream"


@pytest.fixture(scope="module")
def yson_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandinProxy]:
    """A proxy whose format manager refuses `arrow` input (as YTsaurus' may, for non-root users)."""
    with StandinProxy(tmp_path_factory.mktemp("yson-only"), input_formats=("yson", "json")) as proxy:
        yield proxy


@pytest.fixture
def yson_cluster(yson_only: StandinProxy) -> Iterator[Cluster]:
    with connect(yson_only.uri) as cluster:
        yield cluster


def stamped_queue(cluster: Cluster, path: str) -> None:
    cluster.create("table", path, recursive=True, attributes={"dynamic": True, "tablet_count": 2, "schema": [
        {"name": "data", "type": "string"}, {"name": "$timestamp", "type": "uint64"},
        {"name": "$cumulative_data_weight", "type": "int64"}]})


class TestInsertRowsIsParsedAgainstTheWriteSchema:
    """`yt/yt/client/table_client/schema.cpp` `TTableSchema::ToWrite`: an ordered table's write schema is
    `$tablet_index` and its columns without `$timestamp` and `$cumulative_data_weight`; a sorted table's, its columns
    without computed ones. YSON and JSON rows with another key: 307; `arrow` input drops such columns."""

    @pytest.mark.parametrize("key", ["$timestamp", "$cumulative_data_weight", "unknown"])
    def test_a_yson_row_with_a_key_the_write_schema_lacks_gets_307(self, yson_cluster: Cluster, key: str) -> None:
        path = f"//tmp/facts/write-schema-{key.strip('$')}"
        stamped_queue(yson_cluster, path)
        with pytest.raises(YtError) as refused:
            yson_cluster._client.insert_rows(path, [{"data": "x", key: 1}], **WIRE)

        assert refused.value.contains_code(SCHEMA_VIOLATION)
        assert "No column" in str(refused.value) and "in table schema" in str(refused.value)
        assert sum(t.total_row_count for t in yson_cluster.get_tablet_infos(path)) == 0

    def test_a_computed_column_may_not_be_written(self, yson_cluster: Cluster) -> None:
        path = "//tmp/facts/computed"
        yson_cluster.create("table", path, recursive=True, attributes={"dynamic": True, "schema": [
            {"name": "hash", "type": "uint64", "sort_order": "ascending", "expression": "farm_hash(key)"},
            {"name": "key", "type": "string", "sort_order": "ascending"}, {"name": "value", "type": "string"}]})
        with pytest.raises(YtError) as refused:
            yson_cluster._client.insert_rows(path, [{"hash": 1, "key": "k", "value": "v"}], **WIRE)
        assert refused.value.contains_code(SCHEMA_VIOLATION)

        yson_cluster.insert_rows(path, [{"key": "k", "value": "v"}])  # the backend sends no computed column

        assert [(r["key"], r["value"]) for r in yson_cluster.select_rows(path)] == [("k", "v")]

    def test_arrow_input_drops_the_columns_the_write_schema_lacks(self, standin_cluster: Cluster) -> None:
        path = "//tmp/facts/arrow-drops"
        stamped_queue(standin_cluster, path)
        rows = pa.table({"$tablet_index": [0], "data": ["x"], "unknown": [5]})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, rows.schema) as writer:
            writer.write_table(rows)

        standin_cluster._client.insert_rows(path, sink.getvalue().to_pybytes(), format=yt.format.ArrowFormat(),
                                            raw=True)

        assert [r["data"] for b in standin_cluster.read_tablet(path, 0, 0, 1) for r in b.to_pylist()] == ["x"]

    def test_the_yson_fallback_sends_no_system_column(self, yson_only: StandinProxy, yson_cluster: Cluster) -> None:
        path = "//tmp/facts/yson-fallback"
        stamped_queue(yson_cluster, path)

        yson_cluster.insert_rows(path, [{"data": f"r{i}"} for i in range(4)])

        assert [s.input_format for s in yson_only.served if s.command == "insert_rows"][-1] == "yson"
        assert sum(t.total_row_count for t in yson_cluster.get_tablet_infos(path)) == 4

    def test_opsd_queue_produce_into_a_queue_that_declares_timestamp_works_over_yson(
            self, yson_only: StandinProxy, yson_cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
        path = "//tmp/facts/produce-stamped"
        stamped_queue(yson_cluster, path)
        sys.stdin = io.StringIO('{"data": "a"}\n{"data": "b"}\n')
        try:
            code = main(["queue", "produce", path, "--cluster", yson_only.uri])
        finally:
            sys.stdin = sys.__stdin__

        assert code == 0, capsys.readouterr().err
        assert main(["queue", "produce", path, "--count", "10", "--cluster", yson_only.uri]) == 0
        assert sum(t.total_row_count for t in yson_cluster.get_tablet_infos(path)) == 12


def test_a_table_created_from_a_read_schema_is_the_same_table(standin_cluster: Cluster) -> None:
    """A schema keeps `expression`, `aggregate`, `lock`, `group` and `required` (`yt/yt/client/table_client/schema.h`):
    a table created from the schema read from another is the same table."""
    schema = [
        {"name": "hash", "type_v3": {"type_name": "optional", "item": "uint64"}, "sort_order": "ascending",
         "expression": "farm_hash(key)"},
        {"name": "key", "type_v3": "string", "sort_order": "ascending"},
        {"name": "total", "type_v3": {"type_name": "optional", "item": "int64"}, "aggregate": "sum", "lock": "l1",
         "group": "g1"},
        {"name": "note", "type_v3": "utf8", "group": "g2"},
    ]
    standin_cluster.create("table", "//tmp/facts/schema-a", recursive=True,
                           attributes={"dynamic": True, "schema": schema})
    read = standin_cluster.get("//tmp/facts/schema-a/@schema")
    standin_cluster.create("table", "//tmp/facts/schema-b", attributes={"dynamic": True, "schema": read})

    assert standin_cluster.get("//tmp/facts/schema-b/@schema") == read == schema


class TestReadRows:
    def test_uuid_comes_back_as_16_raw_bytes_and_is_decoded_to_its_text(self, standin_cluster: Cluster) -> None:
        """`select_rows`, `lookup_rows` and `pull_*` write rows with the schemaful writer, which ignores `uuid_mode`
        (`yt/yt/client/formats/schemaful_writer.cpp`): 16 bytes, laid out as `uuid_text.cpp` reads the YQL text."""
        text = "01234567-89ab-cdef-0123-456789abcdef"
        path = "//tmp/facts/uuid"
        standin_cluster.create("table", path, recursive=True, attributes={"dynamic": True, "schema": [
            {"name": "id", "type_v3": "uuid", "sort_order": "ascending"}, {"name": "v", "type_v3": "int64"}]})
        standin_cluster.insert_rows(path, [{"id": text, "v": 1}])

        raw = list(standin_cluster._client.select_rows(f"* FROM [{path}]", **WIRE))
        assert yson.get_bytes(raw[0]["id"]) == uuid.UUID(text).bytes_le
        assert standin_cluster.select_rows(path) == [{"id": text, "v": 1}]
        assert standin_cluster.lookup_rows(path, [{"id": text}]) == [{"id": text, "v": 1}]

    def test_uuid_in_a_queue_is_pulled_as_its_text(self, standin_cluster: Cluster) -> None:
        path, consumer = "//tmp/facts/uuid-queue", "//tmp/facts/uuid-consumer"
        standin_cluster.create("table", path, recursive=True, attributes={"dynamic": True, "schema": [
            {"name": "id", "type_v3": "uuid"}]})
        standin_cluster.create_consumer(consumer)
        standin_cluster.register_queue_consumer(path, consumer)
        ids = [str(uuid.uuid4()) for _ in range(3)]
        standin_cluster.insert_rows(path, [{"id": i} for i in ids])

        pulled = standin_cluster.pull_consumer(consumer, path, 0, 0)
        assert pulled.column("id").to_pylist() == ids

    def test_timestamp_is_a_hybrid_commit_timestamp_and_lag_reads_it_as_unix_seconds(
            self, standin_cluster: Cluster) -> None:
        """`$timestamp` is unix seconds << 30 | a counter (`ordered_dynamic_store.cpp`), not microseconds."""
        path = "//tmp/facts/hybrid"
        stamped_queue(standin_cluster, path)
        before = time.time()
        standin_cluster.insert_rows(path, [{"data": "x"}], tablet_index=0)

        [stamp] = [r["$timestamp"] for b in standin_cluster.read_tablet(path, 0, 0, 1) for r in b.to_pylist()]
        assert int(before) <= stamp >> 30 <= time.time() and stamp & ((1 << 30) - 1) < 1 << 30
        assert written_at(standin_cluster, path, 0, 0, 1) == pytest.approx(before, abs=1.5)


def refused_calls(proxy: StandinProxy, command: str) -> list:
    """The calls of `command` the stand-in refused so far."""
    return [s for s in proxy.served if s.command == command and s.status != 200]


class TestRegistrationsAreCachedPerProxy:
    """A proxy answers `pull_consumer` and `list_queue_consumer_registrations` from a registration cache refreshed
    every 10 s (`yt/yt/ytlib/queue_client/config.cpp` `cache_refresh_period`, `registration_manager.cpp`)."""

    def test_the_cache_hides_a_fresh_registration_for_its_delay_and_forgets_an_unregistered_one(self) -> None:
        stored: set[tuple[str, str]] = {("//q/old", "//c")}
        now = [100.0]
        cache = RegistrationCache(lambda: set(stored), clock=lambda: now[0])
        assert cache.delay_seconds == REGISTRATION_DELAY_SECONDS == 10.0
        assert cache.visible("//q/old", "//c")  # registered before the proxy started

        stored.add(("//q", "//c"))
        cache.observe()
        now[0] += 9.9
        assert not cache.visible("//q", "//c")
        now[0] += 0.1
        assert cache.visible("//q", "//c")
        stored.discard(("//q", "//c"))
        assert not cache.visible("//q", "//c")

    def test_pull_consumer_answers_901_for_the_default_10_s_and_the_backend_waits_it_out(
            self, tmp_path) -> None:
        """The stand-in's 10 s pass on its own clock, moved on once the backend was refused and waits."""
        clock = SteppedClock()
        with StandinProxy(tmp_path, clock=clock) as proxy, connect(proxy.uri) as cluster:
            queue, consumer = "//tmp/q", "//tmp/c"
            cluster.create("table", queue, recursive=True, attributes={"dynamic": True, "schema": [
                {"name": "data", "type": "string"}]})
            cluster.create_consumer(consumer)
            cluster.insert_rows(queue, [{"data": "x"}])
            cluster.register_queue_consumer(queue, consumer)
            registered = clock()

            with pytest.raises(YtError) as refused:
                cluster._client.pull_consumer(consumer, queue, 0, 0, **WIRE)
            assert refused.value.contains_code(901) and "not registered" in str(refused.value)
            assert cluster.list_queue_consumer_registrations(queue_path=queue) == []
            assert clock() - registered < REGISTRATION_DELAY_SECONDS

            refusals = len(refused_calls(proxy, "pull_consumer"))
            ten_seconds_later = threading.Thread(target=lambda: (
                wait_until(lambda: len(refused_calls(proxy, "pull_consumer")) > refusals, 30, "the backend's retry"),
                clock.advance(REGISTRATION_DELAY_SECONDS)))
            ten_seconds_later.start()
            with structlog.testing.capture_logs() as logs:
                pulled = cluster.pull_consumer(consumer, queue, 0, 0)
            ten_seconds_later.join()

            assert pulled.column("data").to_pylist() == ["x"]
            assert clock() - registered >= REGISTRATION_DELAY_SECONDS
            assert [e["event"] for e in logs] == ["yt_registration_not_visible_yet"]

    def test_each_proxy_refreshes_its_registration_cache_on_its_own_schedule(self) -> None:
        stored: set[tuple[str, str]] = set()
        now = [0.0]
        caches = RegistrationCaches(lambda: set(stored), delay_seconds=10.0, clock=lambda: now[0])
        caches.add_proxies(["p0", "p1", "p2"])
        assert caches.delays() == {None: 10.0, "p0": 10.0, "p1": pytest.approx(10 * 5 / 6),
                                   "p2": pytest.approx(10 * 4 / 6)}

        stored.add(("//q", "//c"))
        caches.observe()
        now[0] = 7.0
        assert [caches.of(p).visible("//q", "//c") for p in ("p0", "p1", "p2", None)] == [False, False, True, False]
        now[0] = 10.0
        assert all(caches.of(p).visible("//q", "//c") for p in ("p0", "p1", "p2", None))

    def test_through_the_wire_one_proxy_sees_a_registration_another_does_not_see_yet(self, tmp_path) -> None:
        delay = 2.0
        with StandinProxy(tmp_path, registration_delay_seconds=delay) as proxy, connect(proxy.uri) as cluster:
            queue, consumer = "//tmp/q", "//tmp/c"
            cluster.create("table", queue, recursive=True, attributes={"dynamic": True, "schema": [
                {"name": "data", "type": "string"}]})
            cluster.create_consumer(consumer)
            slowest, quickest = (connect(proxy.uri_of(a)) for a in (proxy.proxies[0], proxy.proxies[-1]))
            cluster.register_queue_consumer(queue, consumer)
            registered = time.monotonic()

            wait_until(lambda: quickest.list_queue_consumer_registrations(queue_path=queue), 2 * delay,
                       "the quickest proxy to see the registration")
            assert slowest.list_queue_consumer_registrations(queue_path=queue) == []
            wait_until(lambda: slowest.list_queue_consumer_registrations(queue_path=queue), 2 * delay,
                       "the slowest proxy to see the registration")
            assert time.monotonic() - registered >= delay

    def test_the_source_waits_out_a_fresh_registration_with_a_message(self, tmp_path) -> None:
        with StandinProxy(tmp_path, registration_delay_seconds=1.0) as proxy, connect(proxy.uri) as cluster:
            queue, consumer = "//tmp/q", "//tmp/c"
            cluster.create("table", queue, recursive=True, attributes={"dynamic": True, "schema": [
                {"name": "data", "type": "string"}]})
            cluster.create_consumer(consumer)
            cluster.register_queue_consumer(queue, consumer)
            options = SourceOptions.parse({"path": queue, "consumer_path": consumer, "cluster": proxy.uri}, {},
                                          streaming=True)

            with structlog.testing.capture_logs() as logs:
                check_readable(cluster, options, streaming=True)

            [waited] = [e for e in logs if e["event"] == "waiting_for_consumer_registration"]
            assert waited["consumer"] == consumer and "registration cache" in waited["reason"]


class TestReshardToFewerTablets:
    """`yt/yt/server/master/tablet_server/tablet_manager.cpp` `ReshardTableImpl`: an ordered table resharded to fewer
    tablets appends the removed tablets' chunks to the last tablet that stays; `tablet.cpp` `ValidateReshardRemove`
    refuses a removed tablet whose trimmed rows' chunks are still attached ("Some chunks of tablet ... are not fully
    trimmed"), which they are for a moment after a trim."""

    @pytest.fixture
    def queue(self, standin_cluster: Cluster) -> str:
        path = f"//tmp/reshard{uuid.uuid4().hex[:12]}"
        standin_cluster.create("table", path, recursive=True, attributes={"dynamic": True, "tablet_count": 3,
                                                                          "schema": [{"name": "n", "type": "int64"}]})
        for tablet, rows in enumerate((2, 3, 4)):
            standin_cluster.insert_rows(path, [{"n": tablet * 10 + i} for i in range(rows)], tablet_index=tablet)
        return path

    def test_reshard_to_fewer_tablets_appends_the_removed_rows_to_the_last_and_refuses_attached_trimmed_chunks(
            self, standin: StandinProxy, standin_cluster: Cluster, queue: str) -> None:
        client = yt.YtClient(proxy=standin.address, token=STANDIN_TOKEN)
        client.trim_rows(queue, 2, 1)

        def resharded() -> bool:
            client.unmount_table(queue, sync=True)
            try:
                client.reshard_table(queue, tablet_count=2, sync=True)
                return True
            except YtError as err:
                assert "Some chunks of tablet" in str(err) and "are not fully trimmed" in str(err), err
                refusals.append(err)
                return False
            finally:
                client.mount_table(queue, sync=True)

        refusals: list[YtError] = []
        wait_until(resharded, 30, "the trimmed chunks to be detached")

        assert refusals, "a reshard right after the trim is refused"
        assert [(t.total_row_count, t.trimmed_row_count) for t in standin_cluster.get_tablet_infos(queue)] == [
            (2, 0), (6, 0)]
        last = [n for batch in standin_cluster.read_tablet(queue, 1, 0, 6) for n in batch.column("n").to_pylist()]
        assert last == [10, 11, 12, 21, 22, 23]

    def test_the_backend_trims_then_reshards_at_once_waiting_out_the_attached_chunks(
            self, standin_cluster: Cluster, queue: str) -> None:
        standin_cluster.trim_rows(queue, 2, 4)

        with structlog.testing.capture_logs() as logs:
            standin_cluster.reshard(queue, 2)

        assert [e["event"] for e in logs if e["event"].startswith("yt_reshard")] == [
            "yt_reshard_waiting_for_trimmed_chunks"]
        assert [t.total_row_count for t in standin_cluster.get_tablet_infos(queue)] == [2, 3]


def test_the_queue_agent_trims_only_where_enable_automatic_trimming_is_on(tmp_path) -> None:
    """`enable_automatic_trimming` of the Queue Agent's dynamic config (`//sys/queue_agents/config`), default false
    (`yt/yt/server/queue_agent/config.cpp`): a queue's `@auto_trim_config` alone trims nothing."""
    with StandinProxy(tmp_path, auto_trim_seconds=0.1, registration_delay_seconds=0.5) as proxy, \
            connect(proxy.uri) as cluster:
        queue, vital = "//tmp/q", "//tmp/vital"
        cluster.create("table", queue, recursive=True, attributes={"dynamic": True, "schema": [
            {"name": "data", "type": "string"}]})
        cluster.create_consumer(vital)
        cluster.register_queue_consumer(queue, vital, vital=True)
        cluster.insert_rows(queue, [{"data": str(i)} for i in range(10)])
        cluster.advance_consumer(vital, queue, 0, None, 6)
        cluster.set(f"{queue}/@auto_trim_config", {"enable": True})

        time.sleep(1.0)  # ten passes of the agent
        assert cluster.automatic_trimming() is False
        assert cluster.get_tablet_infos(queue)[0].trimmed_row_count == 0

        cluster.set(QUEUE_AGENT_CONFIG, AUTOMATIC_TRIMMING_ON)
        assert cluster.automatic_trimming() is True
        wait_until(lambda: cluster.get_tablet_infos(queue)[0].trimmed_row_count == 6, 30, "the agent to trim")


def test_pull_consumer_answers_short_from_one_store_and_refuses_non_positive_bounds(standin_cluster: Cluster) -> None:
    """`pull_consumer` reads one ordered store at most and stops at `max_row_count` / `max_data_weight` (defaults
    1000 rows, 16 MiB; a non-positive one is an error, `queue_rowset.cpp`); below the trim it starts at the first
    untrimmed row. The backend's bounded reads go on after a short answer."""
    queue, consumer = "//tmp/facts/short/q", "//tmp/facts/short/c"
    standin_cluster.create("table", queue, recursive=True, attributes={"dynamic": True, "schema": [
        {"name": "n", "type": "int64"}]})
    standin_cluster.create_consumer(consumer)
    registered_and_seen(standin_cluster, queue, consumer)
    standin_cluster.insert_rows(queue, pa.table({"n": list(range(PULL_STORE_ROWS + 50))}))

    short = standin_cluster.pull_consumer(consumer, queue, PULL_STORE_ROWS - 10, 0, max_row_count=100)
    assert short.column("$row_index").to_pylist() == list(range(PULL_STORE_ROWS - 10, PULL_STORE_ROWS))
    read = [r["n"] for b in standin_cluster.read_tablet(queue, 0, PULL_STORE_ROWS - 10, PULL_STORE_ROWS + 50,
                                                        consumer_path=consumer) for r in b.to_pylist()]
    assert read == list(range(PULL_STORE_ROWS - 10, PULL_STORE_ROWS + 50))
    assert standin_cluster.pull_consumer(consumer, queue, 0, 0).num_rows == 1000  # the default bound
    for bound in ({"max_row_count": 0}, {"max_data_weight": -1}):
        with pytest.raises(YtError, match="must be positive"):
            standin_cluster._client.pull_consumer(consumer, queue, 0, 0, **bound, **WIRE)
    standin_cluster.trim_rows(queue, 0, 5)
    assert standin_cluster.pull_consumer(consumer, queue, 2, 0, max_row_count=3).column("n").to_pylist() == [5, 6, 7]


def test_unmounted_tablets_refuse_rows_with_1702_and_tablet_infos_with_a_generic_error_the_backend_waits_out(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`select_rows` / `lookup_rows` of an unmounted table: 1702; `get_tablet_infos` asks the tablets' cells, a generic
    error (`client_dynamic_tables_impl.cpp`); unmounting is asynchronous, and a remount leaves the mount caches stale
    for a moment (1701). The backend's tablet counters wait for the mount whichever error comes. (The stand-in's
    tablet states change only when the test moves its clock on: each state is seen for sure.)"""
    clock, change = SteppedClock(), 60.0
    with StandinProxy(tmp_path, token=STANDIN_TOKEN, tablet_state_seconds=change, clock=clock) as standin, \
            connect(standin.uri, token=STANDIN_TOKEN) as standin_cluster:
        path = "//tmp/facts/unmounted"
        stamped_queue(standin_cluster, path)
        standin_cluster.insert_rows(path, [{"data": "x"}], tablet_index=0)
        monkeypatch.setenv("OPSD_YT_RETRY_SECONDS", "1")
        client = default_client_factory(standin.address, STANDIN_TOKEN, None)

        client.unmount_table(path)
        assert client.get(f"{path}/@tablet_state") == "unmounting"
        with pytest.raises(YtError, match=r"not all of its tablets are in .unmounted. state"):
            client.reshard_table(path, tablet_count=3)
        clock.advance(change)
        assert client.get(f"{path}/@tablet_state") == "unmounted"
        with pytest.raises(YtError) as select:
            client.select_rows(f"* FROM [{path}]")
        with pytest.raises(YtError) as infos:
            client.get_tablet_infos(path, [0])
        assert select.value.contains_code(1702)
        assert not infos.value.contains_code(1702) and not infos.value.contains_code(1701)

        monkeypatch.setenv("OPSD_YT_RETRY_SECONDS", "30")
        refused = len(refused_calls(standin, "get_tablet_infos"))
        mount = threading.Thread(target=lambda: (
            wait_until(lambda: len(refused_calls(standin, "get_tablet_infos")) > refused, 30, "the backend's wait"),
            client.mount_table(path), clock.advance(2 * change)))
        mount.start()
        counters = standin_cluster.get_tablet_infos(path)
        mount.join()
        assert [t.total_row_count for t in counters] == [1, 0]
        assert {s.status for s in standin.served if s.command == "get_tablet_infos"} >= {200, 400}



def test_advance_consumer_needs_no_registration_and_refuses_only_a_negative_offset(standin: StandinProxy,
                                                                                    standin_cluster: Cluster) -> None:
    """`yt/yt/client/queue_client/consumer_client.cpp`: the client-side advance writes the consumer's row with no
    registration and no check of the partition index against the queue; only a negative offset is refused."""
    root = f"//tmp/advance{uuid.uuid4().hex[:12]}"
    standin_cluster.create("table", f"{root}/queue", recursive=True, attributes={"dynamic": True, "schema": [
        {"name": "data", "type": "string"}]})
    standin_cluster.create_consumer(f"{root}/consumer")
    client = yt.YtClient(proxy=standin.address, token=STANDIN_TOKEN)

    client.advance_consumer(f"{root}/consumer", f"{root}/queue", 5, None, 3, client_side=True)
    with pytest.raises(YtError, match="cannot be negative"):
        client.advance_consumer(f"{root}/consumer", f"{root}/queue", 0, None, -1, client_side=True)

    assert standin_cluster.list_queue_consumer_registrations(queue_path=f"{root}/queue") == []
    assert standin_cluster.get_consumer_offsets(f"{root}/consumer", f"{root}/queue") == {5: 3}


@pytest.fixture(scope="module")
def granted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StandinProxy, str, str]]:
    """A stand-in whose queue is the owners' (no inherited read), with the team's consumers on it."""
    with StandinProxy(tmp_path_factory.mktemp("acl"), token=STANDIN_TOKEN,
                      users={TEAM_TOKEN: "team", READER_TOKEN: "reader"},
                      registration_delay_seconds=SESSION_REGISTRATION_DELAY_SECONDS) as proxy, \
            connect(proxy.uri, token=STANDIN_TOKEN) as root:
        queue, consumer = "//home/owners/queue", "//home/team/consumer"
        root.create("table", queue, recursive=True, attributes={"dynamic": True, "schema": [
            {"name": "data", "type": "string"}]})
        root.set("//home/owners/@inherit_acl", False)
        root.set("//home/owners/@acl", [{"action": "allow", "subjects": ["owners"], "permissions": ["read"]}])
        root.create_consumer(consumer, recursive=True)
        root.set(f"{consumer}/@acl", [
            {"action": "allow", "subjects": ["team"], "permissions": ["read", "write"]}])
        root.insert_rows(queue, [{"data": f"row-{i}"} for i in range(5)])
        registered_and_seen(root, queue, consumer)
        root.set("//home/team/@acl", [{"action": "allow", "subjects": ["team"], "permissions": ["write"]}])
        root.create_consumer(STREAM_CONSUMER)
        root.set(f"{STREAM_CONSUMER}/@acl", [
            {"action": "allow", "subjects": ["team"], "permissions": ["read", "write"]}])
        registered_and_seen(root, queue, STREAM_CONSUMER)
        yield proxy, queue, consumer


class TestPermissionsByConsumerAndByQueue:
    """`yt/yt/ytlib/api/native/client_impl.cpp`: `DoPullConsumer` checks read on the consumer and its registration,
    then pulls the queue unauthenticated; `DoRegisterQueueConsumer` checks `register_queue_consumer` on the queue;
    reading the queue itself (`get @schema`, `select_rows`) needs read on the queue. A team granted the queue through
    its consumer only pulls and advances it, and reads nothing else of the queue."""

    def test_pull_consumer_needs_read_on_the_consumer_and_no_right_on_the_queue(self, granted) -> None:
        proxy, queue, consumer = granted
        team = yt.YtClient(proxy=proxy.address, token=TEAM_TOKEN)

        pulled = list(team.pull_consumer(consumer, queue, 0, 0, **WIRE))
        team.advance_consumer(consumer, queue, 0, None, 2, client_side=True)

        assert [r["data"] for r in pulled] == [f"row-{i}" for i in range(5)]
        assert [t["total_row_count"] for t in team.get_tablet_infos(queue, [0])["tablets"]] == [5]
        assert yt.http_helpers.get_user_name(client=team) == "team"

    @pytest.mark.parametrize("denied", ["get_schema", "select_rows", "register", "trim", "advance_by_a_reader"])
    def test_without_a_right_the_call_is_refused_with_901_naming_the_permission_and_the_node(
            self, granted, denied: str) -> None:
        proxy, queue, consumer = granted
        team, reader = (yt.YtClient(proxy=proxy.address, token=t) for t in (TEAM_TOKEN, READER_TOKEN))
        call, permission, node = {
            "get_schema": (lambda: team.get(f"{queue}/@schema"), "read", "//home/owners/queue"),
            "select_rows": (lambda: list(team.select_rows(f"* FROM [{queue}]", **WIRE)), "read", queue),
            "register": (lambda: team.register_queue_consumer(queue, consumer, vital=False),
                         "register_queue_consumer", queue),
            "trim": (lambda: team.trim_rows(queue, 0, 1), "write", queue),
            "advance_by_a_reader": (lambda: reader.advance_consumer(consumer, queue, 0, None, 1, client_side=True),
                                    "write", consumer),
        }[denied]

        with pytest.raises(YtError) as refused:
            call()

        assert refused.value.contains_code(901), refused.value
        assert f'"{permission}" permission for node {node}' in str(refused.value)

    def test_a_stream_reads_through_its_consumer_only_with_the_columns_it_names(self, granted, monkeypatch) -> None:
        """The source asks nothing of the queue that needs read on it: its tablet counters (no permission), the pull
        and the consumer's offsets (read on the consumer), the advance (write on the consumer); the columns come from
        the query, since the queue's `@schema` is not the team's to read."""
        proxy, queue, _ = granted
        monkeypatch.setenv("YT_TOKEN", TEAM_TOKEN)
        source = YtDataSource({"path": queue, "consumer_path": STREAM_CONSUMER, "cluster": proxy.uri,
                               "max_bytes_per_partition": "1000"})
        with pytest.raises(AccessDeniedError, match=r'"read" permission for node //home/owners/queue.*\.schema\('):
            source.schema()

        with structlog.testing.capture_logs() as logs:
            reader = source.streamReader(StructType().add("data", "string"))
        start = reader.initialOffset()
        with structlog.testing.capture_logs() as planned:
            end = reader.latestOffset(start, reader.getDefaultReadLimit())
        read = [d for part in reader.partitions(start, end) for batch in pickle.loads(pickle.dumps(reader)).read(part)
                for d in batch.column("data").to_pylist()]
        reader.commit(end)

        assert read == [f"row-{i}" for i in range(5)]
        assert "queue_read_through_consumer_only" in {e["event"] for e in logs}
        assert "byte_cap_needs_read_on_the_queue" in {e["event"] for e in planned}
        with connect(proxy.uri, token=STANDIN_TOKEN) as root:
            assert root.get_consumer_offsets(STREAM_CONSUMER, queue) == {0: 5}
