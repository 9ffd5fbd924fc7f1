"""``sagemaker-tfs transform``: the command (argument parsing in ``job.py``).

Exit codes: 0 the job succeeded, 1 it failed (the last log line says why: the input object
and record, a stack that did not start, an S3 error), 2 the command line is invalid.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sys
from collections.abc import Iterator, Sequence

from sagemaker_tfs.transform.job import JobConfigError, TransformJob, parse_args, resolve

logger = logging.getLogger(__name__)

STACK_START_TIMEOUT_SECONDS = 300.0
NOT_DESCRIBED = ("model_dir", "endpoint", "env", "progress", "on_sagemaker")
MISSING_EXTRA = (
    "sagemaker-tfs transform needs jsonpath-ng and tqdm: pip install 'sagemaker-tfs[transform]'"
)


def _configure_logging() -> None:
    logging.basicConfig(
        level=os.environ.get("SAGEMAKER_TFS_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s transform: %(message)s",
        stream=sys.stderr,
    )


@contextlib.contextmanager
def _endpoint(job: TransformJob) -> Iterator[str]:
    if job.endpoint:
        yield job.endpoint
        return
    from sagemaker_tfs.transform.local_stack import running_stack

    assert job.model_dir is not None
    logger.info("starting the stack on %s", job.model_dir)
    with running_stack(
        job.model_dir, job.container_environment(), STACK_START_TIMEOUT_SECONDS
    ) as url:
        logger.info("stack ready at %s", url)
        yield url


def _describe(job: TransformJob) -> str:
    """The job's settings (not where the stack runs or its environment), ``name=value`` each."""
    return " ".join(
        f"{field.name}={getattr(job, field.name)}"
        for field in dataclasses.fields(job)
        if field.name not in NOT_DESCRIBED
    )


def run_job(job: TransformJob) -> int:
    from sagemaker_tfs.transform.endpoint_client import EndpointClient, InvocationError
    from sagemaker_tfs.transform.local_stack import StackStartError
    from sagemaker_tfs.transform.runner import JobFailed, Runner
    from sagemaker_tfs.transform.storage import StorageError

    try:
        with _endpoint(job) as url:
            probe = EndpointClient(url, job.content_type, None, 10, 0)
            probe.wait_until_healthy(60)
            parameters = probe.execution_parameters()
            probe.close()
            resolved = resolve(job, parameters)
            logger.info("execution-parameters: %s", parameters)
            logger.info("job: %s", _describe(resolved))
            client = EndpointClient(
                url,
                resolved.content_type,
                resolved.accept,
                resolved.invocations_timeout,
                resolved.invocations_max_retries,
                pool_size=resolved.max_concurrent_transforms or 1,
            )
            try:
                summary = Runner(resolved, client).run()
            finally:
                client.close()
    except (JobFailed, InvocationError, StackStartError, StorageError) as error:
        logger.error("job failed: %s", error)
        return 1
    logger.info("job done: %s", summary.line())
    return 0


def _submit(job: TransformJob) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from sagemaker_tfs.transform.sagemaker_job import submit

    try:
        arn = submit(job)
    except (BotoCoreError, ClientError) as error:
        logger.error("submitting to SageMaker failed: %s", error)
        return 1
    logger.info("submitted %s", arn)
    return 0


def main(argv: Sequence[str]) -> int:
    _configure_logging()
    try:
        job = parse_args(argv)
    except JobConfigError as error:
        sys.stderr.write(f"sagemaker-tfs transform: {error}\n")
        return 2
    if job.on_sagemaker:
        return _submit(job)
    try:
        from sagemaker_tfs.transform.filters import FilterError, compile_path
    except ImportError:
        sys.stderr.write(MISSING_EXTRA + "\n")
        return 2
    try:
        for expression, option in (
            (job.input_filter, "--input-filter"),
            (job.output_filter, "--output-filter"),
        ):
            if expression:
                compile_path(expression, option)
    except FilterError as error:
        sys.stderr.write(f"sagemaker-tfs transform: {error}\n")
        return 2
    if not job.input.startswith("s3://") and not os.path.exists(job.input):
        option = "--manifest" if job.manifest else "--input"
        sys.stderr.write(f"sagemaker-tfs transform: {option} {job.input!r} does not exist\n")
        return 2  # before a stack is started for nothing
    return run_job(job)
