"""The Linux scheduling policy the whole stack runs under (``SAGEMAKER_TFS_SCHED_POLICY``)."""

from __future__ import annotations

import logging
import os

from sagemaker_tfs.config import SCHED_POLICIES

logger = logging.getLogger(__name__)


def use_sched_policy(policy: str) -> None:
    """Run this process's threads, and every process and thread started after (they inherit
    it), under ``policy``: "normal" (the default) or "batch".

    Under SCHED_BATCH a thread that wakes does not preempt the one running: nginx, the model
    server and the service each work through what is ready (many requests a wake-up) before
    the CPU changes hands, instead of a switch at every message between them. Any user may
    choose it; the nice values keep their weight. Where the kernel refuses (a seccomp filter),
    the stack runs on as it is, said once in the log.
    """
    for thread in os.listdir("/proc/self/task"):
        try:
            os.sched_setscheduler(
                int(thread), getattr(os, SCHED_POLICIES[policy]), os.sched_param(0)
            )
        except OSError as error:
            logger.warning("scheduling policy %s not applied: %s", policy, error)
            return
