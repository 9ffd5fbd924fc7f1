"""What the service tells nginx about each invocation (service/metrics.py)."""

from __future__ import annotations

import falcon
import pytest
from sagemaker_tfs.service.metrics import recorded
from sagemaker_tfs.service.targets import ModelTarget
from sagemaker_tfs.wire.errors import HttpError


def test_the_route_model_and_version_are_named_even_for_an_error() -> None:
    resp = falcon.Response()
    with pytest.raises(HttpError), recorded(None, resp) as record:
        record.target(ModelTarget("m", "7", "predict"))
        record.route = "fast_path"
        with record.model_server_call():
            raise HttpError(400, "bad")
    assert resp.get_header("X-SageMaker-TFS-Route") == "fast_path"
    assert resp.get_header("X-SageMaker-TFS-Model") == "m"
    assert resp.get_header("X-SageMaker-TFS-Version") == "7"


def test_a_request_refused_before_its_model_is_known_is_the_services() -> None:
    resp = falcon.Response()
    with pytest.raises(HttpError), recorded(None, resp):
        raise HttpError(400, "Invalid model name")
    assert resp.get_header("X-SageMaker-TFS-Route") == "service"
    assert resp.get_header("X-SageMaker-TFS-Model") is None
