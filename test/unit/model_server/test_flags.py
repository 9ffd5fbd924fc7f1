"""Command line parsing as TF Serving's binary parses it: forms, types, defaults, leftovers,
value errors and the usage text."""

from __future__ import annotations

import dataclasses

import pytest
from sagemaker_tfs.container_limits import stack_cpus
from sagemaker_tfs.model_server.flags import (
    FLAGS,
    FLAGS_BY_NAME,
    ServerOptions,
    changed_runtime_flags,
    parse_command_line,
    usage,
)

# TF Serving 2.21's flags, in its order, with their types.
TF_SERVING_FLAGS = [
    ("port", "int32"), ("grpc_socket_path", "string"), ("rest_api_port", "int32"),
    ("rest_api_num_threads", "int32"), ("rest_api_timeout_in_ms", "int32"),
    ("rest_api_enable_cors_support", "bool"), ("enable_batching", "bool"),
    ("allow_version_labels_for_unavailable_models", "bool"),
    ("batching_parameters_file", "string"), ("enable_per_model_batching_parameters", "bool"),
    ("model_config_file", "string"), ("model_config_file_poll_wait_seconds", "int32"),
    ("model_name", "string"), ("model_base_path", "string"), ("num_load_threads", "int32"),
    ("num_unload_threads", "int32"), ("max_num_load_retries", "int32"),
    ("load_retry_interval_micros", "int64"), ("file_system_poll_wait_seconds", "int32"),
    ("flush_filesystem_caches", "bool"), ("tensorflow_session_parallelism", "int64"),
    ("tensorflow_session_config_file", "string"), ("tensorflow_intra_op_parallelism", "int64"),
    ("tensorflow_inter_op_parallelism", "int64"), ("use_alts_credentials", "bool"),
    ("ssl_config_file", "string"), ("platform_config_file", "string"),
    ("per_process_gpu_memory_fraction", "float"), ("saved_model_tags", "string"),
    ("grpc_channel_arguments", "string"), ("grpc_max_threads", "int32"),
    ("enable_model_warmup", "bool"), ("num_request_iterations_for_warmup", "int32"),
    ("version", "bool"), ("monitoring_config_file", "string"),
    ("remove_unused_fields_from_bundle_metagraph", "bool"), ("prefer_tflite_model", "bool"),
    ("num_tflite_pools", "int32"), ("num_tflite_interpreters_per_pool", "int32"),
    ("enable_signature_method_name_check", "bool"), ("xla_cpu_compilation_enabled", "bool"),
    ("xla_gpu_compilation_enabled", "bool"), ("enable_profiler", "bool"),
    ("thread_pool_factory_config_file", "string"), ("mixed_precision", "string"),
    ("skip_initialize_tpu", "bool"), ("enable_grpc_healthcheck_service", "bool"),
    ("enable_serialization_as_tensor_content", "bool"),
]  # fmt: skip


def options_of(argv: list[str]) -> ServerOptions:
    """The options of a command line the test means to be whole and right."""
    parsed = parse_command_line(argv)
    assert (parsed.errors, parsed.leftovers) == ([], [])
    return parsed.options


def test_every_tf_serving_flag_in_its_order_with_its_type() -> None:
    assert [(flag.name, flag.type) for flag in FLAGS] == TF_SERVING_FLAGS
    assert len(FLAGS) == 48


_PYTHON_TYPE_OF = {
    "int32": "int",
    "int64": "int",
    "bool": "bool",
    "string": "str",
    "float": "float",
}


def test_each_option_is_typed_as_its_flag_parses() -> None:
    """``ServerOptions`` is the one flags table: its fields are the flags in order, and each
    field's annotation (what mypy checks every use against) is the type its flag parses to."""
    fields = dataclasses.fields(ServerOptions)
    assert [field.name for field in fields] == [flag.name for flag in FLAGS]
    for field, flag in zip(fields, FLAGS, strict=True):
        assert field.type == _PYTHON_TYPE_OF[flag.type], flag.name
        python_type = {"int": int, "bool": bool, "str": str, "float": float}[str(field.type)]
        assert isinstance(getattr(ServerOptions(), flag.name), python_type), flag.name


def test_defaults_match_tf_serving() -> None:
    options = ServerOptions()
    cpus = stack_cpus()
    assert (options.port, options.rest_api_port, options.rest_api_timeout_in_ms) == (8500, 0, 30000)
    assert options.model_name == "default" and options.saved_model_tags == "serve"
    assert options.max_num_load_retries == 5 and options.load_retry_interval_micros == 60_000_000
    assert options.file_system_poll_wait_seconds == 1
    assert options.enable_model_warmup and options.flush_filesystem_caches
    assert options.enable_profiler and not options.enable_signature_method_name_check
    assert options.rest_api_num_threads == options.grpc_max_threads == 4 * cpus
    assert options.num_tflite_pools == cpus and options.num_tflite_interpreters_per_pool == 1
    assert options_of([]) == options


def test_only_the_equals_form_sets_a_value() -> None:
    """``--name value`` is two leftover words; the default stays in force."""
    parsed = parse_command_line(["--port=9000", "--rest_api_port", "9001", "--model_name", "m"])
    assert parsed.options.port == 9000
    assert parsed.options.rest_api_port == 0 and parsed.options.model_name == "default"
    assert parsed.leftovers == ["--rest_api_port", "9001", "--model_name", "m"]
    assert not parsed.errors


@pytest.mark.parametrize(
    ("args", "expected", "leftovers"),
    [
        (["--enable_batching"], True, []),
        (["--enable_batching=true"], True, []),
        (["--enable_batching=TRUE"], True, []),
        (["--enable_batching=1"], True, []),
        (["--enable_batching=false"], False, []),
        (["--enable_batching=0"], False, []),
        (["--enable_batching", "false"], True, ["false"]),  # a bare bool is true
        ([], False, []),
    ],
)
def test_boolean_forms(args: list[str], expected: bool, leftovers: list[str]) -> None:
    parsed = parse_command_line(args)
    assert parsed.options.enable_batching is expected
    assert parsed.leftovers == leftovers


@pytest.mark.parametrize(
    ("arg", "name", "value"),
    [
        ("--port= 42 ", "port", 42),
        ("--port=+7", "port", 7),
        ("--port=-1", "port", -1),
        ("--load_retry_interval_micros=9000000000", "load_retry_interval_micros", 9_000_000_000),
        ("--per_process_gpu_memory_fraction=0.5", "per_process_gpu_memory_fraction", 0.5),
        ("--per_process_gpu_memory_fraction=1e-1", "per_process_gpu_memory_fraction", 0.1),
        ("--model_name=", "model_name", ""),
        ("--grpc_channel_arguments=a=1,b=c", "grpc_channel_arguments", "a=1,b=c"),
    ],
)
def test_typed_values(arg: str, name: str, value: object) -> None:
    assert getattr(options_of([arg]), name) == value


@pytest.mark.parametrize(
    "arg",
    [
        "--port=abc",
        "--port=1.5",
        "--port=0x10",
        "--port=1_000",
        "--port=2147483648",
        "--enable_batching=maybe",
        "--enable_batching=yes",
        "--per_process_gpu_memory_fraction=half",
    ],
)
def test_bad_values_are_errors_naming_value_and_flag(arg: str) -> None:
    name, value = arg[2:].split("=", 1)
    parsed = parse_command_line(["--model_base_path=/p", arg])
    assert parsed.errors == [f"Couldn't interpret value {value} for flag {name}."]


def test_last_value_wins_and_double_dash_ends_the_flags() -> None:
    parsed = parse_command_line(["--port=1", "--port=2", "--", "--port=3", "x"])
    assert parsed.options.port == 2
    assert parsed.leftovers == ["--", "--port=3", "x"]


@pytest.mark.parametrize(
    ("args", "help_requested"),
    [
        (["--help"], True),
        (["--help", "--bogus"], True),
        (["--bogus", "--help"], False),
        (["-help"], False),
        (["-h"], False),
        (["--helpfull"], False),
    ],
)
def test_help_is_only_the_first_leftover(args: list[str], help_requested: bool) -> None:
    assert parse_command_line(args).help_requested is help_requested


def test_single_dash_and_unknown_names_are_leftovers() -> None:
    parsed = parse_command_line(["-port=1", "--Port=2", "--no_such_flag=1", "positional"])
    assert parsed.options.port == 8500
    assert parsed.leftovers == ["-port=1", "--Port=2", "--no_such_flag=1", "positional"]


def test_usage_lists_every_flag_with_default_and_type() -> None:
    text = usage("prog")
    lines = text.splitlines()
    assert lines[:2] == ["usage: prog", "Flags:"]
    assert len(lines) == 2 + len(FLAGS)
    assert lines[2].startswith("\t--port=8500                      \tint32\t")
    assert '\t--model_name="default"' in text
    assert "\t--enable_batching=false" in text
    assert "\t--per_process_gpu_memory_fraction=0.000000\tfloat\t" in text
    assert f"\t--rest_api_num_threads={4 * stack_cpus()}" in text


def test_runtime_only_flags_changed_from_their_default() -> None:
    options = options_of(["--xla_cpu_compilation_enabled", "--enable_profiler=false", "--port=1"])
    assert changed_runtime_flags(options) == ["xla_cpu_compilation_enabled", "enable_profiler"]
    assert changed_runtime_flags(ServerOptions()) == []
    assert FLAGS_BY_NAME["prefer_tflite_model"].runtime_only is False
    assert dataclasses.replace(options, port=7).port == 7
