"""Text-format ModelServerConfig: policies, labels and validation."""

from __future__ import annotations

import pytest
from sagemaker_tfs.model_server.errors import Code, ServingError
from sagemaker_tfs.model_server.flags import parse_flags
from sagemaker_tfs.model_server.manager import list_versions
from sagemaker_tfs.model_server.model_config import from_options, model_specs, parse_text

CONFIG = """
model_config_list: {
  config: {
    name: 'half_plus_three'
    base_path: '/opt/ml/model/half_plus_three'
    model_platform: 'tensorflow'
    model_version_policy: { specific: { versions: 123 versions: 124 } }
    version_labels { key: 'stable' value: 123 }
  }
  config: { name: 'all' base_path: '/a' model_version_policy: { all: {} } }
  config: { name: 'latest2' base_path: '/b' model_version_policy: { latest: { num_versions: 2 } } }
  config: { name: 'default' base_path: '/c' }
}
"""


def test_policies_and_labels() -> None:
    specs = {spec.name: spec for spec in model_specs(parse_text(CONFIG))}
    available = [1, 123, 124, 200]
    assert specs["half_plus_three"].policy.select(available) == [124, 123]
    assert specs["half_plus_three"].labels == {"stable": 123}
    assert specs["all"].policy.select(available) == [200, 124, 123, 1]
    assert specs["latest2"].policy.select(available) == [200, 124]
    assert specs["default"].policy.select(available) == [200]


def test_single_model_from_flags() -> None:
    config = from_options(parse_flags(["--model_name=m", "--model_base_path=/p"]))
    [spec] = model_specs(config)
    assert (spec.name, spec.base_path, spec.policy.kind) == ("m", "/p", "latest")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model_config_list { config { name: 'a' } }", "Model a has an empty base_path"),
        (
            "model_config_list { config { name: 'a' base_path: '/x' }"
            " config { name: 'a' base_path: '/y' } }",
            "Illegal to list model a multiple times in config list",
        ),
        ("model_config_list { nonsense: 1 }", "not a text-format ModelServerConfig: "),
        (
            "model_config_list { config { name: 'a' base_path: '/x' model_platform: 'onnx' } }",
            "unsupported model_platform",
        ),
    ],
)
def test_invalid_configs(text: str, message: str) -> None:
    with pytest.raises(ServingError) as caught:
        model_specs(parse_text(text))
    assert caught.value.code in (Code.INVALID_ARGUMENT,)
    assert message in caught.value.message


def test_version_directories(tmp_path) -> None:
    for name in ("00000123", "7", ".5", "abc", "12a"):
        (tmp_path / name).mkdir()
    (tmp_path / "99").write_text("a file, not a version")
    assert sorted(list_versions(str(tmp_path))) == [7, 123]
    assert list_versions(str(tmp_path / "missing")) == {}
