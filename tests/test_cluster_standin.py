"""The YTsaurus backend over the wire, against the HTTP stand-in: what crosses HTTP(S) and how failures come back.

The cluster contract itself runs through the stand-in in `test_cluster_ytsaurus.py`; here: authentication as
YTsaurus refuses it, retriable errors retried, errors in a streamed body's trailer, HTTPS with a CA bundle, the
client's own configuration sources, and the token never sent where it must not go.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from urllib.parse import quote

import pytest
import structlog

from streaming_core.cluster import ClusterError, InvalidUriError, UnreachableClusterError, connect, resolve_uri
from streaming_core.cluster.ytsaurus import client as yt_client
from tests.support.standin import STANDIN_TOKEN, tls_proxy
from ytsaurus_standin import Fault, StandinProxy

SCHEMA = [{"name": "n", "type": "int64"}, {"name": "data", "type": "string"}]


def queue_with_rows(cluster, path: str, rows: int = 0) -> None:
    cluster.create("table", path, recursive=True, attributes={"dynamic": True, "tablet_count": 1, "schema": SCHEMA})
    if rows:
        cluster.insert_rows(path, [{"n": i, "data": f"row-{i}"} for i in range(rows)], tablet_index=0)


class CaptureServer:
    """A plain TCP listener that keeps every byte sent to it (to prove what did, or did not, cross it)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.received = bytearray()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while self.sock.fileno() != -1:
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                conn.settimeout(1)
                try:
                    while data := conn.recv(65536):
                        self.received.extend(data)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


class TestAuthentication:
    def test_a_missing_or_wrong_token_is_refused_as_ytsaurus_refuses_it(self, standin: StandinProxy) -> None:
        for token in ("wrong-token-123456", None):
            with connect(standin.uri, token=token) as cluster, pytest.raises(ClusterError) as err:
                cluster.exists("//tmp")
            assert "authenticate" in str(err.value)
            assert str(token) not in str(err.value) and STANDIN_TOKEN not in str(err.value)
        assert [s.status for s in standin.served if s.command == "exists"][-2:] == [401, 401]

    def test_the_token_travels_as_an_oauth_header(self, standin: StandinProxy, standin_cluster) -> None:
        standin_cluster.exists("//tmp")
        assert standin.served[-1].authorization == f"OAuth {STANDIN_TOKEN}"

    def test_the_token_file_of_the_client_is_used(self, standin: StandinProxy, tmp_path: Path, monkeypatch) -> None:
        (tmp_path / "token").write_text(STANDIN_TOKEN + "\n")
        monkeypatch.delenv("YT_TOKEN", raising=False)
        monkeypatch.setenv("YT_TOKEN_PATH", str(tmp_path / "token"))
        with connect(standin.uri) as cluster:
            assert cluster.exists("//sys") in (True, False)
        assert standin.served[-1].status == 200


class TestErrors:
    def test_a_busy_proxy_is_retried_until_it_answers(self, standin: StandinProxy, standin_cluster) -> None:
        root = "//tmp/busy"
        queue_with_rows(standin_cluster, root, rows=3)
        standin.faults.append(Fault("get_tablet_infos", status=503, times=1))

        assert standin_cluster.get_tablet_infos(root)[0].total_row_count == 3
        assert [s.status for s in standin.served if s.command == "get_tablet_infos"][-2:] == [503, 200]

    def test_an_error_after_the_body_started_comes_in_the_trailer(self, standin: StandinProxy,
                                                                  standin_cluster) -> None:
        root = "//tmp/trailer"
        queue_with_rows(standin_cluster, root, rows=5)
        standin.faults.append(Fault("select_rows", status=200, code=1, after_rows=0))

        with pytest.raises(ClusterError, match="after the body started"):
            list(standin_cluster.read_tablet(root, 0, 0, 5))

    def test_error_objects_carry_ytsaurus_codes_the_client_branches_on(self, standin_cluster) -> None:
        from streaming_core.cluster import AlreadyExistsError, NoSuchPathError

        with pytest.raises(NoSuchPathError, match="//tmp/nothing/here"):
            standin_cluster.get("//tmp/nothing/here/@type")
        standin_cluster.create("map_node", "//tmp/twice", recursive=True)
        with pytest.raises(AlreadyExistsError, match="//tmp/twice"):
            standin_cluster.create("map_node", "//tmp/twice")


class TestMounting:
    """Mount state as YTsaurus keeps it: `reshard_table` needs the table unmounted, and an unmounted table's rows are
    neither written nor read (the cluster contract reshards through unmount, reshard, mount)."""

    def test_reshard_needs_an_unmounted_table_whose_rows_wait_for_the_mount(self, standin: StandinProxy,
                                                                            standin_cluster, monkeypatch) -> None:
        from yt.common import YtError

        root = "//tmp/mounting"
        queue_with_rows(standin_cluster, root, rows=2)
        monkeypatch.setenv("OPSD_YT_RETRY_SECONDS", "1")
        client = yt_client.default_client_factory(standin.address, STANDIN_TOKEN, None)

        with pytest.raises(YtError, match=r"not all of its tablets are in .unmounted. state"):
            client.reshard_table(root, tablet_count=3)
        client.unmount_table(root, sync=True)
        assert client.get(root + "/@tablet_state") == "unmounted"
        with pytest.raises(YtError) as refused:
            client.insert_rows(root, [{"n": 9, "data": "late"}])
        client.reshard_table(root, tablet_count=3, sync=True)
        client.mount_table(root, sync=True)

        assert refused.value.contains_code(1702)
        assert [(t.total_row_count, t.trimmed_row_count) for t in standin_cluster.get_tablet_infos(root)] == [
            (2, 0), (0, 0), (0, 0)]
        assert client.get(root + "/@tablet_state") == "mounted"


    def test_tablet_counters_asked_for_during_a_reshard_wait_for_the_mount(self, standin: StandinProxy,
                                                                           standin_cluster) -> None:
        root = "//tmp/remounting"
        queue_with_rows(standin_cluster, root, rows=2)
        client = yt_client.default_client_factory(standin.address, STANDIN_TOKEN, None)
        client.unmount_table(root, sync=True)
        client.reshard_table(root, tablet_count=2, sync=True)
        mount = threading.Timer(0.5, lambda: yt_client.default_client_factory(
            standin.address, STANDIN_TOKEN, None).mount_table(root, sync=True))
        mount.start()

        infos = standin_cluster.get_tablet_infos(root)
        mount.join()

        assert [(t.tablet_index, t.total_row_count) for t in infos] == [(0, 2), (1, 0)]
        statuses = [s.status for s in standin.served if s.command == "get_tablet_infos"]
        assert statuses[-1] == 200 and any(status != 200 for status in statuses)


class TestHttps:
    def test_https_with_a_ca_bundle_carries_the_token_over_tls_only(self, tmp_path: Path, monkeypatch) -> None:
        monkeypatch.setenv("OPSD_YT_RETRY_SECONDS", "1")
        capture = CaptureServer()
        try:
            with tls_proxy(tmp_path / "tls", token=STANDIN_TOKEN) as (proxy, ca):
                uri = proxy.uri
                assert uri == f"yt+https://{proxy.address}?ca_bundle={quote(ca, safe='')}"
                with connect(uri, token=STANDIN_TOKEN) as cluster:
                    queue_with_rows(cluster, "//tmp/tls", rows=2)
                    assert cluster.get_tablet_infos("//tmp/tls")[0].total_row_count == 2
                    assert cluster.uri == resolve_uri(uri)
                assert proxy.served and all(s.tls for s in proxy.served)
                # A heavy proxy that speaks plain HTTP: asked for HTTPS, the client speaks TLS to it too (and fails),
                # so the token never crosses it in clear.
                proxy.state.heavy_proxies[:] = [f"127.0.0.1:{capture.port}"]
                with connect(uri, token=STANDIN_TOKEN) as cluster, pytest.raises(UnreachableClusterError) as err:
                    queue_with_rows(cluster, "//tmp/tls2", rows=2)
                assert "//tmp/tls2" in str(err.value) and STANDIN_TOKEN not in str(err.value)
        finally:
            capture.close()
        assert capture.received and STANDIN_TOKEN.encode() not in capture.received
        assert b"Authorization" not in capture.received

    def test_the_clients_own_config_can_ask_for_https(self, tmp_path: Path, monkeypatch) -> None:
        with tls_proxy(tmp_path / "tls", token=STANDIN_TOKEN) as (proxy, ca):
            monkeypatch.setenv("YT_CONFIG_PATCHES", f'{{proxy={{prefer_https=%true;ca_bundle_path="{ca}"}}}}')
            with connect(f"yt://{proxy.address}", token=STANDIN_TOKEN) as cluster:
                assert cluster.exists("//tmp") in (True, False)
            assert proxy.served[-1].tls and proxy.served[-1].status == 200

    def test_plain_http_with_a_token_to_another_host_is_warned_about_once(self) -> None:
        yt_client._warned_plain_http.clear()
        with structlog.testing.capture_logs() as logs:
            yt_client.warn_plain_http("http://yt.example.com:80", "t0ken-value")
            yt_client.warn_plain_http("http://yt.example.com:80", "t0ken-value")
            yt_client.warn_plain_http("http://127.0.0.1:8000", "t0ken-value")
            yt_client.warn_plain_http("https://yt.example.com", "t0ken-value")
            yt_client.warn_plain_http("http://yt.example.com:81", None)
        assert [e["event"] for e in logs] == ["yt_token_over_plain_http"]
        assert "yt+https://yt.example.com:80" in logs[0]["fix"] and "t0ken-value" not in str(logs)


class TestUris:
    @pytest.mark.parametrize(("uri", "proxy"), [
        ("yt://127.0.0.1:80", "127.0.0.1:80"), ("yt+https://h:443", "https://h:443"), ("yt+http://h", "http://h"),
    ])
    def test_on_loopback_the_scheme_is_the_clients_unless_the_uri_forces_one(self, uri: str, proxy: str) -> None:
        cluster = connect(uri)
        assert (cluster.proxy, cluster.uri) == (proxy, uri)

    @pytest.mark.parametrize("uri", ["yt://h/path", "yt://h?token=x", "yt+ftp://h", "yt://https://h:443"])
    def test_malformed_or_unknown_parts_are_refused_by_name(self, uri: str) -> None:
        with pytest.raises(InvalidUriError, match="cluster URI"):
            resolve_uri(uri)


class TestCheckpointFiles:
    def test_a_yt_checkpoint_is_listed_read_and_removed_over_http(self, standin: StandinProxy,
                                                                  monkeypatch) -> None:
        from streaming_core.checkpoint import CypressFiles, checkpoint_files

        monkeypatch.setenv("YT_TOKEN", STANDIN_TOKEN)
        offsets = standin.root / "home/cp-test/offsets"
        offsets.mkdir(parents=True)
        (offsets / "0").write_text('v1\n{"batchTimestampMs":1}\n-')
        files = checkpoint_files("yt:///home/cp-test", standin.uri)

        assert isinstance(files, CypressFiles)
        assert files.list("offsets") == ["0"] and files.list("commits") == []
        assert files.read("offsets/0", 1024).startswith(b"v1\n")
        with pytest.raises(FileNotFoundError, match="//home/cp-test/offsets/7"):
            files.read("offsets/7", 1024)
        files.remove("offsets/0")
        assert files.list("offsets") == [] and not (offsets / "0").exists()


#: The HTTP commands a `yt.wrapper` call sends beyond the one of its own name (a transaction starts, pings, commits,
#: aborts; a read locks the node it reads in a transaction of its own; a sync mount polls `get`).
COMMANDS_OF_CALL = {
    "Transaction": {"start_transaction", "ping_transaction", "commit_transaction", "abort_transaction"},
    "read_table": {"read_table", "start_transaction", "lock", "get", "abort_transaction"},
    "read_file": {"read_file", "start_transaction", "lock", "get", "abort_transaction"},
    "write_table": {"write_table", "start_transaction", "commit_transaction"},
    "mount_table": {"mount_table", "get"},
}


def test_every_client_call_of_the_backend_is_a_command_the_standin_serves() -> None:
    """The backend's `yt.wrapper` calls, read from its source, each map to commands the stand-in answers (and so
    to the contract suite, which runs every backend method through it)."""
    import re

    sources = [*Path("streaming_core/cluster/ytsaurus").glob("*.py"), Path("streaming_core/checkpoint.py")]
    calls = {name for path in sources for name in re.findall(r"\b_?client\.([A-Za-z_]+)\(", path.read_text())}
    served = _served_commands()
    missing = {call: COMMANDS_OF_CALL.get(call, {call}) - served for call in calls}
    assert {call: cmds for call, cmds in missing.items() if cmds} == {}
    assert len(calls) >= 20, sorted(calls)


def _served_commands() -> set[str]:
    from ytsaurus_standin.commands import Commands

    return {descriptor["name"] for descriptor in Commands("/nonexistent-standin-root", "local").descriptors()}


class TestWireFormats:
    def test_inserts_go_as_arrow_where_the_proxy_takes_it(self, standin: StandinProxy, standin_cluster) -> None:
        queue_with_rows(standin_cluster, "//tmp/arrow-in")
        standin_cluster.insert_rows("//tmp/arrow-in", [{"n": i, "data": f"r{i}"} for i in range(3)], tablet_index=0)

        assert [s.input_format for s in standin.served if s.command == "insert_rows"][-1] == "arrow"
        rows = [r for b in standin_cluster.read_tablet("//tmp/arrow-in", 0, 0, 3) for r in b.to_pylist()]
        assert rows == [{"n": i, "data": f"r{i}"} for i in range(3)]

    def test_a_proxy_that_refuses_arrow_gets_yson_from_then_on(self, tmp_path: Path) -> None:
        with StandinProxy(tmp_path, input_formats=("yson",)) as proxy, connect(proxy.uri) as cluster:
            queue_with_rows(cluster, "//tmp/yson-in")
            for first in (0, 3):
                cluster.insert_rows("//tmp/yson-in", [{"n": i, "data": "x"} for i in range(first, first + 3)],
                                    tablet_index=0)
            sent = [(s.input_format, s.status) for s in proxy.served if s.command == "insert_rows"]
            assert sent == [("arrow", 400), ("yson", 200), ("yson", 200)]
            assert cluster.get_tablet_infos("//tmp/yson-in")[0].total_row_count == 6


class TestQueries:
    def test_in_picks_single_rows_and_a_malformed_in_is_refused_saying_what_the_standin_answers(
            self, standin_cluster) -> None:
        standin_cluster.create("table", "//tmp/in_query/q", recursive=True, attributes={
            "dynamic": True, "schema": [{"name": "n", "type": "int64"}]})
        standin_cluster.insert_rows("//tmp/in_query/q", [{"n": n} for n in range(10)])
        client = standin_cluster._client
        picked = client.select_rows("[$row_index], [n] FROM [//tmp/in_query/q] WHERE [$tablet_index] = 0 AND "
                                    "[$row_index] IN (7, 2, 9)")
        assert sorted((r["$row_index"], r["n"]) for r in picked) == [(2, 2), (7, 7), (9, 9)]
        for query in ("[n] FROM [//tmp/in_query/q] WHERE [$row_index] IN 7, 2",
                      "[n] FROM [//tmp/in_query/q] WHERE [$row_index] IN (7, 2"):
            with pytest.raises(Exception, match="expected"):
                list(client.select_rows(query))
