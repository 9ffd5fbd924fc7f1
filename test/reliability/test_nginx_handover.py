"""A killed nginx master's workers serve the kept-alive connections they hold; new connections
go to the new master (issue 55).

A graceful quit of the old workers at the kill closed their idle kept-alive connections at
once: a request a client sent on one at that instant got no answer. Here a client keeps an
idle connection across the kill and sends on it afterwards, which failed on the code that
quit them at once (``RemoteDisconnected``) and is answered now; the old workers quit once
the client closes it.
"""

from __future__ import annotations

import http.client
import json
import time

import pytest
from reliability_support import Stacks
from sagemaker_tfs.supervisor.processes.process_groups import group_connections, group_exists
from traffic import PLAIN_PATHS, kill, nginx_master_pid, wait_until_serving
from whole_stack import Stack, wait_for

pytestmark = pytest.mark.slow

BODY = json.dumps({"instances": [1.0, 2.0]})


def _predict(connection: http.client.HTTPConnection) -> dict:
    connection.request("POST", "/invocations", BODY, {"Content-Type": "application/json"})
    response = connection.getresponse()
    body = response.read()
    assert response.status == 200, body
    return json.loads(body)


def _connect(stack: Stack) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", stack.port, timeout=10)


def test_a_kept_alive_connection_outlives_its_nginx_master(stacks: Stacks, plain_models) -> None:
    stack = stacks.start(plain_models)
    stack.wait_until_settled()
    kept = _connect(stack)
    assert _predict(kept) == {"predictions": [3.5, 4.0]}
    old_master = nginx_master_pid(stack)
    kill(old_master)
    assert wait_for(lambda: stack.child_pids("nginx") not in ([], [old_master]), 30, 0.01)
    assert wait_until_serving(stack, PLAIN_PATHS, 60) is not None
    time.sleep(1.0)  # several of the supervisor's rounds: the old workers are not told to quit
    # A new connection goes to the new master's workers, not to the old ones.
    fresh = _connect(stack)
    assert _predict(fresh) == {"predictions": [3.5, 4.0]}
    assert group_connections(old_master, stack.port) == 1  # the kept one alone
    # The kept, idle connection is answered by the old worker that holds it.
    for _ in range(3):
        assert _predict(kept) == {"predictions": [3.5, 4.0]}
    assert group_exists(old_master)
    kept.close()
    fresh.close()
    # With no connection left the old workers quit (gracefully) and are gone.
    assert wait_for(lambda: not group_exists(old_master), 15, interval=0.05)
    log = stack.log_text()
    assert f"the leftovers of pid {old_master} serve the connections they hold" in log
