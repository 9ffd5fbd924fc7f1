"""The njs's conversion under nginx, byte for byte against the Python service's, on the corpus
of shapes and fuzzed bodies of test/njs_corpus.py.

test/unit/supervisor/test_njs_parity.py runs the same comparison under Node; this runs it
where it counts: the installed nginx and njs (njs 0.7.9 on the host, which reads a JSON body as
a byte string and a CSV one as text), the body posted to ``/invocations`` and the TF Serving
request taken as ``RecordingModelServer`` (front_end.py) received it. A body the njs refuses
never reaches it: then the status must be the one the Python service refuses it with. The few
bodies the njs hands to the service (a CSV number it cannot write exactly, test_njs_parity.py)
are left out, found by the same njs under Node.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from front_end import FrontEnd, start_front_end
from njs_corpus import Case, fuzzed_bodies, loose_number_rows, shape_bodies
from njs_functions import call_njs, needs_node
from sagemaker_tfs.service.codecs.text.text_rest import convert
from sagemaker_tfs.wire.errors import HttpError

pytestmark = [pytest.mark.timeout(300), needs_node]

FUZZED_BODIES = 300
FUZZ_SEED = 54  # not the unit test's: other bodies


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FrontEnd]:
    front = start_front_end(tmp_path_factory.mktemp("njs-corpus"))
    yield front
    front.stop()


def through_nginx(front: FrontEnd, content_type: str, body: str) -> dict[str, object]:
    """The request the model server received, or the status of a refusal."""
    received = len(front.recorder.requests)
    response = front.post(body.encode(), content_type)
    if len(front.recorder.requests) > received:
        return {"value": front.recorder.last().body}
    return {"status": response.status_code}


def in_python(content_type: str, body: str) -> dict[str, object]:
    try:
        return {"value": convert(content_type, body.encode()).encode()}
    except HttpError as error:
        return {"status": error.status}


def kept_by_njs(tmp_path: Path, cases: list[Case]) -> list[Case]:
    """The cases the njs converts or refuses itself (not handed to the service)."""
    results = call_njs(tmp_path, "convert", cases)
    return [case for case, njs in zip(cases, results, strict=True) if "handOver" not in njs]


def divergences(front: FrontEnd, tmp_path: Path, cases: list[Case]) -> list[str]:
    found = []
    for content_type, body in kept_by_njs(tmp_path, cases):
        njs, python = through_nginx(front, content_type, body), in_python(content_type, body)
        if njs != python:
            found.append(f"{content_type} {body!r}: njs {njs!r} python {python!r}"[:400])
    return found


def test_every_shape_converts_as_in_python(front: FrontEnd, tmp_path: Path) -> None:
    assert divergences(front, tmp_path, shape_bodies()) == []
    assert front.recorder.last().path == "/v1/models/half_plus_three:predict"


def test_loose_csv_numbers_convert_as_in_python(front: FrontEnd, tmp_path: Path) -> None:
    """njs 0.7.9's own float parsing and printing missed Python's repr in 1 of 4 of these."""
    cases = loose_number_rows(2000, FUZZ_SEED)
    found = divergences(front, tmp_path, cases)
    assert found == [], f"{len(found)} of {len(cases)}: {found[:5]}"


def test_fuzzed_bodies_convert_as_in_python(front: FrontEnd, tmp_path: Path) -> None:
    cases = fuzzed_bodies(FUZZED_BODIES, FUZZ_SEED)
    found = divergences(front, tmp_path, cases)
    assert found == [], f"{len(found)} of {len(cases)}: {found[:5]}"
