"""A streaming handler for the tests: the JSON body's "mode" says how its generator behaves.

- handshake: yields "first\n", then waits (up to 10 s) for the file "flag" that the client
  creates once it has read the first chunk, then yields "after flag\n" (or "no flag\n").
- fail_after: yields "n" lines, then raises (a failure mid-stream).
- bad_chunk: yields a line, then an int (not a chunk).
- fail_before: raises before its first chunk.
- endless: a line every "interval" seconds, up to 100,000; each yield writes its count to the
  file "marker", and its close (GeneratorExit) writes "closed after N" there.
- size: "total" bytes in chunks of "chunk" bytes (the same object each time), the first
  starting with the time of its yield: {"first_yield": T} and a newline.
- paced: "n" lines {"i": I, "t": T}, T the time of the line's yield, "interval" seconds
  apart (tokens of a generative model).
- session: the session id and how many requests the session has had, as one chunk.
"""

import json
import os
import time


def _handshake(request):
    yield "first\n"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if os.path.exists(request["flag"]):
            yield "after flag\n"
            return
        time.sleep(0.01)
    yield "no flag\n"


def _fail_after(request):
    for number in range(request["n"]):
        yield f"line {number}\n"
    raise RuntimeError("broke off on purpose")


def _bad_chunk(request):
    yield "a line\n"
    yield 42


def _fail_before(request):
    raise RuntimeError("failed before the first chunk")
    yield  # a generator all the same


def _endless(request):
    count = 0
    try:
        while count < 100_000:
            count += 1
            with open(request["marker"], "w") as marker:
                marker.write(str(count))
            yield f"line {count}\n"
            time.sleep(request["interval"])
    except GeneratorExit:
        with open(request["marker"], "w") as marker:
            marker.write(f"closed after {count}")
        raise


def _size(request):
    total, size = request["total"], request["chunk"]
    first = json.dumps({"first_yield": time.time()}).encode() + b"\n"
    yield first
    sent = len(first)
    piece = b"x" * size
    while sent + size <= total:
        yield piece
        sent += size
    if total > sent:
        yield piece[: total - sent]


def _paced(request):
    for number in range(request["n"]):
        if number:
            time.sleep(request["interval"])
        yield json.dumps({"i": number, "t": time.time()}) + "\n"


def _session(request, context):
    count = context.session.get("count", 0) + 1
    context.session["count"] = count
    yield json.dumps({"session_id": context.session_id, "count": count})


def handler(data, context):
    request = json.load(data)
    mode = request["mode"]
    if mode == "session":
        return _session(request, context), "application/json"
    modes = {
        "handshake": _handshake,
        "fail_after": _fail_after,
        "bad_chunk": _bad_chunk,
        "fail_before": _fail_before,
        "endless": _endless,
        "size": _size,
        "paced": _paced,
    }
    return modes[mode](request), "text/plain"
