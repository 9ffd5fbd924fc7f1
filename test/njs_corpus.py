"""A corpus of JSON, JSON lines and CSV bodies, and a seeded fuzzer of them, for the parity of
the njs's conversion with the Python one (test/unit/supervisor/test_njs_parity.py).

``shape_bodies()``: the shapes of test/perf/text_shapes.py at a few KB (one value a line,
many columns, integers, negative zeros, JSON instances, named inputs in rows and columns, two
inputs, JSON lines, ``signature_name``), plus what TF Serving's REST API takes that those do
not show: NaN and infinities, strings, ``b64``, integers written with a point, ragged lists,
numbers CSV spells loosely (``+1``, ``.5``, ``1.``), quoted CSV fields, empty bodies.
``fuzzed_bodies(count, seed)``: mutations of those (pieces cut, repeated, swapped, tokens
inserted, another content type), so that the two readers meet bodies nobody wrote by hand.
Every body is text (valid UTF-8): the njs under Node gets it as a string.
"""

from __future__ import annotations

import random
import re

JSON = "application/json"
JSON_LINES = "application/jsonlines"
CSV = "text/csv"
TYPES = (JSON, JSON_LINES, "application/jsons", "application/x-jsonlines", CSV)

Case = tuple[str, str]  # (content type, body)


def numbers(rng: random.Random, count: int) -> list[str]:
    """Values with three decimals in [-1, 1], as the benchmark's: ``-0.000`` now and then."""
    return [f"{rng.uniform(-1, 1):.3f}" for _ in range(count)]


def integers(rng: random.Random, count: int) -> list[str]:
    return [str(rng.randint(-99_999, 99_999)) for _ in range(count)]


def rows_of(values: list[str], width: int) -> list[str]:
    return [",".join(values[start : start + width]) for start in range(0, len(values), width)]


def named_rows(rng: random.Random, count: int) -> list[str]:
    pairs = zip(numbers(rng, count), numbers(rng, count), strict=True)
    return [f'{{"a": {a}, "b": {b}}}' for a, b in pairs]


def csv_shapes(rng: random.Random) -> list[Case]:
    zeros = numbers(rng, 200)
    zeros[::17] = ["-0"] * len(zeros[::17])
    zeros[5::23] = ["-0.0"] * len(zeros[5::23])
    return [
        (CSV, "\n".join(numbers(rng, 400)) + "\n"),
        (CSV, "\n".join(rows_of(numbers(rng, 1000), 100)) + "\n"),
        (CSV, "\r\n".join(rows_of(numbers(rng, 60), 6))),
        (CSV, "\n".join(integers(rng, 300)) + "\n"),
        (CSV, "\n".join(zeros) + "\n"),
        (CSV, "-0.000\n0.000\n-0\n"),
        (CSV, "1.0,2.0,3.0\n4.,+5,.5\n007,-00,+0\n"),
        (CSV, "+1.5,-.5e3,1.e3,00.5,+1e400,-1e400,1E-7,+0.000123,1e15,+1e16,+1e22\n"),
        (CSV, "12345678901234567890,+12345678901234567890,1.10,-0.5e-3\n"),
        (CSV, 'a,"b",""\n"x,"",y",c,"d""e"\n'),
        (CSV, "NaN,nan,Infinity,-Infinity,inf\n"),
        (CSV, "caf\u00e9,\u6a21\u578b,\U0001f600,\x7f,\x01,\u2028\n"),
        (CSV, " 1 ,\t2\t,\u00a03\u00a0\n\n\n4,5,6\n"),
        (CSV, "1,2\n3\n"),
        (CSV, ""),
        (CSV, "\n \r\n\t\n"),
    ]


def json_shapes(rng: random.Random) -> list[Case]:
    values = ", ".join(numbers(rng, 300))
    column = ", ".join(numbers(rng, 200))
    lines = named_rows(rng, 50)
    return [
        (JSON, f'{{"instances": [{values}]}}'),
        (JSON, f"[{values}]"),
        (JSON, "[" + ", ".join(f"[{row}]" for row in rows_of(numbers(rng, 120), 4)) + "]"),
        (JSON, '{"instances": [' + ", ".join(named_rows(rng, 50)) + "]}"),
        (JSON, f'{{"inputs": {{"a": [{column}], "b": [{column}]}}}}'),
        (JSON, f'{{"signature_name": "doubled", "instances": [{values}]}}'),
        (JSON, "\n".join(lines) + "\n"),
        (JSON_LINES, "\n".join(lines) + "\n"),
        (JSON_LINES, "\r\n".join(f"[{row}]" for row in rows_of(numbers(rng, 40), 4))),
        (JSON, '{"instances": [NaN, Infinity, -Infinity, -0, -0.0, 1.0]}'),
        (JSON, "[NaN, 1.5]"),
        (JSON, "NaN"),
        (JSON, "[[-Infinity], [2]]"),
        (JSON_LINES, '{"a": NaN}\n{"a": Infinity}\n'),
        (JSON, '{"instances": ["caf\u00e9", "a\\"b", "\\u00e9", ""]}'),
        (JSON, '{"instances": ["caf\u00e9. x", "1.", ".5", "05", 1.5]}'),
        (JSON, '["\u6a21\u578b.", 1.]'),
        (JSON_LINES, '{"a": "\u00e9.\u00e9"}\n{"a": 05}\n'),
        (JSON, '{"instances": [{"b64": "aGVsbG8="}, {"b64": ""}]}'),
        (JSON, '{"inputs": {"image": {"b64": "AAEC"}, "n": [1.0, 2.0]}}'),
        (JSON, '{"instances": [1.0, 2.0, 3.00, 1e2]}'),
        (JSON, "[[1, 2], [3]]"),
        (JSON, '{"instances": [[1, 2], [3]]}'),
        (JSON, '{"examples": [{"x": 1}]}'),
        (JSON, '"text"'),
        (JSON, '{"x": 1}'),
        (JSON, "[]"),
        (JSON, ""),
        (JSON, " \n\t"),
        (JSON_LINES, ""),
        (JSON, "\ufeff[1]"),
        (JSON, '{"instances": [1]} {"instances": [2]}'),
    ]


def shape_bodies() -> list[Case]:
    rng = random.Random(53)
    return csv_shapes(rng) + json_shapes(rng)


# Pieces the fuzzer inserts: what separates, quotes, spells or breaks a value.
TOKENS = (
    ",", "\n", "\r", "\r\n", " ", "\t", '"', '""', "\\", "[", "]", "{", "}", ":", "-", "+", ".",
    "e", "E", "0", "-0", "-0.0", "1.", ".5", "+1", "NaN", "Infinity", "-Infinity", "1e400",
    "null", "true", '"a"', '{"b64": "AA=="}', "\ufeff", "\u00a0", "\u00e9", "\U0001f600", "\x7f",
    "\x01", "\x0b", "\u2028", "12345678901234567890",
)  # fmt: skip


# Values the fuzzer puts in a number's place: the body often stays valid, with another value.
VALUES = (
    "-0", "-0.0", "-0.000", "0", "1.0", "1.", ".5", "+1", "+1.5", "007", "-00", "1e400", "+1e400",
    "1E-7", "+1e16", "12345678901234567890", "+12345678901234567890", "NaN", "Infinity",
    "-Infinity", "nan", '"a"', '"caf\u00e9"', '"x,y"', '"q""q"', "null", "true", "[]", "[1, 2]",
    '{"b64": "AA=="}', "\u00e9", "\U0001f600", "\x7f", "",
)  # fmt: skip
NUMBER = re.compile(r"[-+0-9.eE]+")


def replace_a_number(rng: random.Random, body: str) -> str:
    found = NUMBER.search(body, rng.randint(0, len(body)))
    if found is None:
        return body
    return body[: found.start()] + rng.choice(VALUES) + body[found.end() :]


def mutate(rng: random.Random, body: str) -> str:
    """One mutation of ``body``: a number replaced by another value, a piece cut, repeated or
    moved, or a token inserted."""
    at = rng.randint(0, len(body))
    end = min(len(body), at + rng.randint(1, 12))
    choice = rng.randrange(7)
    if choice >= 5:
        return replace_a_number(rng, body)
    if choice == 0:
        return body[:at] + body[end:]
    if choice == 1:
        return body[:end] + body[at:end] + body[end:]
    if choice == 2:
        other = rng.randint(0, len(body))
        return body[:at] + body[end:other] + body[at:end] + body[other:]
    return body[:at] + rng.choice(TOKENS) + body[at:]


def fuzzed_bodies(count: int, seed: int) -> list[Case]:
    """``count`` mutations of the shapes (one to four each, mostly one), under their type or
    another."""
    rng = random.Random(seed)
    shapes = [(kind, body) for kind, body in shape_bodies() if len(body) < 4000]
    cases = []
    for _ in range(count):
        content_type, body = rng.choice(shapes)
        for _ in range(rng.choice((1, 1, 2, 3, 4))):
            body = mutate(rng, body)
        if rng.random() < 0.1:
            content_type = rng.choice(TYPES)
        cases.append((content_type, body))
    return cases


def loose_number(rng: random.Random) -> str:
    """A number as CSV may spell it but JSON may not (a sign, a bare point, leading zeros),
    with up to 15 significant digits and an exponent from -330 to 330 now and then."""
    digits = str(rng.randrange(10 ** rng.randint(1, 15)))
    point = rng.randint(0, len(digits))
    mantissa = (
        "0" * rng.randint(0, 2) + digits[:point] + "." + digits[point:] + "0" * rng.randint(0, 2)
    )
    exponent = rng.choice(("", "", "", f"e{rng.randint(-25, 25)}", f"E+{rng.randint(0, 30)}",
                           f"E+{rng.randint(0, 330)}", f"e-{rng.randint(0, 330)}"))  # fmt: skip
    return rng.choice(("+", "-", "")) + mantissa.removeprefix("0" if point == 0 else "") + exponent


def loose_number_rows(count: int, seed: int) -> list[Case]:
    """CSV bodies of ``count`` loose numbers, ten a row."""
    rng = random.Random(seed)
    values = [loose_number(rng) for _ in range(count)]
    return [(CSV, ",".join(values[start : start + 10]) + "\n") for start in range(0, count, 10)]
