"""A process without a YTsaurus token gets one clear error, never the client's generic "failed to authenticate": on
the driver it says this process has none; in a Spark task (`on_executor`, around every source `read()` and sink
`write()`) it says the executors have none and how to give them one on each engine. A wrong token is told apart
and never echoed. Against the stand-in, which asks for a token as YTsaurus does (401, error 900)."""

from __future__ import annotations

import pytest

from streaming_core.cluster import AuthenticationError, ExecutorTokenError, MissingTokenError, connect
from streaming_core.cluster.errors import EXECUTOR_TOKEN_HOWTO, on_executor

pytestmark = pytest.mark.hostile


@pytest.fixture
def no_token_in_env(monkeypatch, tmp_path):
    for name in ("YT_TOKEN", "YT_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.yt/token either


def test_a_driver_without_a_token_is_told_that_this_process_has_none(standin, no_token_in_env):
    with connect(standin.uri) as cluster, pytest.raises(MissingTokenError) as raised:
        cluster.exists("//tmp")
    assert type(raised.value) is MissingTokenError
    assert "this process has none" in str(raised.value) and "executors" not in str(raised.value)
    assert "failed to authenticate" not in str(raised.value)


def test_a_task_without_a_token_says_the_executors_have_none_and_how_to_give_them_one(standin, no_token_in_env):
    with pytest.raises(ExecutorTokenError) as raised, on_executor(), connect(standin.uri) as cluster:
        cluster.exists("//tmp")
    message = str(raised.value)
    assert message.startswith("//tmp: the Spark executors have no YTsaurus token")
    assert message.endswith(EXECUTOR_TOKEN_HOWTO)
    for engine in ("standalone", "spark.executorEnv.YT_TOKEN_PATH", "Kubernetes", "Secret"):
        assert engine in message


def test_a_wrong_token_is_an_authentication_error_that_does_not_echo_it(standin, no_token_in_env):
    token = "wrong-token-5Zk8q"
    with connect(standin.uri, token=token) as cluster, pytest.raises(AuthenticationError) as raised:
        cluster.exists("//tmp")
    assert not isinstance(raised.value, MissingTokenError)
    assert token not in str(raised.value)
