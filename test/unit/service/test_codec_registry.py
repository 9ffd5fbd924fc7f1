"""sagemaker_tfs.service.codecs.registry: one codec per media type, which the fast path's
reading (``inputs``), answering (``answers``), Accept choice and refusals all go through."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import pytest
from sagemaker_tfs.service.codecs import registry
from sagemaker_tfs.service.codecs.content_types import (
    Chunk,
    Codec,
    DecodedInputs,
    ImageOptions,
    conform_array,
    only_output,
    single_input,
)
from sagemaker_tfs.service.codecs.registry import CODECS, answer_type
from sagemaker_tfs.service.request import ParsedRequest
from sagemaker_tfs.service.routing import fast_path
from sagemaker_tfs.service.targets import ModelTarget
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.http_headers import CustomAttributes, MediaType, accept_list
from sagemaker_tfs.wire.signatures import TensorSpec
from sagemaker_tfs.wire.streamed_predict import StreamedTensors

DT_FLOAT = 1
NUMBERS = "text/x-numbers"  # a media type the service does not know
ONE_INPUT = {"x": TensorSpec("x", DT_FLOAT, (-1,))}


class NumbersCodec(Codec):
    """Numbers separated by spaces, one input in, one output out."""

    reads = writes = True

    def read(
        self, body: bytes, inputs: Mapping[str, TensorSpec], options: ImageOptions
    ) -> DecodedInputs:
        spec = single_input(inputs, self.media_type)
        values = np.array([float(word) for word in body.split()])
        return DecodedInputs({spec.name: conform_array(values, spec)}, {})

    def write(self, outputs: Mapping[str, np.ndarray]) -> list[Chunk]:
        array = only_output(outputs, self.media_type)
        return [" ".join(f"{value:g}" for value in array.ravel()).encode()]


@pytest.fixture
def numbers_registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(CODECS, NUMBERS, NumbersCodec(NUMBERS))
    yield


def request_of(content_type: str, accept: str) -> ParsedRequest:
    return ParsedRequest(
        content_type=MediaType(content_type),
        accept=accept_list(accept),
        answer=answer_type(accept_list(accept), accept),
        custom_attributes=CustomAttributes(),
        target=ModelTarget("m", None, "predict"),
        content_length=5,
    )


def test_a_registered_codec_reads_and_answers_its_type(numbers_registered: None) -> None:
    """One codec registered, nothing else touched: the fast path's checks let the type in
    and choose it from Accept, ``inputs`` reads it and ``answers`` writes it."""
    request = request_of(NUMBERS, NUMBERS)
    fast_path.check(request)
    assert request.answer.fast_path == NUMBERS
    decoded = registry.decode_request(b"1 2.5 4", NUMBERS, ONE_INPUT, ImageOptions())
    np.testing.assert_array_equal(decoded.arrays["x"], np.array([1, 2.5, 4], np.float32))
    assert decoded.arrays["x"].dtype == np.float32
    outputs = {"y": np.array([0.5, 3.0], np.float32)}
    assert registry.encode_outputs(outputs, NUMBERS) == ([b"0.5 3"], NUMBERS)
    arriving = StreamedTensors.of(outputs)
    assert registry.encode_answer(arriving, NUMBERS) == ([b"0.5 3"], NUMBERS)
    refused = CODECS.not_acceptable(accept_list("text/html")).message
    written = "application/json, application/jsonlines, application/x-npy, application/x-npz"
    assert refused == f"Not Acceptable: text/html; supported: {written}, text/csv, {NUMBERS}"


def test_without_its_codec_the_type_is_refused() -> None:
    """The same requests when the type is not registered: 415 to read it, 406 to answer it."""
    with pytest.raises(HttpError, match=f"^Unsupported Media Type: {NUMBERS}$") as read:
        registry.decode_request(b"1 2", NUMBERS, ONE_INPUT, ImageOptions())
    assert read.value.status == 415
    with pytest.raises(HttpError) as refused:
        fast_path.check(request_of("application/x-npy", NUMBERS))
    assert refused.value.status == 406
    assert refused.value.message == (
        f"Not Acceptable: {NUMBERS}; supported: application/json, application/jsonlines, "
        "application/x-npy, application/x-npz, text/csv"
    )
    with pytest.raises(HttpError, match=f"^Unsupported Media Type: {NUMBERS}$") as checked:
        fast_path.check(request_of(NUMBERS, "application/json"))
    assert checked.value.status == 415


def test_a_codec_that_only_reads_is_not_offered_as_an_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``writes`` False: the type is read, and an Accept that lists it alone gets the 406."""
    monkeypatch.setattr(NumbersCodec, "writes", False)
    monkeypatch.setitem(CODECS, NUMBERS, NumbersCodec(NUMBERS))
    assert registry.decode_request(b"7", NUMBERS, ONE_INPUT, ImageOptions()).arrays["x"] == [7]
    assert CODECS.choose_output_type(accept_list(f"{NUMBERS}, application/x-npy")) == (
        "application/x-npy"
    )
    assert CODECS.choose_output_type(accept_list(NUMBERS)) is None
    assert NUMBERS not in CODECS.not_acceptable(accept_list(NUMBERS)).message.split("supported")[1]


@pytest.mark.parametrize(
    ("kind", "reads", "writes"),
    [
        ("application/json", True, True),
        ("application/jsonlines", True, True),
        ("application/jsons", True, False),
        ("application/x-jsonlines", True, False),
        ("text/csv", True, True),
        ("application/x-npy", True, True),
        ("application/x-npz", True, True),
        ("image/jpeg", True, False),
        ("image/png", True, False),
        ("application/x-image", True, False),
        ("application/x-image-stream", True, False),
    ],
)
def test_each_type_the_fast_path_takes_has_one_codec(kind: str, reads: bool, writes: bool) -> None:
    assert (CODECS[kind].media_type, CODECS.reads(kind), CODECS.writes(kind)) == (
        kind,
        reads,
        writes,
    )


def test_the_registry_holds_exactly_those_types() -> None:
    assert len(CODECS) == 11
    assert CODECS.written_types() == [
        "application/json",
        "application/jsonlines",
        "application/x-npy",
        "application/x-npz",
        "text/csv",
    ]
