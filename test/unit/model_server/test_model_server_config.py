"""Text-format ModelServerConfig: policies, labels and validation."""

from __future__ import annotations

import pytest
from sagemaker_tfs.model_server.errors import Code, ServingError
from sagemaker_tfs.model_server.flags import ServerOptions, parse_command_line
from sagemaker_tfs.model_server.model_server_config import (
    from_options,
    load_file,
    model_specs,
    parse_text,
)
from sagemaker_tfs.model_server.serving.version_dirs import list_versions

CONFIG = """
model_config_list: {
  config: {
    name: 'half_plus_three'
    base_path: '/opt/ml/model/half_plus_three'
    model_platform: 'tensorflow'
    model_version_policy: { specific: { versions: 123 versions: 124 } }
    version_labels { key: 'stable' value: 123 }
  }
  config: { name: 'all' base_path: '/a' model_platform: 'tensorflow'
            model_version_policy: { all: {} } }
  config: { name: 'latest2' base_path: '/b' model_platform: 'tensorflow'
            model_version_policy: { latest: { num_versions: 2 } } }
  config: { name: 'default' base_path: '/c' model_type: TENSORFLOW }
}
"""


def options_of(argv: list[str]) -> ServerOptions:
    """The options of a command line the test means to be whole and right."""
    parsed = parse_command_line(argv)
    assert (parsed.errors, parsed.leftovers) == ([], [])
    return parsed.options


def test_policies_and_labels() -> None:
    specs = {spec.name: spec for spec in model_specs(parse_text(CONFIG))}
    available = [1, 123, 124, 200]
    assert specs["half_plus_three"].policy.select(available) == [124, 123]
    assert specs["half_plus_three"].labels == {"stable": 123}
    assert specs["all"].policy.select(available) == [200, 124, 123, 1]
    assert specs["latest2"].policy.select(available) == [200, 124]
    assert specs["default"].policy.select(available) == [200]


def test_single_model_from_flags() -> None:
    config = from_options(options_of(["--model_name=m", "--model_base_path=/p"]))
    [spec] = model_specs(config)
    assert (spec.name, spec.base_path, spec.policy.kind) == ("m", "/p", "latest")


PLATFORM = "model_platform: 'tensorflow'"


@pytest.mark.parametrize(
    ("text", "code", "message"),
    [
        (
            f"model_config_list {{ config {{ name: 'a' {PLATFORM} }} }}",
            Code.INVALID_ARGUMENT,
            "Expected model a to have an absolute path or URI; got base_path()=",
        ),
        (
            f"model_config_list {{ config {{ name: 'a' base_path: 'rel/x' {PLATFORM} }} }}",
            Code.INVALID_ARGUMENT,
            "Expected model a to have an absolute path or URI; got base_path()=rel/x",
        ),
        (
            f"model_config_list {{ config {{ name: 'a' base_path: '/x' {PLATFORM} }}"
            f" config {{ name: 'a' base_path: '/y' {PLATFORM} }} }}",
            Code.INVALID_ARGUMENT,
            "Illegal to list model a multiple times in config list",
        ),
        (
            "model_config_list { config { name: 'a' base_path: '/x' } }",
            Code.FAILED_PRECONDITION,
            "Illegal setting neither ModelServerConfig::model_type (deprecated) nor "
            "ModelServerConfig::model_platform, model name is a",
        ),
        (
            "model_config_list { config { name: 'a' base_path: '/x' model_platform: 'onnx' } }",
            Code.INVALID_ARGUMENT,
            "Model a requests unsupported platform onnx",
        ),
    ],
)
def test_invalid_configs(text: str, code: Code, message: str) -> None:
    with pytest.raises(ServingError) as caught:
        model_specs(parse_text(text))
    assert caught.value.code == code
    assert caught.value.message == message


def test_unparsable_text_logs_tf_servings_line(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ServingError) as caught:
        parse_text("model_config_list {\n  config { nme: 'a' }\n}")
    assert caught.value.code == Code.INVALID_ARGUMENT
    [record] = caplog.records
    assert record.getMessage().startswith(
        "Error parsing text-format tensorflow.serving.ModelServerConfig: 2:"
    )
    assert 'Message type "tensorflow.serving.ModelConfig" has no field named "nme".' in (
        record.getMessage()
    )


def test_config_files_fail_with_tf_servings_statuses(tmp_path) -> None:
    missing = tmp_path / "missing.config"
    with pytest.raises(ServingError) as caught:
        load_file(str(missing))
    assert (caught.value.code, caught.value.message) == (
        Code.NOT_FOUND,
        f"{missing}; No such file or directory",
    )
    broken = tmp_path / "broken.config"
    broken.write_text("model_config_list { config {")
    with pytest.raises(ServingError) as caught:
        load_file(str(broken))
    assert (caught.value.code, caught.value.message) == (
        Code.INVALID_ARGUMENT,
        f"Invalid protobuf file: '{broken}'",
    )


def test_the_config_file_wins_over_the_single_model_flags(tmp_path) -> None:
    path = tmp_path / "models.config"
    path.write_text(CONFIG)
    options = options_of([f"--model_config_file={path}", "--model_base_path=/ignored"])
    assert [spec.name for spec in model_specs(from_options(options))][0] == "half_plus_three"


def test_version_directories(tmp_path) -> None:
    for name in ("00000123", "7", ".5", "abc", "12a"):
        (tmp_path / name).mkdir()
    (tmp_path / "99").write_text("a file, not a version")
    assert sorted(list_versions(str(tmp_path))) == [7, 123]
    assert list_versions(str(tmp_path / "missing")) == {}
