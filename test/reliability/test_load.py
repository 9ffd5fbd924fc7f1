"""A load run: C clients for T seconds over the njs and the fast path; every answer must be a
correct 200, and the memory of every process of the stack must stay flat.

RSS is sampled once a second; "start" is the first sample after a warm-up (a tenth of the run,
at least 2 s: first requests fill caches and pools), "end" the last one.
"""

from __future__ import annotations

import threading
import time

import pytest
from reliability_support import BUDGET, Stacks, report
from traffic import PLAIN_PATHS, RequestStream, rss_kib, stack_processes

pytestmark = pytest.mark.slow

# Flat: growth between warm-up and end within 20% plus 32 MiB (allocator noise; a leak of a
# few KiB per request grows far past that over a run of this many requests).
RSS_GROWTH_RATIO = 1.2
RSS_GROWTH_KIB = 32 * 1024


def _sample(processes: dict[str, int], samples: dict[str, list[int]]) -> None:
    for name, pid in processes.items():
        rss = rss_kib(pid)
        if rss is not None:
            samples.setdefault(name, []).append(rss)


@pytest.mark.timeout(BUDGET.load_seconds + 300)  # the run itself, plus starting the stack
def test_load_gives_only_correct_answers_and_flat_memory(stacks: Stacks, plain_models) -> None:
    stack = stacks.start(plain_models, env={"SAGEMAKER_TFS_INSTANCE_COUNT": "2"})
    processes = stack_processes(stack)
    warm_up = max(2.0, BUDGET.load_seconds / 10)
    start_rss: dict[str, list[int]] = {}
    samples: dict[str, list[int]] = {}
    done = threading.Event()
    with RequestStream(stack, PLAIN_PATHS, BUDGET.load_clients) as stream:
        started = time.monotonic()
        time.sleep(warm_up)
        _sample(processes, start_rss)
        while time.monotonic() - started < BUDGET.load_seconds:
            _sample(processes, samples)
            done.wait(1.0)
        _sample(processes, samples)
    elapsed = time.monotonic() - started
    result = stream.result
    non_2xx = result.requests - result.statuses["200"]
    rss = {
        name: (start_rss[name][0], max(values), values[-1])
        for name, values in samples.items()
        if name in start_rss
    }
    figures = ", ".join(
        f"{name} {first // 1024}/{last // 1024}" for name, (first, _, last) in rss.items()
    )
    report(
        f"load: {BUDGET.load_clients} clients, {elapsed:.0f} s, {result.requests} requests "
        f"({result.requests / elapsed:.0f}/s), {non_2xx} non-2xx, {result.wrong} wrong; "
        f"RSS MiB start/end: {figures}"
    )
    assert non_2xx == 0 and result.wrong == 0, (dict(result.statuses), result.failures)
    assert set(processes.values()) == set(stack_processes(stack).values()), "a process restarted"
    grown = {
        name: (first, last)
        for name, (first, _, last) in rss.items()
        if last > first * RSS_GROWTH_RATIO + RSS_GROWTH_KIB
    }
    assert not grown, grown
