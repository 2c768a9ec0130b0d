"""The stand-in's Cypress locks and master transactions are as strict as YTsaurus' (issue 32): exclusive, shared and
snapshot locks conflict between concurrent transactions with error 402 naming the winner, locks end with their
transaction (commit, abort, or a timeout without pings, on the stand-in's clock), and an object id path (`#<id>`)
names one object: a node replaced by a link after its id was read is gone for that id. Through the real
`ytsaurus-client`, behind the stand-in's balancer of three proxies."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yt.wrapper as yt
from yt.common import YtError

from tests.support.standin import STANDIN_TOKEN, SteppedClock
from ytsaurus_standin import StandinProxy

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(30)]

#: A master transaction's timeout in these tests (milliseconds), passed on the stand-in's clock by a step.
TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def clock() -> SteppedClock:
    return SteppedClock()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory, clock: SteppedClock) -> Iterator[StandinProxy]:
    with StandinProxy(tmp_path_factory.mktemp("locks"), token=STANDIN_TOKEN, clock=clock) as served:
        yield served


@pytest.fixture
def client(proxy: StandinProxy) -> yt.YtClient:
    return yt.YtClient(proxy=f"http://{proxy.address}", token=STANDIN_TOKEN,
                       config={"proxy": {"retries": {"enable": False}}})


@pytest.fixture
def node(client: yt.YtClient, request: pytest.FixtureRequest) -> str:
    path = f"//home/locks/{request.node.name[:60].replace('[', '-').replace(']', '')}"
    client.create("map_node", path, recursive=True, ignore_existing=True)
    return path


def start(client: yt.YtClient, title: str = "t", parent: str | None = None) -> str:
    return client.start_transaction(timeout=TIMEOUT_MS, attributes={"title": title}, parent_transaction=parent)


def lock(client: yt.YtClient, tx: str, path: str, mode: str = "exclusive", **keys: Any) -> Any:
    with client.Transaction(transaction_id=tx):
        return client.lock(path, mode=mode, **keys)


def conflict(call) -> YtError:
    with pytest.raises(YtError) as error:
        call()
    assert error.value.contains_code(402), error.value
    return error.value.find_matching_error(code=402)


def test_an_exclusive_lock_is_refused_to_a_concurrent_transaction_naming_the_winner(client, node) -> None:
    first, second = start(client, "opsd claim A"), start(client, "B")
    lock(client, first, node)

    error = conflict(lambda: lock(client, second, node))
    assert error.message == (f'Cannot take "exclusive" lock for node {node} since "exclusive" lock is taken by '
                             f"concurrent transaction {first}")
    assert error.attributes["winner_transaction"]["id"] == first
    assert error.attributes["winner_transaction"]["title"] == "opsd claim A"
    conflict(lambda: lock(client, second, node, mode="shared"))
    lock(client, second, node, mode="snapshot")  # a snapshot lock conflicts with nothing
    nested = start(client, parent=first)
    lock(client, nested, node)  # a lock of an ancestor is no conflict


def test_shared_locks_conflict_on_the_same_key_only(client, node) -> None:
    first, second = start(client), start(client)
    lock(client, first, node, mode="shared", child_key="a")
    lock(client, second, node, mode="shared", child_key="b")
    lock(client, second, node, mode="shared")
    error = conflict(lambda: lock(client, second, node, mode="shared", child_key="a"))
    assert "child 'a'" in error.message
    conflict(lambda: lock(client, second, node))


@pytest.mark.parametrize("end", ["commit", "abort"])
def test_a_lock_ends_with_its_transaction(client, node, end: str) -> None:
    first, second = start(client), start(client)
    lock(client, first, node)
    getattr(client, f"{end}_transaction")(first)
    lock(client, second, node)


def test_a_nested_transactions_lock_passes_to_its_parent_at_commit(client, node) -> None:
    parent, other = start(client), start(client)
    nested = start(client, parent=parent)
    lock(client, nested, node)
    client.commit_transaction(nested)
    conflict(lambda: lock(client, other, node))
    client.abort_transaction(parent)
    lock(client, other, node)


def test_a_master_transaction_expires_without_pings_and_its_locks_with_it(client, node, clock) -> None:
    pinged, forgotten, other = start(client), start(client), start(client)
    lock(client, forgotten, node)
    for _ in range(2):
        clock.advance(TIMEOUT_MS / 1000 * 0.6)
        client.ping_transaction(pinged)  # pinged within its timeout: alive
        client.ping_transaction(other)

    with pytest.raises(YtError) as gone:
        client.ping_transaction(forgotten)
    assert gone.value.contains_code(11000)
    lock(client, other, node)


def test_a_locked_node_cannot_be_removed_by_another_transaction(client, node) -> None:
    holder = start(client)
    lock(client, holder, f"{node}&")
    conflict(lambda: client.remove(node, recursive=True))
    client.abort_transaction(holder)
    client.remove(node, recursive=True)


def test_a_lock_needs_a_master_transaction(client, node) -> None:
    with pytest.raises(YtError, match="outside of a transaction"):
        client.lock(node)


def test_an_object_id_names_one_node_never_the_link_put_in_its_place(client, proxy: StandinProxy) -> None:
    folder = proxy.root / "ids"
    folder.mkdir(exist_ok=True)
    (folder / "file").write_text("mine")
    (folder / "private").write_text("SECRET")
    node_id = client.get("//ids/file&/@id")
    assert client.get("//ids/file&/@", attributes=["type", "id"]) == {"type": "file", "id": node_id}
    assert client.read_file(f"#{node_id}").read() == b"mine"

    (folder / "file").unlink()
    (folder / "file").symlink_to(folder / "private")
    with pytest.raises(YtError) as gone:
        client.read_file(f"#{node_id}").read()
    assert gone.value.is_resolve_error() and "SECRET" not in str(gone.value)
    assert client.get("//ids/file&/@type") == "link" and client.get("//ids/file&/@id") != node_id
