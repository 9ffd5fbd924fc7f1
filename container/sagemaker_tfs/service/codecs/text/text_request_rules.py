"""TF Serving's REST rules for a predict request's document, for the bodies that the arrays
reader (``text_tensors``) leaves to the model server's REST API: with a binary Accept the
service reads those itself (``text_rest.named_values``), and gives them the REST API's
verdict, in its words (``model_server/rest/api.py``, ``predict_json.py``, ``json_reader.py``),
so that the Accept header never changes how a body is read (issue 53).

Numbers are read as rapidjson reads them (``wire/rapidjson_numbers.py``, the model server's
reader's too): an integer beyond int64/uint64 is a double, a number beyond a double refuses
the document.
"""

from __future__ import annotations

from typing import NoReturn

from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.rapidjson_numbers import NumberTooBig
from sagemaker_tfs.wire.tfs_json import debug_string


def too_big(error: NumberTooBig, request: str) -> HttpError:
    """rapidjson's 400 for a number beyond a double, at its offset in the REST request."""
    offset = request.find(error.text)
    return HttpError(
        400, f"JSON Parse error: Number too big to be stored in double. at offset: {offset}"
    )


def check_request(document: dict) -> None:
    """The REST API's 400 for a request object it refuses before reading its inputs."""
    if not isinstance(document.get("signature_name", ""), str):
        raise HttpError(400, "'signature_name' key must be a string value.")
    if "instances" not in document:
        if "inputs" not in document:  # "examples" alone: classify's and regress's
            raise HttpError(400, "Missing 'inputs' or 'instances' key")
        return
    if "inputs" in document:
        _refuse(document, "Not formatted correctly expecting only one of 'inputs' or "
                          "'instances' keys to exist ")  # fmt: skip
    if not isinstance(document["instances"], list):
        _refuse(document, "Expecting 'instances' to be an list/array")
    if not document["instances"]:
        _refuse(document, "No values in 'instances' array")


def _refuse(document: dict, words: str) -> NoReturn:
    try:
        shown = debug_string(document)
    except RecursionError:  # nested too deep to show: the words alone
        shown = ""
    raise HttpError(400, f"JSON Value: {shown} {words}")
