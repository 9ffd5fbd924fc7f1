"""The one parser of each header the stack reads (``wire/http_headers.py``); the njs's twins
are run on the same cases in test_njs_parity.py."""

from __future__ import annotations

import pytest
from sagemaker_tfs.wire.http_headers import (
    CustomAttributes,
    MediaType,
    accept_list,
    arrival_time,
    custom_attributes,
    media_type,
)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, MediaType("")),
        ("Application/JSON; Charset=UTF-8", MediaType("application/json", (("charset", "UTF-8"),))),
        ('text/csv; header="present" ;x', MediaType("text/csv", (("header", "present"),))),
        (" image/png\t", MediaType("image/png")),
        ("application/json\xa0", MediaType("application/json\xa0")),  # only spaces and tabs go
    ],
)
def test_media_type(header: str | None, expected: MediaType) -> None:
    assert media_type(header) == expected


def test_accept_keeps_the_listed_order_and_drops_empty_entries() -> None:
    types = accept_list("text/csv;q=0.1, ,application/JSON;q=1")
    assert [entry.name for entry in types] == ["text/csv", "application/json"]
    assert types[0].parameter("q") == "0.1" and types[0].parameter("x") is None
    assert accept_list(None) == accept_list("") == accept_list(" , ") == ()


def test_custom_attributes() -> None:
    header = (
        " tfs-model-name = m ,tfs-model-version=1,tfs-method=classify,other=x,"
        "tfs-output-filter=a ;\tb;"
    )
    assert custom_attributes(header) == CustomAttributes(header, "m", "1", "classify", ("a", "b"))
    assert custom_attributes("tfs-model-name=a,tfs-model-name=b").model_name == "b"  # last wins
    assert custom_attributes(None) == CustomAttributes()
    assert custom_attributes("tfs-method=predict") == CustomAttributes(
        "tfs-method=predict", method="predict"
    )


def test_arrival_is_nginx_clock_less_the_time_it_had_the_request() -> None:
    assert arrival_time("1700000010.250 0.250") == pytest.approx(1700000010.0)
    for bad in (None, "", "1700000010.250", "x 0.1", "1 2 3", "inf 1", "nan 0"):
        assert arrival_time(bad) is None
