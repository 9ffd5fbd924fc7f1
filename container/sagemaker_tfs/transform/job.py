"""The transform job: parsed and validated once from the command line into a ``TransformJob``.

Names and values follow ``CreateTransformJob``: SplitType ``None|Line|RecordIO|TFRecord``,
CompressionType ``None|Gzip``, BatchStrategy ``SingleRecord|MultiRecord``, AssembleWith
``None|Line``, JoinSource ``None|Input``, MaxPayloadInMB 0-100, MaxConcurrentTransforms >= 1,
InvocationsTimeoutInSeconds 1-3600, InvocationsMaxRetries 0-3. Values left unset are taken
from the container's ``GET /execution-parameters`` (``resolve``), as SageMaker does.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace

SPLIT_TYPES = ("None", "Line", "RecordIO", "TFRecord")
COMPRESSION_TYPES = ("None", "Gzip")
BATCH_STRATEGIES = ("SingleRecord", "MultiRecord")
ASSEMBLE_WITH = ("None", "Line")
JOIN_SOURCES = ("None", "Input")
MAX_PAYLOAD_LIMIT_MB = 100
DEFAULT_INVOCATIONS_TIMEOUT_SECONDS = 600
DEFAULT_INVOCATIONS_MAX_RETRIES = 3
DEFAULT_ACCEPT = "application/json"
# The container's /execution-parameters spelling -> CreateTransformJob's.
_CONTAINER_STRATEGIES = {"MULTI_RECORD": "MultiRecord", "SINGLE_RECORD": "SingleRecord"}
_JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")


class JobConfigError(ValueError):
    """The command line describes no valid job; the message says which option and why."""


@dataclass(frozen=True)
class SageMakerTarget:
    """``--on-sagemaker``: where and how to submit the same job to SageMaker."""

    role_arn: str
    image: str
    instance_type: str
    instance_count: int
    job_name: str | None


@dataclass(frozen=True)
class TransformJob:
    """One Batch Transform job. ``None`` fields are still to come from the container."""

    input: str
    output: str
    content_type: str
    model_dir: str | None = None
    endpoint: str | None = None
    manifest: bool = False
    accept: str | None = None
    split_type: str = "None"
    compression: str = "None"
    batch_strategy: str | None = None
    max_payload_mb: int | None = None
    max_concurrent_transforms: int | None = None
    assemble_with: str = "None"
    input_filter: str | None = None
    output_filter: str | None = None
    join_source: str = "None"
    invocations_timeout: int = DEFAULT_INVOCATIONS_TIMEOUT_SECONDS
    invocations_max_retries: int = DEFAULT_INVOCATIONS_MAX_RETRIES
    env: dict[str, str] = field(default_factory=dict)
    progress: str = "auto"
    on_sagemaker: SageMakerTarget | None = None

    @property
    def max_payload_bytes(self) -> int:
        """MaxPayloadInMB in bytes; 0 (no limit, SageMaker's chunked mode) counts as 100 MB."""
        mb = self.max_payload_mb or MAX_PAYLOAD_LIMIT_MB
        return mb * 1024 * 1024

    @property
    def has_data_processing(self) -> bool:
        return bool(self.input_filter or self.output_filter or self.join_source == "Input")

    @property
    def resolved(self) -> bool:
        return None not in (
            self.batch_strategy,
            self.max_payload_mb,
            self.max_concurrent_transforms,
        )

    def container_environment(self) -> dict[str, str]:
        """What SageMaker puts in the container's environment for this job (plus ``--env``)."""
        env = {"SAGEMAKER_BATCH": "true"}
        if self.max_concurrent_transforms is not None:
            env["SAGEMAKER_MAX_CONCURRENT_TRANSFORMS"] = str(self.max_concurrent_transforms)
        if self.batch_strategy is not None:
            env["SAGEMAKER_BATCH_STRATEGY"] = self.batch_strategy.upper().replace(
                "RECORD", "_RECORD"
            )
        if self.max_payload_mb is not None:
            env["SAGEMAKER_MAX_PAYLOAD_IN_MB"] = str(self.max_payload_mb)
        return {**env, **self.env}


def resolve(job: TransformJob, execution_parameters: dict[str, object] | None) -> TransformJob:
    """Fill the unset values from ``/execution-parameters`` (a value out of range there is
    ignored), then fixed defaults (MultiRecord, 6 MB, 1). The job's own values always win."""
    params = execution_parameters or {}
    strategy = job.batch_strategy or _CONTAINER_STRATEGIES.get(str(params.get("BatchStrategy")))
    payload = job.max_payload_mb
    if payload is None:
        payload = _bounded_int(params.get("MaxPayloadInMB"), 0, MAX_PAYLOAD_LIMIT_MB)
    concurrency = job.max_concurrent_transforms or _bounded_int(
        params.get("MaxConcurrentTransforms"), 1, 10_000
    )
    return replace(
        job,
        batch_strategy=strategy or "MultiRecord",
        max_payload_mb=6 if payload is None else payload,
        max_concurrent_transforms=concurrency or 1,
        accept=job.accept or DEFAULT_ACCEPT,
    )


def _bounded_int(value: object, low: int, high: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value


def _choice(name: str, choices: Sequence[str]):  # type: ignore[no-untyped-def]
    lowered = {c.lower(): c for c in choices}

    def parse(text: str) -> str:
        try:
            return lowered[text.lower()]
        except KeyError:
            raise argparse.ArgumentTypeError(
                f"{name} must be one of {', '.join(choices)}, got {text!r}"
            ) from None

    return parse


def _ranged(name: str, low: int, high: int | None = None):  # type: ignore[no-untyped-def]
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            bound = f"between {low} and {high}" if high is not None else f">= {low}"
            raise argparse.ArgumentTypeError(f"{name} must be {bound}, got {value}")
        return value

    return parse


def _env_pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise argparse.ArgumentTypeError(f"--env takes NAME=VALUE, got {text!r}")
    return name, value


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise JobConfigError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="sagemaker-tfs transform",
        description="Run a SageMaker Batch Transform job locally against the serving stack.",
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--model-dir",
        help="start the stack on these models (or, with --on-sagemaker, model.tar.gz's S3 URI)",
    )
    target.add_argument("--endpoint", help="a running stack or container, http://HOST:PORT")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", help="a file, a directory or an s3://bucket/prefix")
    source.add_argument("--manifest", help="a ManifestFile (local path or s3:// URI)")
    parser.add_argument("--output", required=True, help="a directory or an s3://bucket/prefix")
    parser.add_argument("--content-type", required=True)
    parser.add_argument("--accept", help=f"default {DEFAULT_ACCEPT}")
    parser.add_argument("--split-type", type=_choice("--split-type", SPLIT_TYPES), default="None")
    parser.add_argument(
        "--compression", type=_choice("--compression", COMPRESSION_TYPES), default="None"
    )
    parser.add_argument("--batch-strategy", type=_choice("--batch-strategy", BATCH_STRATEGIES))
    parser.add_argument("--max-payload-mb", type=_ranged("--max-payload-mb", 0, 100))
    parser.add_argument(
        "--max-concurrent-transforms", type=_ranged("--max-concurrent-transforms", 1, 1000)
    )
    parser.add_argument(
        "--assemble-with", type=_choice("--assemble-with", ASSEMBLE_WITH), default="None"
    )
    parser.add_argument("--input-filter")
    parser.add_argument("--output-filter")
    parser.add_argument(
        "--join-source", type=_choice("--join-source", JOIN_SOURCES), default="None"
    )
    parser.add_argument(
        "--invocations-timeout",
        type=_ranged("--invocations-timeout", 1, 3600),
        default=DEFAULT_INVOCATIONS_TIMEOUT_SECONDS,
    )
    parser.add_argument(
        "--invocations-max-retries",
        type=_ranged("--invocations-max-retries", 0, 3),
        default=DEFAULT_INVOCATIONS_MAX_RETRIES,
    )
    parser.add_argument(
        "--env",
        type=_env_pair,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="container environment (repeatable)",
    )
    parser.add_argument("--progress", choices=("auto", "bar", "log", "none"), default="auto")
    _add_sagemaker_arguments(parser)
    return parser


def _add_sagemaker_arguments(parser: argparse.ArgumentParser) -> None:
    sagemaker = parser.add_argument_group("SageMaker (submit instead of running here)")
    sagemaker.add_argument("--on-sagemaker", metavar="ROLE_ARN")
    sagemaker.add_argument("--image", help="the serving image URI in ECR")
    sagemaker.add_argument("--instance-type", default="ml.m5.xlarge")
    sagemaker.add_argument("--instance-count", type=_ranged("--instance-count", 1), default=1)
    sagemaker.add_argument("--job-name", help="default: sagemaker-tfs-transform-<time>")


def parse_args(argv: Sequence[str]) -> TransformJob:
    """The job the command line describes; raises ``JobConfigError`` naming the bad option."""
    try:
        args = build_parser().parse_args(list(argv))
    except argparse.ArgumentTypeError as error:  # pragma: no cover - argparse reports these
        raise JobConfigError(str(error)) from None
    on_sagemaker = None
    if args.on_sagemaker:
        on_sagemaker = _sagemaker_target(args)
    elif args.image:
        raise JobConfigError("--image is only used with --on-sagemaker ROLE_ARN")
    # The options that are not passed on as they are; every other field is its option's value.
    given = {
        "input": args.manifest or args.input,
        "manifest": args.manifest is not None,
        "endpoint": args.endpoint.rstrip("/") if args.endpoint else None,
        "env": dict(args.env),
        "on_sagemaker": on_sagemaker,
    }
    as_given = {option.name: getattr(args, option.name) for option in fields(TransformJob)}
    job = TransformJob(**{**as_given, **given})
    validate(job)
    return job


def _sagemaker_target(args: argparse.Namespace) -> SageMakerTarget:
    if not args.image:
        raise JobConfigError("--on-sagemaker needs --image URI (the serving image in ECR)")
    if not args.model_dir or not args.model_dir.startswith("s3://"):
        raise JobConfigError("--on-sagemaker needs --model-dir s3://BUCKET/KEY/model.tar.gz")
    if args.job_name and not _JOB_NAME.match(args.job_name):
        raise JobConfigError(f"--job-name {args.job_name!r}: 1-63 of [a-zA-Z0-9-], no leading -")
    return SageMakerTarget(
        role_arn=args.on_sagemaker,
        image=args.image,
        instance_type=args.instance_type,
        instance_count=args.instance_count,
        job_name=args.job_name,
    )


def validate(job: TransformJob) -> None:
    """Combinations SageMaker refuses, refused here too with the same reasoning."""
    if job.endpoint and not re.match(r"^https?://[^/]+", job.endpoint):
        raise JobConfigError(f"--endpoint must be http://HOST:PORT, got {job.endpoint!r}")
    if job.on_sagemaker:
        for name, uri in (("--input/--manifest", job.input), ("--output", job.output)):
            if not uri.startswith("s3://"):
                raise JobConfigError(f"--on-sagemaker needs {name} as an s3:// URI, got {uri!r}")
    if job.has_data_processing and job.split_type not in ("Line", "None"):
        raise JobConfigError(
            "--input-filter/--output-filter/--join-source work on JSON or CSV records: "
            f"use --split-type Line or None, not {job.split_type}"
        )
    if job.join_source == "Input" and job.assemble_with != "Line" and job.split_type == "Line":
        raise JobConfigError(
            "--join-source Input with --split-type Line needs --assemble-with Line"
        )
