"""sagemaker_tfs.client.model_spec: versions are TF Serving's int64, checked before use."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from sagemaker_tfs import client


def context(version: str | None) -> SimpleNamespace:
    return SimpleNamespace(model_name="m", model_version=version)


@pytest.mark.parametrize(
    "version", ["99999999999999999999999999", "9223372036854775808", "-1", "x"]
)
def test_versions_outside_int64_are_a_value_error(version: str) -> None:
    with pytest.raises(ValueError, match="Invalid model version"):
        client.model_spec(context(version))


@pytest.mark.parametrize(("version", "number"), [("0", 0), ("9223372036854775807", 2**63 - 1)])
def test_versions_within_int64_are_kept(version: str, number: int) -> None:
    assert client.model_spec(context(version)).version.value == number


def test_no_version_leaves_it_unset() -> None:
    assert not client.model_spec(context(None)).HasField("version")
