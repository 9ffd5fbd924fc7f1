"""Every serializer/deserializer pair of the SDK that applies, ``TensorFlowPredictor``
predict/regress/classify with model name and version, custom attributes and error answers,
as a user of the SageMaker Python SDK v2 sees them."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from PIL import Image
from sagemaker.deserializers import (
    BytesDeserializer,
    CSVDeserializer,
    JSONDeserializer,
    JSONLinesDeserializer,
    NumpyDeserializer,
    StringDeserializer,
)
from sagemaker.predictor import Predictor
from sagemaker.serializers import (
    CSVSerializer,
    IdentitySerializer,
    JSONLinesSerializer,
    JSONSerializer,
    NumpySerializer,
)
from sagemaker.tensorflow import TensorFlowPredictor

ENDPOINT = "local-endpoint"  # the local runtime client ignores the name


def predictor(session, serializer, deserializer, **kwargs) -> TensorFlowPredictor:
    return TensorFlowPredictor(
        ENDPOINT, session, serializer=serializer, deserializer=deserializer, **kwargs
    )


def json_predictor(session, **kwargs) -> TensorFlowPredictor:
    return predictor(session, JSONSerializer(), JSONDeserializer(), **kwargs)


def jpeg(seed: int, width: int = 12, height: int = 8) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 255, (height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=95)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("serializer", "deserializer", "data", "expected"),
    [
        (JSONSerializer(), JSONDeserializer(), [1.0, 2.0, 5.0], {"predictions": [[4.5, 5.0, 6.5]]}),
        (
            JSONSerializer(),
            JSONDeserializer(),
            {"instances": [1.0, 2.0]},
            {"predictions": [4.5, 5.0]},
        ),
        (CSVSerializer(), JSONDeserializer(), [1.0, 2.0], {"predictions": [[4.5, 5.0]]}),
        (
            JSONLinesSerializer(),
            JSONDeserializer(),
            [[1.0, 2.0], [5.0, 6.0]],
            {"predictions": [[4.5, 5.0], [6.5, 7.0]]},
        ),
        # A bare list is one instance whatever the Accept (issue 53): its CSV answer one row.
        (JSONSerializer(), CSVDeserializer(), [1.0, 2.0], [["4.5", "5"]]),
        # StringDeserializer asks for application/json: the answer on one line, as the
        # reference container gives it; BytesDeserializer asks for */*: TF Serving's layout.
        (JSONSerializer(), StringDeserializer(), [1.0], '{    "predictions": [[4.5]    ]}'),
        (JSONSerializer(), BytesDeserializer(), [1.0], b'{\n    "predictions": [[4.5]\n    ]\n}'),
    ],
    ids=["json", "json-instances", "csv", "jsonlines", "csv-out", "string-out", "bytes-out"],
)
def test_text_serializers_and_deserializers(
    session, serializer, deserializer, data, expected
) -> None:
    assert predictor(session, serializer, deserializer).predict(data) == expected


@pytest.mark.parametrize(
    "data", [[1.0, 2.0], [[1.0], [2.0], [5.0]], [[1.0, 2.0], [3.0, 4.0]]],
    ids=["one-row", "1-column", "2-column"],
)  # fmt: skip
def test_csv_pair_gets_the_json_pairs_numbers(session, data) -> None:
    """CSVSerializer + CSVDeserializer (the service's CSV answer) and JSONSerializer +
    JSONDeserializer (the njs and the REST API): same numbers, no shape check in the way."""
    as_json = json_predictor(session).predict(data)["predictions"]
    as_csv = predictor(session, CSVSerializer(), CSVDeserializer()).predict(data)
    assert np.array(as_csv, dtype=float).ravel().tolist() == np.ravel(as_json).tolist()
    assert np.ravel(as_json).tolist() == (np.ravel(data) * 0.5 + 4).tolist()


def test_jsonlines_out(session) -> None:
    answer = predictor(session, JSONSerializer(), JSONLinesDeserializer()).predict([1.0, 2.0])
    assert answer == [{"predictions": [[4.5, 5.0]]}]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_numpy_in_numpy_out(session, dtype) -> None:
    values = np.array([1, 2, 5], dtype=dtype)
    answer = predictor(session, NumpySerializer(), NumpyDeserializer()).predict(values)
    assert isinstance(answer, np.ndarray) and answer.dtype == np.float32
    np.testing.assert_allclose(answer, [4.5, 5.0, 6.5])


@pytest.mark.parametrize("shape", [(3,), (2, 2), ()])
def test_numpy_to_an_input_with_no_recorded_shape(session, shape) -> None:
    """TF Serving's half_plus_three records no input shape: any shape goes, as in TF Serving."""
    values = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    tfs_model = predictor(
        session, NumpySerializer(), NumpyDeserializer(), model_name="tfs_half_plus_three"
    )
    answer = tfs_model.predict(values)
    assert answer.shape == shape
    np.testing.assert_allclose(answer, values * 0.5 + 3)


def test_json_and_csv_in_numpy_out_and_numpy_in_json_out(session) -> None:
    """JSON and CSV with a binary Accept go through the service's fast path (to the shapeless
    input of TF Serving's half_plus_three here, so any shape goes)."""
    kwargs = {"model_name": "tfs_half_plus_three"}
    json_to_npy = predictor(session, JSONSerializer(), NumpyDeserializer(), **kwargs)
    np.testing.assert_allclose(json_to_npy.predict([[1.0], [2.0]]), [[3.5], [4.0]])
    csv_to_npy = predictor(session, CSVSerializer(), NumpyDeserializer(), **kwargs)
    np.testing.assert_allclose(csv_to_npy.predict([[1.0, 2.0], [3.0, 4.0]]), [[3.5, 4], [4.5, 5]])
    npy_to_json = predictor(session, NumpySerializer(), JSONDeserializer())
    assert npy_to_json.predict(np.array([1.0, 2.0])) == {"predictions": [4.5, 5.0]}


def test_jpeg_bytes(session) -> None:
    """IdentitySerializer("image/jpeg"): the bytes as they are. A model that decodes JPEG
    itself gets them unchanged; a float input gets the decoded pixels (0.5 p + 3 here)."""
    image = jpeg(seed=3)
    pixels = predictor(
        session,
        IdentitySerializer("image/jpeg"),
        NumpyDeserializer(),
        model_name="tfs_half_plus_three",
    ).predict(image)
    decoded = np.asarray(Image.open(io.BytesIO(image)).convert("RGB"), dtype=np.float32)
    np.testing.assert_allclose(pixels, decoded[np.newaxis] * 0.5 + 3)

    classifier = predictor(
        session, IdentitySerializer("image/jpeg"), JSONDeserializer(), model_name="jpeg_classifier"
    )
    first, second = classifier.predict(image), classifier.predict(jpeg(seed=4))
    probabilities = np.array(first["predictions"][0]["probabilities"])
    assert probabilities.shape == (10,)
    np.testing.assert_allclose(probabilities.sum(), 1.0, rtol=1e-5)
    assert first != second


def test_model_name_and_version(session) -> None:
    latest = json_predictor(session, model_name="half_plus_three")
    assert latest.predict([1.0]) == {"predictions": [[4.5]]}  # 124: 0.5x + 4
    pinned = json_predictor(session, model_name="half_plus_three", model_version="124")
    assert pinned.predict([1.0]) == {"predictions": [[4.5]]}
    missing = json_predictor(session, model_name="half_plus_three", model_version="7")
    assert missing.predict([1.0]) == {
        "error": "Servable not found for request: Specific(half_plus_three, 7)"
    }


def test_older_model_version(session) -> None:
    pinned = json_predictor(session, model_name="half_plus_three", model_version="123")
    assert pinned.predict([1.0]) == {"predictions": [[3.5]]}


def test_regress_and_classify(session) -> None:
    half_plus_two = json_predictor(session, model_name="half_plus_two")
    examples = [{"x": 1.0}, {"x": 2.0}]
    regressed = half_plus_two.regress({"signature_name": "regress_x_to_y", "examples": examples})
    assert regressed == {"results": [2.5, 3.0]}  # y = 0.5 x + 2
    classified = half_plus_two.classify({"signature_name": "classify_x_to_y", "examples": examples})
    assert classified == {"results": [[["", 2.5]], [["", 3.0]]]}
    old = json_predictor(session, model_name="half_plus_two", model_version=124)
    assert old.regress({"signature_name": "regress_x_to_y", "examples": examples}) == regressed


def test_custom_attributes(session) -> None:
    plain = Predictor(ENDPOINT, session, JSONSerializer(), JSONDeserializer())
    assert plain.predict([1.0], custom_attributes="tfs-model-name=half_plus_two") == {
        "predictions": [[2.5]]
    }
    regress = plain.predict(
        {"examples": [{"x": 1.0}]},
        initial_args={"CustomAttributes": "tfs-model-name=half_plus_two,tfs-method=regress"},
    )
    # half_plus_two's default signature takes x, not tf.Examples as ``inputs``
    assert list(regress) == ["error"]
    assert regress["error"].startswith("No regression inputs found in SignatureDef: ")
    assert plain.predict([1.0], custom_attributes="some-other=1") == {"predictions": [[4.5]]}


def test_error_answers_as_the_sdk_gives_them(session) -> None:
    """The local runtime client hands back whatever the endpoint answered (the boto3 client
    raises ModelError on a 4xx instead): the error is the deserialized JSON body."""
    as_json = Predictor(ENDPOINT, session, JSONSerializer(), JSONDeserializer())
    bad_json = Predictor(ENDPOINT, session, IdentitySerializer("application/json"))
    error = bad_json.predict(b"{oops")
    assert set(json.loads(error)) == {"error"}
    unknown = as_json.predict([1.0], custom_attributes="tfs-model-name=no_such_model")
    assert "no_such_model" in unknown["error"]
    not_npy = Predictor(
        ENDPOINT, session, IdentitySerializer("application/x-npy"), JSONDeserializer()
    ).predict(b"not numpy")
    assert not_npy == {"error": "Invalid .npy payload: it does not start with the .npy magic"}
    with pytest.raises(ValueError):  # a JSON error body is not an .npy file
        Predictor(
            ENDPOINT, session, IdentitySerializer("application/x-npy"), NumpyDeserializer()
        ).predict(b"not numpy")
