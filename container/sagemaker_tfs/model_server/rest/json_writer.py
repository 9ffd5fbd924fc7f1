"""TF Serving's REST JSON written byte for byte: values, errors, whole response documents.

Pure functions, no I/O. Tensors and their layout (rapidjson's ``PrettyWriter`` as TF Serving
uses it, TF Serving's float text) are ``wire/tfs_json.py``'s, shared with the service, which
answers JSON and CSV bodies it sent over gRPC with the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from sagemaker_tfs.model_server.errors import ServingError, invalid_argument
from sagemaker_tfs.wire.tfs_json import debug_string, quote, render_document

# --------------------------------------------------------------------------- value rendering


def json_value_error(value: Any, message: str) -> ServingError:
    """TF Serving's ``JSON Value: <value> <message>`` error."""
    return invalid_argument(f"JSON Value: {debug_string(value)} {message}")


# --------------------------------------------------------------------------- documents


def format_error(message: str) -> bytes:
    """``{"error": "..."}`` as TF Serving writes errors, except that bytes of the request
    that are not UTF-8 (quoted in the message) become U+FFFD: the answer stays valid JSON."""
    text = message.encode("utf-8", errors="surrogatepass").decode("utf-8", errors="replace")
    return render_document("error", quote(text))


def proto_json(message: Message) -> dict[str, Any]:
    """A proto as JSON values with default fields, as TF Serving's printer emits them."""
    return json_format.MessageToDict(
        message,
        always_print_fields_with_no_presence=True,
        preserving_proto_field_name=True,
    )


def format_proto_document(document: Mapping[str, Any]) -> bytes:
    """Protobuf's JSON printer layout: 1-space indent and a trailing newline."""
    return (json.dumps(document, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
