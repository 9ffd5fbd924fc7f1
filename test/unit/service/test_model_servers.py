"""Failover of the stack's own calls to a model server, and the order of the candidates.

A call whose model server is unreachable is made again: on the other instances first, then on
the same ones after a pause, within a bounded time; other errors are not retried.
"""

from __future__ import annotations

import time

import pytest
from sagemaker_tfs.ports import Instance
from sagemaker_tfs.service.errors import ModelServerUnavailable
from sagemaker_tfs.service.routing import model_servers
from sagemaker_tfs.service.routing.connections import Channels
from sagemaker_tfs.service.routing.model_servers import (
    CallCut,
    Candidates,
    ClientGone,
    Failover,
    InstancePicker,
    InstanceRotation,
    ModelServer,
)
from sagemaker_tfs.wire.errors import HttpError


class Numbered(Candidates):
    """Candidates 0, 1, 2, ... (their gRPC port is their number); ``failed`` records them."""

    def __init__(self, round_size: int) -> None:
        self.round_size = round_size
        self.failed: list[int] = []

    def first(self) -> ModelServer:
        return ModelServer(0, 0, None)

    def next_after(self, failed: ModelServer, attempt: int) -> ModelServer:
        self.unreachable(failed)
        return ModelServer(attempt, attempt, None)

    def unreachable(self, server: ModelServer) -> None:
        self.failed.append(server.grpc_port)


def same(server: ModelServer) -> ModelServer:
    return server


def test_the_next_candidate_answers() -> None:
    candidates = Numbered(2)

    def call(server: ModelServer) -> str:
        if server.grpc_port == 0:
            raise ModelServerUnavailable("connection refused")
        return f"answered by {server.grpc_port}"

    assert Failover(candidates, same)(call) == "answered by 1"
    assert candidates.failed == [0]


def test_a_later_call_of_the_request_goes_to_the_model_server_that_answered() -> None:
    """A request's calls (the signature, then Predict) share one failover: the second starts
    on the model server that answered the first, its context made once per model server."""
    made: list[int] = []

    def context_of(server: ModelServer) -> str:
        made.append(server.grpc_port)
        return f"context of {server.grpc_port}"

    failover = Failover(Numbered(3), context_of)

    def first_call(context: str) -> str:
        if context == "context of 0":
            raise ModelServerUnavailable("connection refused")
        return context

    assert failover(first_call) == "context of 1"
    assert failover(lambda context: context) == "context of 1"
    assert made == [0, 1] and failover.server.grpc_port == 1


def test_other_errors_are_not_retried() -> None:
    tried: list[int] = []

    def call(server: ModelServer) -> str:
        tried.append(server.grpc_port)
        raise HttpError(400, "bad input")

    with pytest.raises(HttpError):
        Failover(Numbered(2), same)(call)
    assert tried == [0]


def test_retries_stop_after_the_failover_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_servers, "FAILOVER_SECONDS", 0.3)
    monkeypatch.setattr(model_servers, "FAILOVER_PAUSE_SECONDS", 0.05)
    tried: list[int] = []

    def call(server: ModelServer) -> str:
        tried.append(server.grpc_port)
        raise ModelServerUnavailable("connection refused")

    with pytest.raises(ModelServerUnavailable) as caught:
        Failover(Numbered(1), same)(call)
    assert caught.value.status == 503
    assert 3 <= len(tried) <= 10  # paused between rounds, did not spin


def test_rotation_starts_with_the_next_instance_and_covers_all() -> None:
    instances = [Instance(1, 2), Instance(3, 4), Instance(5, 6)]
    picker = InstancePicker(instances)
    assert picker.rotation() == tuple(instances)
    assert picker.rotation() == (instances[1], instances[2], instances[0])
    assert picker.next() == instances[2]


def test_an_unreachable_instance_is_tried_last_for_a_while() -> None:
    a, b = Instance(1, 2), Instance(3, 4)
    picker = InstancePicker([a, b], down_seconds=0.2)
    picker.mark_down(a)
    assert picker.rotation() == (b, a)
    assert picker.rotation() == (b, a)  # whatever the turn
    time.sleep(0.25)
    assert picker.rotation() in ((a, b), (b, a))
    assert {picker.rotation()[0], picker.rotation()[0]} == {a, b}  # round-robin again


def test_an_instance_that_failed_goes_last_for_the_next_requests() -> None:
    a, b = Instance(1, 2), Instance(3, 4)
    picker = InstancePicker([a, b])
    channels = Channels()
    rotation = InstanceRotation(picker, channels)
    first = rotation.first()
    assert rotation.round_size == 2 and first.channel is channels.get(first.grpc_port)
    second = rotation.next_after(first, 1)
    assert second.grpc_port != first.grpc_port
    for _ in range(3):
        assert InstanceRotation(picker, channels).first() == second


def test_no_call_is_made_for_a_client_already_gone() -> None:
    tried: list[int] = []

    def call(server: ModelServer) -> str:
        tried.append(server.grpc_port)
        return "answer"

    with pytest.raises(ClientGone) as caught:
        Failover(Numbered(2), same, still_wanted=lambda: False)(call)
    assert caught.value.status == 499 and tried == []


def test_resends_stop_once_the_client_is_gone() -> None:
    """The client goes during the third attempt: no fourth is made."""
    tried: list[int] = []

    def call(server: ModelServer) -> str:
        tried.append(server.grpc_port)
        raise ModelServerUnavailable("connection refused")

    with pytest.raises(ClientGone):
        Failover(Numbered(1), same, still_wanted=lambda: len(tried) < 3)(call)
    assert len(tried) == 3


def test_a_call_cut_off_as_its_client_goes_is_answered_499() -> None:
    """The edge raises ``CallCut`` into the call in flight: the client is gone, after one
    attempt, and nothing is sent again."""
    tried: list[int] = []

    def call(server: ModelServer) -> str:
        tried.append(server.grpc_port)
        raise CallCut()

    with pytest.raises(ClientGone) as caught:
        Failover(Numbered(2), same)(call)
    assert caught.value.status == 499 and "1 attempts" in caught.value.message
    assert tried == [0]
