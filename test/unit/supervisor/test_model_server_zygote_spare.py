"""The zygote's spare and the first model servers forked from the zygote (issue 55), on real
processes without TensorFlow: the stand-in zygote of test_model_server_zygote.py (the real
``serve`` loop, which forks the spare too), driven by a ``ModelServerZygote`` in a fresh
Python process that becomes a child subreaper, as ``serve`` does.
"""

from __future__ import annotations

import textwrap

import pytest
from test_model_server_zygote import DRIVER_PRELUDE, run_driver

DRIVER = DRIVER_PRELUDE + textwrap.dedent("""
    def facts(pid):
        stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return {"ppid": int(stat[1]), "leads_session": os.getsid(pid) == pid,
                "title": open(f"/proc/{pid}/cmdline").read()}

    def dead(pid):  # a zombie not reaped yet: the supervisor has not noticed
        stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return stat[0] == "Z"

    def alive(pid):
        try:
            return not dead(pid)
        except FileNotFoundError:
            return False

    become_subreaper()
    result = {"supervisor": os.getpid()}
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.environ["PYTHONPATH"]}
    zygote = ModelServerZygote(env, lambda: True, command=[sys.executable, "-c", sys.argv[1]])

    # A first start: the zygote started and waited for, then a model server forked from it.
    zygote.start_now()
    result["ready"] = zygote.wait_until_ready(10, lambda: False)
    result["first_forked"] = zygote.take(["model-server", "0", "60"]) is not None

    # The watch loop forks a spare from the ready zygote: the supervisor's child.
    zygote.check(time.monotonic())
    first, spare = zygote.process.pid, zygote.spare.process.pid
    result["spare"] = facts(spare)
    result["spare_is_a_fork"] = spare != first

    # The zygote killed, then a model server restarted before the watch loop noticed:
    # forked at once from the spare, which takes the zygote's place.
    os.kill(first, signal.SIGKILL)
    until(lambda: dead(first))
    started = time.monotonic()
    forked = zygote.take(["model-server", "0", "60"], wait=True)
    result["forked_after_death_seconds"] = time.monotonic() - started
    result["forked_after_death"] = forked is not None and forked.pid not in (first, spare)
    result["spare_took_its_place"] = zygote.process.pid == spare
    zygote.check(time.monotonic())
    second_spare = zygote.spare.process.pid
    result["new_spare"] = second_spare not in (first, spare)

    # The zygote killed and only the watch loop notices: the spare takes its place there.
    os.kill(spare, signal.SIGKILL)
    until(lambda: dead(spare))
    zygote.check(time.monotonic())
    result["promoted_in_check"] = zygote.process.pid == second_spare
    result["third_spare"] = zygote.spare is not None and zygote.spare.process.pid not in (
        first, spare, second_spare)
    result["fork_from_promoted"] = zygote.take(["model-server", "0", "60"]) is not None

    # A spare that dies is replaced, after SPARE_RETRY_SECONDS.
    third = zygote.spare.process.pid
    os.kill(third, signal.SIGKILL)
    until(lambda: dead(third))
    now = time.monotonic()
    zygote.check(now)
    result["spare_gone"] = zygote.spare is None
    zygote.check(now + 2)
    result["spare_replaced"] = zygote.spare is not None and zygote.spare.process.pid != third

    # stop ends the zygote and its spare.
    last_zygote, last_spare = zygote.process.pid, zygote.spare.process.pid
    zygote.stop()
    result["stopped"] = until(lambda: not alive(last_zygote) and not alive(last_spare))

    # A zygote that cannot fork (code 3: a thread left): a first start does not wait long.
    refusing = ModelServerZygote(
        env, lambda: True, command=[sys.executable, "-c", "import sys; sys.exit(3)"])
    refusing.start_now()
    started = time.monotonic()
    result["refusing_ready"] = refusing.wait_until_ready(30, lambda: False)
    result["refusing_seconds"] = time.monotonic() - started
    refusing.check(time.monotonic())
    result["refusing_stopped"] = refusing.stopped
    refusing.stop()
    print(json.dumps(result))
    """)


@pytest.fixture(scope="module")
def result() -> dict:
    return run_driver(DRIVER, timeout=90)


def test_a_first_start_is_forked_once_the_zygote_is_ready(result: dict) -> None:
    assert result["ready"] is True
    assert result["first_forked"] is True


def test_the_spare_is_a_fork_the_supervisor_adopts(result: dict) -> None:
    assert result["spare_is_a_fork"] is True
    assert result["spare"]["ppid"] == result["supervisor"]
    assert result["spare"]["leads_session"] is True


def test_a_model_server_restarted_as_the_zygote_dies_is_forked_by_its_spare(
    result: dict,
) -> None:
    assert result["forked_after_death"] is True
    assert result["forked_after_death_seconds"] < 2.0  # a fork, not an import nor a backoff
    assert result["spare_took_its_place"] is True
    assert result["new_spare"] is True


def test_the_watch_loop_puts_the_spare_in_the_dead_zygotes_place(result: dict) -> None:
    assert result["promoted_in_check"] is True
    assert result["third_spare"] is True
    assert result["fork_from_promoted"] is True


def test_a_dead_spare_is_replaced_and_stop_ends_both(result: dict) -> None:
    assert result["spare_gone"] is True
    assert result["spare_replaced"] is True
    assert result["stopped"] is True


def test_a_zygote_that_cannot_fork_leaves_the_first_start_cold_at_once(result: dict) -> None:
    assert result["refusing_ready"] is False
    assert result["refusing_seconds"] < 10.0
    assert result["refusing_stopped"] is True
