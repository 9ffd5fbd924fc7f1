"""Fault injection against real whole stacks: SIGKILL every kind of child again and again.

Recovery is the time from the kill until ``/ping`` answers 200 and a prediction is correct on
every path (njs JSON and the gRPC fast path). The supervisor's log says where it went:
``detect`` (kill until the supervisor noticed and started the new process), ``start`` (until
the new process was ready), the rest is nginx/clients seeing it.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Iterator
from datetime import datetime

import pytest
from reliability_support import BUDGET, LONG, Stacks, report
from sagemaker_tfs.ports import port_is_free
from traffic import (
    KINDS,
    PLAIN_PATHS,
    SCRIPT_PATHS,
    SCRIPT_REST,
    PingSampler,
    RequestStream,
    every_model_server_available,
    kill,
    kills_under_a_stream,
    model_server_pids,
    wait_until_serving,
)
from whole_stack import Stack, descendant_pids, pid_alive, wait_for

pytestmark = pytest.mark.slow

# The goal is 2 s for every kill (docs/reliability.md has the figures of a long run); a
# killed model server is replaced by the standby, which has TensorFlow imported already. The
# bounded run checks the policy (restarted at once, one line per kill) and allows a wide
# margin on time: on a shared 2-core machine a Python start-up can take seconds.
GOAL_SECONDS = 2.0
LIMIT_SECONDS = GOAL_SECONDS if LONG else 15.0
RECOVERY_TIMEOUT_SECONDS = 120.0
# Kinds whose kill under the stream loses at most this many requests a kill (at least
# LOSSLESS_KILLS_AT_LEAST kills, so that the code before fails it), and their bound
# on recovery (seconds). nginx's master: its workers serve the connections they hold while a
# new master takes every new one on the same port, and quit once they hold none
# (docs/reliability.md). Before issue 55: about 7 a kill with 8 clients; with a graceful quit
# at once, 0-4 in 5 kills (a request sent on a kept-alive connection at the instant the old
# worker closed it as idle). A gunicorn worker: nginx sends the requests it held
# again (no inference.py here), which its successor serves; what is left is an answer whose
# first bytes had left when the worker died. Before: about 4 a kill, each a 503.
LOSSLESS_KILLS = {"nginx master": (0, GOAL_SECONDS), "gunicorn worker": (1, LIMIT_SECONDS)}
LOSSLESS_KILLS_AT_LEAST = 5
_LOG_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \S+ sagemaker_tfs\.supervisor\.[\w.]+: (.*)$"
)
_SUPERVISED = {
    "nginx master": "nginx",
    "gunicorn master": "gunicorn",
    "model server": "model-server",
}


def _log_events(stack: Stack) -> list[tuple[float, str]]:
    events = []
    for line in stack.log_text().splitlines():
        match = _LOG_LINE.match(line)
        if match:
            at = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            events.append((at, match.group(2)))
    return events


def _phases(stack: Stack, name: str, pid: int, killed_at: float) -> tuple[float, float] | None:
    """(detect, start) seconds for the restart after killing ``pid``, from the supervisor log."""
    events = _log_events(stack)
    restarted = [at for at, text in events if f"(pid {pid}) was killed by SIGKILL" in text]
    if not restarted:
        return None
    ready = [at for at, text in events if text.startswith(name) and "after restart" in text]
    ready = [at for at in ready if at >= restarted[0]]
    if not ready:
        return None
    return max(0.0, restarted[0] - killed_at), ready[0] - restarted[0]


def _replaced(find, stack: Stack, pid: int) -> bool:  # type: ignore[no-untyped-def]
    try:
        return find(stack) != pid
    except (ValueError, IndexError):  # none running right now
        return False


def _wait_for_the_standby(stack: Stack) -> None:
    """Kills spaced as far as the standby's TensorFlow import (a few seconds): a kill that
    comes sooner finds it still importing and waits for the rest of the import."""
    stack.wait_until_settled(RECOVERY_TIMEOUT_SECONDS)


def _kill_repeatedly(stack: Stack, kind: str, kills: int) -> list[float]:
    find = KINDS[kind]
    recoveries = []
    detects, starts = [], []
    for _ in range(kills):
        assert wait_until_serving(stack, PLAIN_PATHS, RECOVERY_TIMEOUT_SECONDS) is not None
        # The workers of a killed gunicorn master serve until the new one is ready, then stop.
        assert wait_for(lambda: stack.orphans("gunicorn") == [], 60), stack.orphans("gunicorn")
        if kind == "model server":
            _wait_for_the_standby(stack)
        pid = find(stack)
        killed_at = kill(pid)
        started = time.monotonic()
        # A killed master's workers may answer for a moment: recovered means replaced too.
        assert wait_for(lambda p=pid: _replaced(find, stack, p), 60, interval=0.005), kind
        rest = wait_until_serving(stack, PLAIN_PATHS, RECOVERY_TIMEOUT_SECONDS)
        assert rest is not None, f"{kind} not back:\n{stack.log_tail(5000)}"
        recoveries.append(time.monotonic() - started)
        if kind in _SUPERVISED:
            name = _SUPERVISED[kind]
            assert wait_for(lambda p=pid, at=killed_at, n=name: _phases(stack, n, p, at), 30)
            detect, start = _phases(stack, _SUPERVISED[kind], pid, killed_at) or (0, 0)
            detects.append(detect)
            starts.append(start)
    where = ""
    if detects:
        where = (
            f"; max detect {max(detects):.2f} s, max start {max(starts):.2f} s " f"(supervisor log)"
        )
    report(
        f"faults: {kind}: {kills} kills, recovery median {statistics.median(recoveries):.2f} s, "
        f"max {max(recoveries):.2f} s{where}"
    )
    return recoveries


@pytest.fixture(scope="module")
def plain_stack(plain_models, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One model server, no inference.py; shared by the tests below (the last one kills it)."""
    stacks = Stacks(tmp_path_factory)
    stack = stacks.start(plain_models)
    stack.wait_until_settled()  # start-up is over: every kill below is a crash while serving
    yield stack
    stacks.stop_all()


@pytest.mark.parametrize("kind", ["nginx master", "gunicorn master", "gunicorn worker"])
def test_front_processes_recover_within_the_goal_every_time(plain_stack: Stack, kind) -> None:
    killed_before = len(plain_stack.log_text().splitlines())
    recoveries = _kill_repeatedly(plain_stack, kind, BUDGET.kills_per_kind)
    assert max(recoveries) <= LIMIT_SECONDS, recoveries
    log = plain_stack.log_text()
    assert "before it was ready" not in log  # no kill was taken for a failed start
    if kind in _SUPERVISED:  # one line per kill, and every one restarted at once
        lines = [line for line in log.splitlines()[killed_before:] if "was killed by" in line]
        assert len(lines) == BUDGET.kills_per_kind, lines
        assert all(line.endswith("restarting it now") for line in lines), lines


def test_model_server_recovers_every_time(plain_stack: Stack) -> None:
    killed_before = len(plain_stack.log_text().splitlines())
    recoveries = _kill_repeatedly(plain_stack, "model server", BUDGET.model_server_kills)
    # The same after the 1st and the nth kill: the standby became the model server each time.
    assert max(recoveries) <= LIMIT_SECONDS, recoveries
    assert max(recoveries) <= 2 * min(recoveries) + 3.0, recoveries
    log = plain_stack.log_text()
    assert "before it was ready" not in log
    taken = [line for line in log.splitlines()[killed_before:] if "from the standby" in line]
    assert len(taken) == BUDGET.model_server_kills, taken


@pytest.mark.parametrize("kind", list(KINDS))
def test_kills_under_a_request_stream(plain_stack: Stack, kind: str) -> None:
    """One model server: what a kill costs the requests of 8 clients sending all along."""
    stack = plain_stack
    assert wait_until_serving(stack, PLAIN_PATHS, RECOVERY_TIMEOUT_SECONDS) is not None
    before = (lambda: _wait_for_the_standby(stack)) if kind == "model server" else None
    kills = (
        max(BUDGET.stream_kills, LOSSLESS_KILLS_AT_LEAST)
        if kind in LOSSLESS_KILLS
        else (BUDGET.stream_kills)
    )
    run = kills_under_a_stream(stack, kind, kills, 8, before_each=before)
    report(f"faults: {run.summary()}, 1 model server")
    result = run.result
    assert result.wrong == 0
    assert result.statuses["200"] > 0
    # The supervisor holds the public port and the service's socket across restarts: a
    # client that connects while nginx or gunicorn restarts waits, it is never refused.
    assert result.refused == 0, result.failures
    assert result.statuses["ReadTimeout"] == 0, result.failures  # no request hangs
    if kind in LOSSLESS_KILLS:
        per_kill, recovery = LOSSLESS_KILLS[kind]
        assert result.lost <= per_kill * kills, result.failures
        assert result.statuses["503"] == 0, result.failures  # none answered "not available"
        assert max(run.recoveries) <= recovery, run.recoveries


@pytest.mark.parametrize("paths", [PLAIN_PATHS, SCRIPT_PATHS], ids=["plain", "inference.py"])
def test_requests_survive_when_one_of_two_model_servers_dies(
    stacks: Stacks, plain_models, scripted_models, paths
) -> None:
    models = plain_models if paths is PLAIN_PATHS else scripted_models
    stack = stacks.start(models, env={"SAGEMAKER_TFS_INSTANCE_COUNT": "2"})
    kills = 0
    with RequestStream(stack, paths, clients=4) as stream:
        time.sleep(1.0)
        for round_ in range(BUDGET.stream_kills):
            pids = model_server_pids(stack)
            assert len(pids) == 2
            kill(pids[round_ % 2])
            kills += 1
            # Until the killed one is back, and a little longer: traffic over both again.
            assert wait_for(lambda: every_model_server_available(stack), 180), stack.log_tail()
            time.sleep(2.0)
    result = stream.result
    names = "+".join(path.name for path in paths)
    report(
        f"faults: {kills} model server kills of 2 ({names}, 4 clients): "
        f"{result.requests} requests, lost {result.lost} {dict(result.lost_on)}"
    )
    assert result.requests > 20 * kills
    if paths is PLAIN_PATHS:
        assert result.lost == 0, (dict(result.statuses), result.failures)
        return
    # A handler runs once: its own REST call to the model server that died under it fails
    # with its error (500). Its gRPC calls through sagemaker_tfs.client wait for the model
    # server to be back; and the next requests go to the other model server meanwhile.
    assert set(result.lost_on) <= {SCRIPT_REST.name}, result.failures
    assert all(" 500 " in failure for failure in result.failures), result.failures
    assert result.lost <= 20 * kills, (dict(result.lost_on), result.failures)


def test_ping_stays_200_while_one_of_two_model_servers_restarts_and_503_when_none_serves(
    stacks: Stacks, plain_models
) -> None:
    """``/ping`` says whether the instance can serve (health.py): one model server of two
    restarting leaves it 200 while the other serves every request; both down turn it 503. The
    standby is off, so that a restart is a TensorFlow import of seconds, not a 50 ms poll."""
    env = {"SAGEMAKER_TFS_INSTANCE_COUNT": "2", "SAGEMAKER_TFS_STANDBY_MODEL_SERVER": "false"}
    stack = stacks.start(plain_models, env=env)
    with PingSampler(stack) as pings, RequestStream(stack, PLAIN_PATHS, clients=4) as stream:
        time.sleep(0.5)
        killed = kill(model_server_pids(stack)[0])
        assert wait_for(lambda: len(model_server_pids(stack)) == 2, 60)
        assert wait_for(lambda: every_model_server_available(stack), 120), stack.log_tail()
        restarted = time.time() - killed
        time.sleep(0.5)
    result = stream.result
    report(
        f"faults: 1 of 2 model servers killed (standby off, back in {restarted:.1f} s): "
        f"/ping {dict(pings.statuses())}; {result.requests} requests, lost {result.lost}"
    )
    assert pings.samples and not pings.not_200(), (pings.not_200()[:5], stack.log_tail())
    assert result.lost == 0, (dict(result.statuses), result.failures)
    assert result.requests > 20
    for pid in model_server_pids(stack):
        kill(pid)
    assert wait_for(lambda: stack.ping() == 503, 3.0, interval=0.02), stack.log_tail()
    assert wait_for(lambda: stack.ping() == 200, 120), stack.log_tail()


def test_sigkill_of_the_supervisor_leaves_no_process_and_frees_the_port(
    plain_stack: Stack,
) -> None:
    stack = plain_stack
    children = descendant_pids(stack.process.pid)
    assert len(children) >= 5  # model server, gunicorn master and worker, nginx and workers
    started = time.monotonic()
    kill(stack.process.pid)
    stack.process.wait()
    assert wait_for(lambda: not any(pid_alive(pid) for pid in children), 10), [
        pid for pid in children if pid_alive(pid)
    ]
    gone = time.monotonic() - started
    assert wait_for(lambda: port_is_free(stack.port), 10)
    report(
        f"faults: supervisor SIGKILL: {len(children)} children, 0 left after {gone:.2f} s, "
        "port bindable"
    )
