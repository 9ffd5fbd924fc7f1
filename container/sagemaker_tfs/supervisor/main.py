"""``sagemaker-tfs serve``: arguments, logging, the configuration, then the stack until a
stop signal (exit 0), a start-up failure (exit 1) or a bad configuration (exit 2)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence

from sagemaker_tfs.config import DEFAULT_WORK_DIR, load_config
from sagemaker_tfs.container_limits import cpu_count, describe_limits
from sagemaker_tfs.env_reader import ConfigError
from sagemaker_tfs.stack_config import StackConfig
from sagemaker_tfs.supervisor.processes.scheduling import use_sched_policy
from sagemaker_tfs.supervisor.processes.spawning import become_subreaper
from sagemaker_tfs.supervisor.processes.startup import StartupError, StopRequested
from sagemaker_tfs.supervisor.stack_supervisor import Supervisor

logger = logging.getLogger(__name__)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="sagemaker-tfs serve",
        description="Run the serving stack: model servers, the Python service, nginx.",
    )
    parser.add_argument("--model-dir", help="models directory (default /opt/ml/model[s])")
    parser.add_argument("--work-dir", help="generated configs, sockets, pid files")
    parser.add_argument(
        "--port", type=int, help="public port (default SAGEMAKER_BIND_TO_PORT or 8080)"
    )
    return parser.parse_args(list(argv))


def configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def log_config(config: StackConfig, limits: str) -> None:
    """The configuration in effect, one JSON line; ``container``: the CPU count the stack is
    sized for (and where it came from) and the memory limit."""
    text = json.dumps({**dataclasses.asdict(config), "container": limits}, sort_keys=True)
    logger.info("configuration in effect: %s", text)


def main(argv: Sequence[str]) -> int:
    configure_logging()
    become_subreaper()
    args = parse_args(argv)
    cpus = cpu_count()
    try:
        config = load_config(os.environ, args.model_dir, args.work_dir, args.port, cpus)
    except ConfigError as error:
        logger.error("invalid configuration: %s", error)
        return 2
    log_config(config, describe_limits())
    use_sched_policy(config.sched_policy)
    supervisor = Supervisor(config)

    def request_stop(signum: int, _frame: object) -> None:
        logger.info("received %s", signal.Signals(signum).name)
        supervisor.stop_requested.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        supervisor.start()
        supervisor.watch()
    except StartupError as error:
        logger.error("start-up failed: %s", error)
        return 1
    except OSError as error:  # e.g. a work directory on a read-only root: one line, no traceback
        logger.error("start-up failed: %s (the stack writes only to --work-dir, default %s)",
                     error, DEFAULT_WORK_DIR)  # fmt: skip
        return 1
    except StopRequested:
        return 0
    finally:
        supervisor.shutdown()
    return 0
