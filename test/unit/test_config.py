"""StackConfig parsing: every variable of README.md's table, its default and its errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cgroup_trees import hybrid, legacy, unified
from sagemaker_tfs import config
from sagemaker_tfs.config import load_config
from sagemaker_tfs.container_limits import cpu_count
from sagemaker_tfs.env_reader import ConfigError
from sagemaker_tfs.model_discovery import ModelSpec, discover_models
from sagemaker_tfs.ports import Instance, PortRange
from sagemaker_tfs.settings import BatchingConfig
from sagemaker_tfs.stack_config import StackConfig
from stack_configs import EVERY_VARIABLE, StackConfigBuilder, make_model


def test_defaults(stack_config: StackConfigBuilder) -> None:
    cfg = stack_config(work_dir=None)
    model_dir = stack_config.model_dir
    assert cfg.port == 8080
    assert cfg.work.root == "/tmp/sagemaker-tfs"
    assert not cfg.multi_model.enabled
    assert cfg.models == (ModelSpec("half_plus_three", str(model_dir / "half_plus_three"), (123,)),)
    assert cfg.default_model == "half_plus_three"
    assert cfg.code_dir is None
    assert cfg.instances == (Instance(9000, 8501),)
    assert cfg.safe_port_range is None
    assert cfg.nginx.log_level == "error"
    assert cfg.nginx.proxy_read_timeout == 60
    assert (cfg.service.workers, cfg.service.threads) == (1, 1)
    assert cfg.service.worker_class == "gevent"
    assert cfg.service.timeout == 30
    assert cfg.service.log_level == "info"
    assert cfg.model_servers.batching is None
    assert (cfg.model_servers.inter_op_parallelism, cfg.model_servers.intra_op_parallelism) == (
        2,
        2,
    )  # the CPUs
    assert cfg.cpus == 2
    assert cfg.model_servers.gpu_memory_fraction is None
    assert cfg.model_servers.wait_time_seconds == 300
    assert not cfg.batch.enabled
    assert cfg.batch.max_concurrent_transforms is None
    assert cfg.batch.strategy is None
    assert cfg.batch.max_payload_in_mb is None
    assert cfg.multi_model.universal_bucket is None and cfg.multi_model.universal_prefix is None
    assert cfg.model_servers.omp_num_threads == "1"
    assert cfg.work.service_socket == "/tmp/sagemaker-tfs/gunicorn.sock"
    assert cfg.work.control_socket == "/tmp/sagemaker-tfs/supervisor.sock"
    assert cfg.model_servers.standby
    assert (cfg.service.image_scale, cfg.service.image_offset) == (1.0, 0.0)
    assert cfg.model_servers.timeout == 60
    assert (cfg.limits.max_body_mb, cfg.limits.max_text_body_mb) == (1024, 100)
    assert (cfg.sessions.enabled, cfg.sessions.ttl_seconds, cfg.sessions.max_sessions) == (
        False,
        1200,
        1000,
    )


def test_image_default_model_dirs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without ``--model-dir``, SageMaker's directories; here stand-ins for them, so that the
    host's own /opt/ml (if any) changes nothing."""
    assert (config.DEFAULT_MODEL_DIR, config.DEFAULT_MULTI_MODEL_DIR) == (
        "/opt/ml/model",
        "/opt/ml/models",
    )
    single, multi = tmp_path / "opt_ml_model", tmp_path / "opt_ml_models"
    monkeypatch.setattr(config, "DEFAULT_MODEL_DIR", str(single))
    monkeypatch.setattr(config, "DEFAULT_MULTI_MODEL_DIR", str(multi))
    with pytest.raises(ConfigError, match=f"no model found in {single}:"):
        load_config({})
    with pytest.raises(ConfigError, match=f"{multi} does not exist"):
        load_config({"SAGEMAKER_MULTI_MODEL": "true"})
    make_model(single / "half_plus_three")
    multi.mkdir()
    assert load_config({}).model_dir == str(single)
    assert load_config({"SAGEMAKER_MULTI_MODEL": "true"}).model_dir == str(multi)


def test_relative_model_dir_is_made_absolute(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``serve --model-dir test/resources/models`` (the README's form): the model servers take
    only absolute base paths, so the models, code and root are given as absolute paths."""
    make_model(tmp_path / "models" / "half_plus_three")
    (tmp_path / "models" / "code").mkdir()
    (tmp_path / "models" / "code" / "inference.py").write_text("def handler(d, c):\n    pass\n")
    monkeypatch.chdir(tmp_path)
    cfg = load_config({}, model_dir="models")
    assert cfg.model_dir == str(tmp_path / "models")
    assert cfg.models[0].base_path == str(tmp_path / "models" / "half_plus_three")
    assert cfg.code_dir == str(tmp_path / "models" / "code")


def test_overrides(stack_config: StackConfigBuilder, tmp_path: Path) -> None:
    cfg = stack_config({"SAGEMAKER_BIND_TO_PORT": "9999"}, work_dir=str(tmp_path / "w"))
    assert cfg.port == 9999
    assert cfg.work.root == str(tmp_path / "w")
    assert cfg.work.service_socket == str(tmp_path / "w" / "gunicorn.sock")
    assert stack_config({"SAGEMAKER_BIND_TO_PORT": "9999"}, port=7000).port == 7000


def test_every_variable(stack_config: StackConfigBuilder) -> None:
    cfg = stack_config(EVERY_VARIABLE)
    assert cfg.safe_port_range == PortRange(20000, 20010)
    assert cfg.instances == (Instance(20000, 20001), Instance(20002, 20003))
    assert cfg.nginx.log_level == "info"
    assert cfg.nginx.proxy_read_timeout == 120
    assert (cfg.service.workers, cfg.service.threads) == (3, 4)
    assert cfg.service.worker_class == "gthread"
    assert cfg.service.timeout == 45
    assert cfg.service.log_level == "debug"
    assert (cfg.model_servers.inter_op_parallelism, cfg.model_servers.intra_op_parallelism) == (
        2,
        3,
    )
    assert cfg.model_servers.wait_time_seconds == 10
    assert cfg.batch.enabled
    assert cfg.batch.max_concurrent_transforms == 5
    assert cfg.batch.strategy == "SINGLE_RECORD"
    assert cfg.batch.max_payload_in_mb == 0
    assert (cfg.multi_model.universal_bucket, cfg.multi_model.universal_prefix) == (
        "bucket",
        "prefix/",
    )
    assert cfg.model_servers.omp_num_threads == "4"
    assert not cfg.model_servers.standby
    assert (cfg.service.image_scale, cfg.service.image_offset) == (0.0078125, -1.0)
    assert (cfg.metrics.enabled, cfg.metrics.path) == (False, "/stack/metrics")
    assert (cfg.nginx.access_log, cfg.nginx.access_log_all) == ("json", True)
    assert cfg.model_servers.timeout == 900
    assert (cfg.limits.max_body_mb, cfg.limits.max_text_body_mb) == (300, 50)
    assert (cfg.stream.max_message_mb, cfg.stream.max_message_bytes) == (2, 2 << 20)
    assert (cfg.stream.idle_timeout, cfg.stream.max_connections) == (30, 7)
    assert cfg.stream.keepalive == 0  # no pings from the stream server
    assert (cfg.sessions.enabled, cfg.sessions.ttl_seconds, cfg.sessions.max_sessions) == (
        True,
        30,
        7,
    )
    assert cfg.work.session_socket(2) == os.path.join(cfg.work.root, "session-2.sock")


def test_stream_defaults_and_socket(stack_config: StackConfigBuilder) -> None:
    cfg = stack_config()
    assert (cfg.stream.max_message_mb, cfg.stream.idle_timeout) == (16, 300)
    assert (cfg.stream.max_connections, cfg.stream.keepalive) == (200, 20)
    assert cfg.work.stream_socket == str(Path(cfg.work.root) / "stream.sock")
    assert StackConfig.from_dict(json.loads(cfg.to_json())) == cfg


@pytest.mark.parametrize(
    "name",
    [
        "SAGEMAKER_TFS_STREAM_MAX_MESSAGE_MB",
        "SAGEMAKER_TFS_STREAM_IDLE_TIMEOUT_SECONDS",
        "SAGEMAKER_TFS_STREAM_MAX_CONNECTIONS",
    ],
)
def test_stream_limits_must_be_positive_integers(
    stack_config: StackConfigBuilder, name: str
) -> None:
    for value in ("0", "ten"):
        with pytest.raises(ConfigError, match=name):
            stack_config({name: value})


def test_the_stream_keepalive_is_a_whole_number_of_seconds(
    stack_config: StackConfigBuilder,
) -> None:
    for value in ("-1", "ten", "1.5"):
        with pytest.raises(ConfigError, match="SAGEMAKER_TFS_STREAM_KEEPALIVE_SECONDS"):
            stack_config({"SAGEMAKER_TFS_STREAM_KEEPALIVE_SECONDS": value})


@pytest.mark.parametrize(
    ("ours", "aws", "on"),
    [(None, None, False), ("true", None, True), (None, "true", True), ("false", "true", True),
     ("true", "false", True), ("false", "false", False)],
)  # fmt: skip
def test_sessions_are_on_when_either_variable_says_so(
    stack_config: StackConfigBuilder, ours: str | None, aws: str | None, on: bool
) -> None:
    env = {"SAGEMAKER_TFS_SESSIONS": ours, "SAGEMAKER_ENABLE_STATEFUL_SESSIONS": aws}
    assert stack_config({k: v for k, v in env.items() if v is not None}).sessions.enabled is on


def test_session_sockets_must_fit_a_socket_address(stack_config: StackConfigBuilder) -> None:
    deep = "/tmp/" + "w" * 100
    with pytest.raises(ConfigError, match="SAGEMAKER_TFS_SESSIONS needs a shorter work dir"):
        stack_config({"SAGEMAKER_TFS_SESSIONS": "true"}, work_dir=deep)
    assert not stack_config({}, work_dir=deep).sessions.enabled


def test_default_ports_step_by_two_per_instance(stack_config: StackConfigBuilder) -> None:
    cfg = stack_config({"SAGEMAKER_TFS_INSTANCE_COUNT": "3"})
    assert cfg.instances == (Instance(9000, 8501), Instance(9002, 8503), Instance(9004, 8505))


def test_default_ports_pass_over_the_public_port(stack_config: StackConfigBuilder) -> None:
    env = {"SAGEMAKER_BIND_TO_PORT": "8501", "SAGEMAKER_TFS_INSTANCE_COUNT": "2"}
    assert stack_config(env).instances == (Instance(9000, 8503), Instance(9002, 8505))
    env = {"SAGEMAKER_TFS_INSTANCE_COUNT": "3"}
    assert stack_config(env, port=9002).instances == (
        Instance(9000, 8501),
        Instance(9004, 8503),
        Instance(9006, 8505),
    )


def test_port_range_skips_the_public_port(stack_config: StackConfigBuilder) -> None:
    cfg = stack_config({"SAGEMAKER_SAFE_PORT_RANGE": "7000-7002"}, port=7000)
    assert cfg.instances == (Instance(7001, 7002),)


def test_port_range_too_small(stack_config: StackConfigBuilder) -> None:
    env = {"SAGEMAKER_SAFE_PORT_RANGE": "7000-7002", "SAGEMAKER_TFS_INSTANCE_COUNT": "2"}
    with pytest.raises(ConfigError, match="room for 1 model server.*asks for 2"):
        stack_config(env)


def test_proxy_read_timeout_raised_to_gunicorn_timeout(stack_config: StackConfigBuilder) -> None:
    env = {
        "SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS": "10",
        "SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "90",
    }
    assert stack_config(env).nginx.proxy_read_timeout == 90


def timeouts(cfg: StackConfig) -> tuple[int, int, int]:
    return cfg.nginx.proxy_read_timeout, cfg.service.timeout, cfg.model_servers.timeout


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, (60, 30, 60)),
        ({"SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS": "300"}, (300, 30, 300)),
        ({"SAGEMAKER_MODEL_SERVER_TIMEOUT": "3600"}, (3605, 3600, 3600)),
        ({"SAGEMAKER_BATCH": "true"}, (605, 600, 600)),
        ({"SAGEMAKER_BATCH": "true", "SAGEMAKER_MODEL_SERVER_TIMEOUT": "20"}, (25, 20, 20)),
        (
            {
                "SAGEMAKER_MODEL_SERVER_TIMEOUT": "3600",
                "SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "120",
                "SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS": "200",
            },
            (200, 120, 3600),
        ),
        (
            {"SAGEMAKER_MODEL_SERVER_TIMEOUT": "10", "SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "100"},
            (100, 100, 10),
        ),
    ],
)
def test_one_variable_sets_every_timeout(
    stack_config: StackConfigBuilder, env: dict[str, str], expected: tuple[int, int, int]
) -> None:
    """nginx, gunicorn, model server: SAGEMAKER_MODEL_SERVER_TIMEOUT (else Batch's 600 s) for
    all three, nginx 5 s longer; the variable of nginx or gunicorn still wins for its own."""
    assert timeouts(stack_config(env)) == expected


@pytest.mark.parametrize(
    ("env", "limits"),
    [
        ({}, (1024, 100)),
        ({"SAGEMAKER_TFS_MAX_BODY_MB": "10"}, (10, 10)),
        ({"SAGEMAKER_TFS_MAX_TEXT_BODY_MB": "2"}, (1024, 2)),
        (
            {"SAGEMAKER_TFS_MAX_BODY_MB": "4096", "SAGEMAKER_TFS_MAX_TEXT_BODY_MB": "500"},
            (4096, 500),
        ),
    ],
)
def test_body_limits(
    stack_config: StackConfigBuilder, env: dict[str, str], limits: tuple[int, int]
) -> None:
    cfg = stack_config(env)
    assert (cfg.limits.max_body_mb, cfg.limits.max_text_body_mb) == limits
    assert cfg.limits.max_text_body_bytes == limits[1] << 20


def test_batching_defaults(stack_config: StackConfigBuilder) -> None:
    cfg = stack_config({"SAGEMAKER_TFS_ENABLE_BATCHING": "true"}, cpu_count=6)
    assert cfg.model_servers.batching == BatchingConfig(8, 1000, 6, 6)
    env = {"SAGEMAKER_TFS_ENABLE_BATCHING": "TRUE", "SAGEMAKER_BATCH": "true"}
    assert stack_config(env, cpu_count=6).model_servers.batching == BatchingConfig(
        8, 1000, 6, 100000000
    )
    assert stack_config({"SAGEMAKER_TFS_ENABLE_BATCHING": "false"}).model_servers.batching is None


@pytest.mark.parametrize(
    ("layout", "quota", "affinity", "expected"),
    [
        ("v2", "100000 100000", 8, 1),  # docker run --cpus 1 on an 8-core machine
        ("v2", "250000 100000", 8, 3),  # --cpus 2.5, rounded up
        ("v2", "max 100000", 8, 8),
        ("v2", "400000 100000", 2, 2),  # taskset to 2 cores inside a 4-CPU quota
        ("v1", "100000 100000", 8, 1),
        ("hybrid", "200000 100000", 8, 2),
    ],
)
def test_cpu_defaults_follow_the_detected_count(
    tmp_path: Path, layout: str, quota: str, affinity: int, expected: int
) -> None:
    """Every default README's table calls "CPUs" is the count read from the cgroup files and
    the affinity mask, not the machine's cores (16 here)."""
    if layout == "v2":
        tree = unified(tmp_path / "root").write("/sys/fs/cgroup", cpu_max=quota)
    else:
        quota_us, period_us = quota.split()
        tree = (legacy if layout == "v1" else hybrid)(tmp_path / "root").write(
            "/sys/fs/cgroup/cpu,cpuacct", cpu_cfs_quota_us=quota_us, cpu_cfs_period_us=period_us
        )
    cpus = cpu_count(tree.view(), affinity=lambda: affinity, machine=lambda: 16)
    models = tmp_path / "models"
    make_model(models / "m", "1")
    env = {"SAGEMAKER_TFS_ENABLE_BATCHING": "true"}
    cfg = load_config(env, model_dir=str(models), work_dir=str(tmp_path / "w"), cpus=cpus)
    assert cfg.cpus == expected
    assert cfg.model_servers.batching == BatchingConfig(8, 1000, expected, expected)
    assert (cfg.model_servers.inter_op_parallelism, cfg.model_servers.intra_op_parallelism) == (
        expected,
        expected,
    )
    zeros = {"SAGEMAKER_TFS_INTER_OP_PARALLELISM": "0", "SAGEMAKER_TFS_INTRA_OP_PARALLELISM": "0"}
    cfg = load_config(zeros, model_dir=str(models), work_dir=str(tmp_path / "w"), cpus=cpus)
    assert (cfg.model_servers.inter_op_parallelism, cfg.model_servers.intra_op_parallelism) == (
        expected,
        expected,
    )


def test_batching_values(stack_config: StackConfigBuilder) -> None:
    env = {
        "SAGEMAKER_TFS_ENABLE_BATCHING": "true",
        "SAGEMAKER_TFS_MAX_BATCH_SIZE": "32",
        "SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS": "0",
        "SAGEMAKER_TFS_NUM_BATCH_THREADS": "2",
        "SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES": "77",
    }
    assert stack_config(env).model_servers.batching == BatchingConfig(32, 0, 2, 77)


def test_gpu_fraction_only_with_several_instances_on_a_gpu(
    stack_config: StackConfigBuilder,
) -> None:
    env = {"SAGEMAKER_TFS_INSTANCE_COUNT": "2", "SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN": "0.4"}
    assert stack_config(env, has_gpu=lambda: True).model_servers.gpu_memory_fraction == 0.3
    assert stack_config(env, has_gpu=lambda: False).model_servers.gpu_memory_fraction is None
    one = {"SAGEMAKER_TFS_INSTANCE_COUNT": "1"}
    assert stack_config(one, has_gpu=lambda: True).model_servers.gpu_memory_fraction is None
    two = {"SAGEMAKER_TFS_INSTANCE_COUNT": "2"}
    assert stack_config(two, has_gpu=lambda: True).model_servers.gpu_memory_fraction == 0.4


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("SAGEMAKER_TFS_ENABLE_BATCHING", "yes", "must be 'true' or 'false', got 'yes'"),
        ("SAGEMAKER_TFS_ENABLE_BATCHING", "1", "must be 'true' or 'false', got '1'"),
        ("SAGEMAKER_MULTI_MODEL", "on", "must be 'true' or 'false'"),
        ("SAGEMAKER_BATCH", "maybe", "must be 'true' or 'false'"),
        ("SAGEMAKER_BIND_TO_PORT", "http", "must be a port number, got 'http'"),
        ("SAGEMAKER_BIND_TO_PORT", "70000", "between 1 and 65535, got '70000'"),
        ("SAGEMAKER_SAFE_PORT_RANGE", "9000", "must look like LOW-HIGH"),
        ("SAGEMAKER_SAFE_PORT_RANGE", "a-b", "must look like LOW-HIGH"),
        ("SAGEMAKER_SAFE_PORT_RANGE", "9999-9000", "LOW <= HIGH"),
        ("SAGEMAKER_SAFE_PORT_RANGE", "0-10", "between 1 and 65535"),
        ("SAGEMAKER_TFS_INSTANCE_COUNT", "0", "must be a positive integer, got '0'"),
        ("SAGEMAKER_TFS_INSTANCE_COUNT", "two", "must be an integer, got 'two'"),
        ("SAGEMAKER_GUNICORN_WORKERS", "-1", "must be a positive integer"),
        ("SAGEMAKER_GUNICORN_THREADS", "1.5", "must be an integer"),
        ("SAGEMAKER_GUNICORN_TIMEOUT_SECONDS", "0", "must be a positive integer"),
        ("SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS", "x", "must be an integer"),
        ("SAGEMAKER_MODEL_SERVER_TIMEOUT", "0", "must be a positive integer, got '0'"),
        ("SAGEMAKER_MODEL_SERVER_TIMEOUT", "1h", "must be an integer, got '1h'"),
        ("SAGEMAKER_TFS_MAX_BODY_MB", "0", "must be a positive integer"),
        ("SAGEMAKER_TFS_MAX_TEXT_BODY_MB", "1.5", "must be an integer"),
        ("SAGEMAKER_GUNICORN_WORKER_CLASS", "gevent; rm", "is not a class name"),
        ("SAGEMAKER_GUNICORN_LOGLEVEL", "loud", "must be one of debug, info"),
        ("SAGEMAKER_TFS_NGINX_LOGLEVEL", "verbose", "must be one of debug, info, notice"),
        ("SAGEMAKER_TFS_INTER_OP_PARALLELISM", "-2", "must be an integer >= 0"),
        ("SAGEMAKER_TFS_INTRA_OP_PARALLELISM", "many", "must be an integer"),
        ("SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN", "1.5", "must be >= 0 and < 1"),
        ("SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN", "lots", "must be a number"),
        ("SAGEMAKER_TFS_WAIT_TIME_SECONDS", "0", "must be a positive integer"),
        ("SAGEMAKER_MAX_CONCURRENT_TRANSFORMS", "0", "must be a positive integer"),
        ("SAGEMAKER_MAX_PAYLOAD_IN_MB", "-1", "must be an integer >= 0"),
        ("SAGEMAKER_BATCH_STRATEGY", "ALL", "must be one of MULTI_RECORD, SINGLE_RECORD"),
        ("SAGEMAKER_TFS_DEFAULT_MODEL_NAME", "missing", "'missing' is not one of the models"),
        ("SAGEMAKER_TFS_IMAGE_SCALE", "abc", "must be a number, got 'abc'"),
        ("SAGEMAKER_TFS_IMAGE_OFFSET", "nan", "must be a finite number, got 'nan'"),
        ("SAGEMAKER_TFS_METRICS", "yes", "must be 'true' or 'false'"),
        ("SAGEMAKER_TFS_METRICS_PATH", "metrics", "must be a path like /metrics"),
        ("SAGEMAKER_TFS_METRICS_PATH", "/a b", "must be a path like /metrics"),
        ("SAGEMAKER_TFS_METRICS_PATH", "/a/../ping", "must be a path like /metrics"),
        ("SAGEMAKER_TFS_METRICS_PATH", "/a;deny", "must be a path like /metrics"),
        ("SAGEMAKER_TFS_METRICS_PATH", "/ping", "must not be one of the stack's own paths"),
        (
            "SAGEMAKER_TFS_METRICS_PATH",
            "/models/metrics",
            "must not be one of the stack's own paths",
        ),
        ("SAGEMAKER_TFS_ACCESS_LOG", "yes", "must be one of off, text, json"),
        (
            "SAGEMAKER_TFS_METRICS_PATH",
            "/invocations-bidirectional-stream",
            "must not be one of the stack's own paths",
        ),
        ("SAGEMAKER_TFS_ACCESS_LOG_ALL", "1", "must be 'true' or 'false'"),
        ("SAGEMAKER_TFS_SESSIONS", "on", "must be 'true' or 'false'"),
        ("SAGEMAKER_ENABLE_STATEFUL_SESSIONS", "1", "must be 'true' or 'false'"),
        ("SAGEMAKER_TFS_SESSION_TTL_SECONDS", "0", "must be a positive integer"),
        ("SAGEMAKER_TFS_MAX_SESSIONS", "many", "must be an integer"),
    ],
)
def test_errors_name_the_variable_and_value(
    stack_config: StackConfigBuilder, name: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=name) as error:
        stack_config({name: value})
    assert message in str(error.value)


@pytest.mark.parametrize(
    "name",
    [
        "SAGEMAKER_TFS_MAX_BATCH_SIZE",
        "SAGEMAKER_TFS_NUM_BATCH_THREADS",
        "SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES",
    ],
)
def test_batching_integers_must_be_positive(stack_config: StackConfigBuilder, name: str) -> None:
    env = {"SAGEMAKER_TFS_ENABLE_BATCHING": "true", name: "0"}
    with pytest.raises(ConfigError, match=f"{name} must be a positive integer, got '0'"):
        stack_config(env)
    with pytest.raises(ConfigError, match="SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS"):
        stack_config(
            {"SAGEMAKER_TFS_ENABLE_BATCHING": "true", "SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS": "-5"},
        )


def test_port_override_is_validated(stack_config: StackConfigBuilder) -> None:
    with pytest.raises(ConfigError, match="--port must be a port number between"):
        stack_config(port=0)


def test_discovery_several_models_side_by_side(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    make_model(tmp_path / "b_model", "1", "2")
    make_model(tmp_path / "a_model", "00000123")
    make_model(tmp_path / ".hidden", "1")
    make_model(tmp_path / "code", "1")
    (tmp_path / "not_a_model" / "abc").mkdir(parents=True)
    (tmp_path / "no_pb" / "1").mkdir(parents=True)
    assert [m.name for m in discover_models(str(tmp_path))] == ["a_model", "b_model"]
    assert [m.versions for m in discover_models(str(tmp_path))] == [(123,), (1, 2)]
    cfg = stack_config(model_dir=tmp_path)
    assert cfg.default_model == "a_model"
    chosen = stack_config(model_dir=tmp_path, env={"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "b_model"})
    assert chosen.default_model == "b_model"


def test_discovery_bare_version_dir_takes_the_dir_name(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    root = make_model(tmp_path / "my_model", "123")
    (root / "code").mkdir()
    cfg = stack_config(model_dir=root)
    assert cfg.models == (ModelSpec("my_model", str(root), (123,)),)
    assert cfg.code_dir == str(root / "code")


def test_discovery_ignores_hidden_and_non_numeric_versions(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    make_model(tmp_path / "m", ".1", "v2")
    with pytest.raises(ConfigError, match="no model found in"):
        stack_config(model_dir=tmp_path)


def test_multi_model_starts_with_no_models(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    make_model(tmp_path / "ignored", "1")
    cfg = stack_config(
        model_dir=tmp_path,
        env={"SAGEMAKER_MULTI_MODEL": "true", "SAGEMAKER_TFS_INSTANCE_COUNT": "2"},
    )
    assert cfg.multi_model.enabled and not cfg.multi_model.server_per_model
    assert cfg.models == () and cfg.default_model is None
    # the shared model servers have their ports from the start, one pair per instance
    assert cfg.instances == (Instance(9000, 8501), Instance(9002, 8503))


def test_multi_model_runs_two_shared_model_servers_unless_told(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    multi = {"SAGEMAKER_MULTI_MODEL": "true"}
    assert len(stack_config(model_dir=tmp_path, env=multi).instances) == 2
    one = {**multi, "SAGEMAKER_TFS_INSTANCE_COUNT": "1"}
    assert len(stack_config(model_dir=tmp_path, env=one).instances) == 1
    assert len(stack_config({}).instances) == 1  # a single model: one model server


def test_multi_model_with_a_model_server_per_model(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    env = {
        "SAGEMAKER_MULTI_MODEL": "true",
        "SAGEMAKER_TFS_INSTANCE_COUNT": "2",
        "SAGEMAKER_TFS_MODEL_SERVER_PER_MODEL": "true",
    }
    cfg = stack_config(model_dir=tmp_path, env=env)
    assert cfg.multi_model.server_per_model and cfg.instances == ()  # ports come with each load
    single = stack_config({"SAGEMAKER_TFS_MODEL_SERVER_PER_MODEL": "true"})
    assert not single.multi_model.server_per_model  # means nothing outside multi-model
    with pytest.raises(ConfigError, match="SAGEMAKER_TFS_MODEL_SERVER_PER_MODEL"):
        stack_config({"SAGEMAKER_TFS_MODEL_SERVER_PER_MODEL": "maybe"})


def test_json_round_trip(stack_config: StackConfigBuilder, tmp_path: Path) -> None:
    env = {"SAGEMAKER_TFS_ENABLE_BATCHING": "true", "SAGEMAKER_SAFE_PORT_RANGE": "9100-9200"}
    cfg = stack_config(env, work_dir=str(tmp_path))
    path = tmp_path / "stack.json"
    path.write_text(cfg.to_json())
    assert StackConfig.load(path) == cfg
    assert cfg.work.stack_config_path == str(path)


def test_stack_config_keeps_model_versions(stack_config: StackConfigBuilder) -> None:
    config = stack_config()
    assert config.models[0].versions == (123,)
    assert StackConfig.from_dict(json.loads(config.to_json())) == config


def test_admission_bound_and_invocation_timeout(stack_config: StackConfigBuilder) -> None:
    """32 invocations per CPU, at least 64; 0 turns the bound off; a negative is refused.
    The invocation timeout is SAGEMAKER_MODEL_SERVER_TIMEOUT, else nginx's read timeout."""
    bounds = [
        stack_config({}, cpu_count=cpus).limits.max_concurrent_invocations for cpus in (1, 2, 3, 8)
    ]
    assert bounds == [64, 64, 96, 256]
    variable = "SAGEMAKER_TFS_MAX_CONCURRENT_INVOCATIONS"
    assert stack_config({variable: "0"}).limits.max_concurrent_invocations == 0
    assert stack_config({variable: "500"}).limits.max_concurrent_invocations == 500
    with pytest.raises(ConfigError, match=variable):
        stack_config({variable: "-1"})
    assert stack_config({}).invocation_timeout == 60
    assert (
        stack_config({"SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS": "90"}).invocation_timeout == 90
    )
    assert stack_config({"SAGEMAKER_MODEL_SERVER_TIMEOUT": "7"}).invocation_timeout == 7


def test_body_budget(stack_config: StackConfigBuilder) -> None:
    """64 MB of large bodies in flight per CPU; 0 turns the bound off; a negative is refused."""
    budgets = [stack_config({}, cpu_count=cpus).limits.max_body_mb_in_flight for cpus in (1, 2, 8)]
    assert budgets == [64, 128, 512]
    variable = "SAGEMAKER_TFS_MAX_BODY_MB_IN_FLIGHT"
    assert stack_config({variable: "0"}).limits.max_body_mb_in_flight == 0
    assert stack_config({variable: "1024"}).limits.max_body_mb_in_flight == 1024
    with pytest.raises(ConfigError, match=variable):
        stack_config({variable: "-1"})


def test_sched_policy(stack_config: StackConfigBuilder) -> None:
    """SCHED_OTHER ("normal") for the stack unless told "batch"; nothing else is taken."""
    variable = "SAGEMAKER_TFS_SCHED_POLICY"
    assert stack_config({}).sched_policy == "normal"
    assert stack_config({variable: "normal"}).sched_policy == "normal"
    assert stack_config({variable: "batch"}).sched_policy == "batch"
    for wrong in ("idle", "fifo", "BATCH"):
        with pytest.raises(ConfigError, match=f"{variable} must be one of batch, normal"):
            stack_config({variable: wrong})


def test_model_server_nice(stack_config: StackConfigBuilder) -> None:
    """The model servers run 10 below the rest of the stack unless told otherwise; 0-19."""
    variable = "SAGEMAKER_TFS_MODEL_SERVER_NICE"
    assert stack_config({}).model_servers.nice == 5
    assert stack_config({variable: "0"}).model_servers.nice == 0
    assert stack_config({variable: "19"}).model_servers.nice == 19
    for wrong in ("-1", "20", "low"):
        with pytest.raises(ConfigError, match=variable):
            stack_config({variable: wrong})
