"""The stand-in as a YTsaurus cluster's HTTP side: three proxies over one storage behind a balancer, each keeping the
tablet transactions it started (YTsaurus' sticky transaction pool), and the YTsaurus backend that survives it by
pinning every tablet transaction to one proxy."""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import yt.wrapper as yt

from streaming_core.cluster import Cluster
from streaming_core.cluster.ytsaurus.client import client_config
from tests.support.cluster import make_queue
from tests.support.standin import STANDIN_TOKEN
from ytsaurus_standin import StandinProxy

#: YTsaurus' `NoSuchTransaction`, which a proxy answers for a tablet transaction another proxy holds.
NO_SUCH_TRANSACTION = 11000
STICKY_MESSAGE = ("is not found, this usually means that you use tablet transactions within HTTP API; consider "
                  "using RPC API instead")
TRIES = 10


def client_of(address: str) -> yt.YtClient:
    """A raw `YtClient` that talks to `address` only (proxy discovery off)."""
    return yt.YtClient(config=client_config(address, STANDIN_TOKEN, {"proxy": {"enable_proxy_discovery": False}}))


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture
def queue(standin_cluster: Cluster) -> Iterator[tuple[str, str]]:
    root = f"//tmp/p{uuid.uuid4().hex[:12]}"
    make_queue(standin_cluster, f"{root}/queue", consumer=f"{root}/consumer")
    yield f"{root}/queue", f"{root}/consumer"


class TestDiscovery:
    def test_hosts_lists_the_three_proxies_not_the_balancer(self, standin: StandinProxy) -> None:
        hosts = get_json(f"http://{standin.address}/hosts")

        assert len(hosts) == 3 and hosts == standin.proxies and standin.address not in hosts
        assert get_json(f"http://{standin.proxies[1]}/hosts") == hosts

    def test_discovery_answers_by_role_as_the_client_asks(self, standin: StandinProxy) -> None:
        assert get_json(f"http://{standin.address}/hosts?role=data") == standin.proxies
        assert get_json(f"http://{standin.address}/hosts/data") == standin.proxies
        assert get_json(f"http://{standin.address}/hosts?role=analytics") == []
        assert get_json(f"http://{standin.address}/api/v4/discover_proxies?type=http&role=data") == {
            "proxies": standin.proxies}

    def test_the_balancer_hands_requests_to_every_proxy(self, standin: StandinProxy) -> None:
        client = client_of(standin.address)
        before = len(standin.served)
        for _ in range(30):
            client.exists("//tmp")

        assert {s.proxy for s in standin.served[before:]} == set(standin.proxies)


class TestStickyTransactions:
    def test_a_tablet_transaction_used_on_another_proxy_gets_11000_with_ytsaurus_message(
            self, standin: StandinProxy, queue: tuple[str, str]) -> None:
        q, c = queue
        starter, other = client_of(standin.proxies[0]), client_of(standin.proxies[1])
        tx = starter.start_transaction(type="tablet", sticky=True)

        with other.Transaction(transaction_id=tx), pytest.raises(yt.YtResponseError) as err:
            other.advance_consumer(c, q, 0, None, 1)
        with other.Transaction(transaction_id=tx), pytest.raises(yt.YtResponseError) as on_commit:
            other.commit_transaction(tx)

        for error in (err.value, on_commit.value):
            assert error.contains_code(NO_SUCH_TRANSACTION)
            assert f"Sticky transaction {tx} {STICKY_MESSAGE}" in str(error)
        starter.commit_transaction(tx)  # its own proxy still holds it

    def test_a_client_through_the_balancer_loses_its_tablet_transactions_with_11000(
            self, standin: StandinProxy, queue: tuple[str, str]) -> None:
        """What the issue saw: `ytsaurus-client` as it comes, behind a balancer, cannot commit a consumer advance."""
        q, c = queue
        client = yt.YtClient(config=client_config(standin.address, STANDIN_TOKEN, None))
        outcomes: Counter[str] = Counter()
        for _ in range(TRIES):
            try:
                with client.Transaction(type="tablet", ping=False):
                    client.advance_consumer(c, q, 0, None, 0)
                outcomes["committed"] += 1
            except yt.YtResponseError as e:
                outcomes["11000" if e.contains_code(NO_SUCH_TRANSACTION) else str(e)] += 1

        assert outcomes["11000"] >= 1 and set(outcomes) <= {"11000", "committed"}

    def test_master_transactions_are_not_sticky(self, standin: StandinProxy) -> None:
        path = f"//tmp/m{uuid.uuid4().hex[:12]}"
        tx = client_of(standin.proxies[0]).start_transaction()
        other = client_of(standin.proxies[2])

        with other.Transaction(transaction_id=tx):
            other.create("map_node", path, recursive=True)
        other.commit_transaction(tx)

        assert other.exists(path)

    def test_the_backend_starts_uses_and_commits_each_tablet_transaction_on_one_proxy(
            self, standin: StandinProxy, standin_cluster: Cluster, queue: tuple[str, str]) -> None:
        q, c = queue
        standin_cluster.insert_rows(q, [{"data": "x", "n": i} for i in range(TRIES)], tablet_index=0)
        before = len(standin.served)
        for offset in range(1, TRIES + 1):
            with standin_cluster.transaction() as tx:
                tx.advance_consumer(c, q, 0, offset - 1 if offset > 1 else None, offset)
                tx.insert_rows(q, [{"data": "y", "n": offset}], tablet_index=1)

        served = standin.served[before:]
        assert standin_cluster.get_consumer_offsets(c, q)[0] == TRIES
        assert all(s.status == 200 for s in served)
        proxies_of: dict[str, set[str | None]] = {}
        for s in served:
            if s.transaction is not None:
                proxies_of.setdefault(s.transaction, set()).add(s.proxy)
        commands = Counter(s.command for s in served if s.transaction is not None)
        assert len(proxies_of) == TRIES and all(len(p) == 1 for p in proxies_of.values())
        assert commands["start_transaction"] == commands["commit_transaction"] == TRIES
        assert commands["advance_consumer"] == commands["insert_rows"] == TRIES
