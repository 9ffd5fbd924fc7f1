"""sagemaker_tfs.client: versions are TF Serving's int64, checked before use; what the client
keeps per model server lives in its ``ModelServerChannel``."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator
from types import SimpleNamespace

import grpc
import pytest
from sagemaker_tfs import client
from sagemaker_tfs.wire import protos


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


class MetadataServer:
    """A real gRPC server answering GetModelMetadata with one signature; counts the calls."""

    def __init__(self, delay: float = 0.0) -> None:
        self.calls = 0
        self.delay = delay
        handler = grpc.method_handlers_generic_handler(
            "tensorflow.serving.PredictionService",
            {
                "GetModelMetadata": grpc.unary_unary_rpc_method_handler(
                    self._metadata,
                    request_deserializer=protos.GetModelMetadataRequest.FromString,
                    response_serializer=protos.GetModelMetadataResponse.SerializeToString,
                )
            },
        )
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(2))
        self.server.add_generic_rpc_handlers((handler,))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def _metadata(self, request, context):  # type: ignore[no-untyped-def]
        self.calls += 1
        time.sleep(self.delay)
        signatures = protos.SignatureDefMap()
        definition = signatures.signature_def["serving_default"]
        definition.method_name = "tensorflow/serving/predict"
        definition.inputs["x"].dtype = 1
        answer = protos.GetModelMetadataResponse()
        answer.metadata["signature_def"].Pack(signatures)
        return answer


@pytest.fixture
def metadata_server() -> Iterator[MetadataServer]:
    server = MetadataServer()
    yield server
    server.server.stop(None)


def test_signatures_are_kept_with_the_model_servers_channel(metadata_server) -> None:
    """No module-level cache: what is kept goes with the channel (dropped with it)."""
    channel = client.ModelServerChannel(f"127.0.0.1:{metadata_server.port}")
    with channel:
        served = SimpleNamespace(model_name="m", model_version=None, channel=channel)
        assert list(client.get_signature(served).inputs) == ["x"]
        client.get_signature(served)
        assert metadata_server.calls == 1
        client.forget_signatures(served)
        client.get_signature(served)
        assert metadata_server.calls == 2
        other = client.ModelServerChannel(f"127.0.0.1:{metadata_server.port}")
        client.get_signature(SimpleNamespace(model_name="m", model_version=None, channel=other))
        assert metadata_server.calls == 3  # another model server: asked on its own
        other.close()
    plain = grpc.insecure_channel(f"127.0.0.1:{metadata_server.port}")
    with plain:  # a channel of the user's own keeps nothing
        for _ in range(2):
            client.get_signature(SimpleNamespace(model_name="m", model_version=None, channel=plain))
    assert metadata_server.calls == 5


def test_calls_given_no_timeout_take_the_default_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The service sets the default to the stack's model-server timeout; a call's own
    ``timeout`` still wins."""
    monkeypatch.setattr(client, "_default_timeout", client.DEFAULT_TIMEOUT_SECONDS)
    slow = MetadataServer(delay=1.0)
    try:
        client.set_default_timeout(0.2)
        with client.ModelServerChannel(f"127.0.0.1:{slow.port}") as channel:
            served = SimpleNamespace(model_name="m", model_version=None, channel=channel)
            with pytest.raises(grpc.RpcError) as raised:
                client.get_signature(served)
            assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            assert list(client.get_signatures(served, timeout=10)["serving_default"].inputs) == [
                "x"
            ]
    finally:
        slow.server.stop(None)


@pytest.mark.parametrize("seconds", [0, -1, float("nan")])
def test_a_default_deadline_must_be_positive(seconds: float) -> None:
    with pytest.raises(ValueError, match="positive number of seconds"):
        client.set_default_timeout(seconds)
