"""Custom attributes -> model/version/method, and spreading over instances."""

from __future__ import annotations

import pytest
from sagemaker_tfs.ports import Instance
from sagemaker_tfs.service.routing.model_servers import InstancePicker
from sagemaker_tfs.service.targets import (
    ModelTarget,
    check_model_name,
    model_target,
    rest_uri,
)
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.http_headers import custom_attributes


def test_defaults_to_the_default_model_and_predict() -> None:
    assert model_target(custom_attributes(None), "half_plus_three") == ModelTarget(
        "half_plus_three", None, "predict"
    )


def test_custom_attributes_pick_model_version_and_method() -> None:
    header = "foo=bar, tfs-model-name=other,tfs-model-version=00123 ,tfs-method=classify,junk"
    assert model_target(custom_attributes(header), "default") == ModelTarget(
        "other", "00123", "classify"
    )


@pytest.mark.parametrize(
    ("header", "default", "message"),
    [
        (None, None, "No model name"),
        ("tfs-model-name=../x", "m", "Invalid model name"),
        ("tfs-model-name=a/b", "m", "Invalid model name"),
        ("tfs-model-version=abc", "m", "Invalid model version"),
        ("tfs-model-version=-1", "m", "Invalid model version"),
        ("tfs-method=explode", "m", "Invalid method"),
    ],
)
def test_bad_attributes_are_400(header: str | None, default: str | None, message: str) -> None:
    with pytest.raises(HttpError) as raised:
        model_target(custom_attributes(header), default)
    assert raised.value.status == 400
    assert message in raised.value.message


def test_rest_uri() -> None:
    assert rest_uri(8501, ModelTarget("m", None, "predict")) == (
        "http://127.0.0.1:8501/v1/models/m:predict"
    )
    assert rest_uri(8501, ModelTarget("m", "7", "regress")) == (
        "http://127.0.0.1:8501/v1/models/m/versions/7:regress"
    )


def test_picker_round_robins() -> None:
    instances = [Instance(9000, 8501), Instance(9002, 8503)]
    picker = InstancePicker(instances)
    assert [picker.next() for _ in range(4)] == instances * 2


@pytest.mark.parametrize(
    "attributes",
    [
        "tfs-model-version=99999999999999999999999999",
        "tfs-model-version=9223372036854775808",
        "tfs-model-version=-1",
        "tfs-model-name=a b",
    ],
)
def test_out_of_range_versions_and_bad_names_are_400(attributes: str) -> None:
    with pytest.raises(HttpError) as raised:
        model_target(custom_attributes(attributes), "m")
    assert raised.value.status == 400


@pytest.mark.parametrize("name", ["nl\n", "m\n", "m\r\n"])
def test_names_with_a_trailing_newline_are_refused(name: str) -> None:
    """``$`` matches before a final newline: the patterns must match the whole name."""
    with pytest.raises(HttpError) as raised:
        check_model_name(name)
    assert raised.value.status == 400


def test_the_largest_int64_version_is_accepted() -> None:
    assert model_target(
        custom_attributes("tfs-model-version=9223372036854775807"), "m"
    ).model_version == ("9223372036854775807")
