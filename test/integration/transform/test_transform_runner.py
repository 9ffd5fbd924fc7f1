"""The driver against a scripted endpoint (conftest.py): order under concurrency, bounded
concurrency, retries, and failures that leave no complete-looking output."""

from __future__ import annotations

from pathlib import Path

import pytest
from sagemaker_tfs.transform.endpoint_client import EndpointClient
from sagemaker_tfs.transform.job import TransformJob, resolve
from sagemaker_tfs.transform.progress import Summary
from sagemaker_tfs.transform.runner import JobFailed, Runner
from scripted_endpoint import ScriptedEndpoint


def run(
    endpoint: ScriptedEndpoint,
    input_path: Path,
    output: Path,
    content_type: str = "application/jsonlines",
    **fields: object,
) -> Summary:
    job = TransformJob(
        str(input_path),
        str(output),
        content_type,
        endpoint=endpoint.url,
        progress="none",
        **fields,
    )  # type: ignore[arg-type]
    client = EndpointClient(endpoint.url, job.content_type, None, 4, job.invocations_max_retries)
    resolved = resolve(job, client.execution_parameters())
    try:
        return Runner(resolved, client).run()
    finally:
        client.close()


def write_lines(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_answers_are_assembled_in_input_order_under_concurrency(
    endpoint: ScriptedEndpoint, tmp_path: Path
) -> None:
    lines = [f'{{"r": {i}}}' for i in range(300)]
    write_lines(tmp_path / "in" / "part-1.jsonl", lines)
    write_lines(tmp_path / "in" / "sub" / "part-2.jsonl", lines[:5])
    summary = run(
        endpoint, tmp_path / "in", tmp_path / "out", split_type="Line", assemble_with="Line"
    )
    out = (tmp_path / "out" / "part-1.jsonl.out").read_text().splitlines()
    assert out == [line.upper() for line in lines]
    assert (tmp_path / "out" / "sub" / "part-2.jsonl.out").read_text().splitlines() == [
        line.upper() for line in lines[:5]
    ]
    assert 1 < endpoint.most_in_flight <= 16  # MaxConcurrentTransforms from the container
    assert (summary.files_done, summary.records, summary.requests) == (2, 305, 305)


def test_multi_record_and_assemble_none_concatenate_answers(
    endpoint: ScriptedEndpoint, tmp_path: Path
) -> None:
    lines = [f"r{i:04d}" + "x" * 100 for i in range(50)]
    write_lines(tmp_path / "in.txt", lines)
    summary = run(
        endpoint,
        tmp_path / "in.txt",
        tmp_path / "out",
        split_type="Line",
        batch_strategy="MultiRecord",
        max_payload_mb=1,
    )
    assert summary.requests == 1
    assert (tmp_path / "out" / "in.txt.out").read_text() == "".join(
        line.upper() + "\n" for line in lines
    )


def test_5xx_is_retried(endpoint: ScriptedEndpoint, tmp_path: Path) -> None:
    write_lines(tmp_path / "in.jsonl", ["ok1", "flaky2", "ok3"])
    summary = run(
        endpoint,
        tmp_path / "in.jsonl",
        tmp_path / "out",
        split_type="Line",
        assemble_with="Line",
        invocations_max_retries=2,
    )
    assert (tmp_path / "out" / "in.jsonl.out").read_text() == "OK1\nFLAKY2\nOK3\n"
    assert endpoint.attempts[b"flaky2\n"] == 3 and summary.retries == 2


@pytest.mark.parametrize(
    ("bad_line", "retries", "attempts", "reason"),
    [
        ("poison57", 1, 2, 'HTTP 500: {"error": "model server crashed"} after 2 attempts'),
        ("bad57", 3, 1, 'HTTP 400: {"error": "bad record"}'),  # a 4xx is not retried
        ("sleep57", 0, 1, "no answer within 4s"),
    ],
)
def test_a_failing_record_fails_the_job_naming_file_and_record(
    endpoint: ScriptedEndpoint,
    tmp_path: Path,
    bad_line: str,
    retries: int,
    attempts: int,
    reason: str,
) -> None:
    write_lines(tmp_path / "in" / "a.jsonl", [f"a{i}" for i in range(10)])
    lines = [f"b{i}" for i in range(100)]
    lines[56] = bad_line
    write_lines(tmp_path / "in" / "b.jsonl", lines)
    write_lines(tmp_path / "in" / "c.jsonl", [f"c{i}" for i in range(10)])
    with pytest.raises(JobFailed) as failure:
        run(
            endpoint,
            tmp_path / "in",
            tmp_path / "out",
            split_type="Line",
            invocations_max_retries=retries,
        )
    message = str(failure.value)
    assert message.startswith(f"{tmp_path / 'in' / 'b.jsonl'}: record 57: "), message
    assert reason in message
    assert endpoint.attempts[bad_line.encode() + b"\n"] == attempts
    outputs = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert outputs == ["a.jsonl.out"]  # complete before the failure; no partial b or c


def test_a_record_over_the_payload_fails_before_it_is_sent(
    endpoint: ScriptedEndpoint, tmp_path: Path
) -> None:
    write_lines(tmp_path / "in.jsonl", ["small", "x" * (1 << 20), "never"])
    with pytest.raises(JobFailed, match=r"in.jsonl: record 2 is 1048577 bytes, over MaxPayload"):
        run(endpoint, tmp_path / "in.jsonl", tmp_path / "out", split_type="Line")
    assert b"never\n" not in endpoint.attempts
    assert list(tmp_path.glob("out/**/*")) == []


def test_whole_objects_are_read_and_sent_concurrently(
    endpoint: ScriptedEndpoint, tmp_path: Path
) -> None:
    for index in range(40):
        (tmp_path / "in" / f"{index:03d}.bin").parent.mkdir(exist_ok=True)
        (tmp_path / "in" / f"{index:03d}.bin").write_bytes(b"image %d" % index)
    run(endpoint, tmp_path / "in", tmp_path / "out")
    for index in range(40):
        assert (tmp_path / "out" / f"{index:03d}.bin.out").read_bytes() == b"IMAGE %d" % index
    assert endpoint.most_in_flight > 1


def test_csv_filters_and_join_with_several_records_per_request(
    endpoint: ScriptedEndpoint, tmp_path: Path
) -> None:
    """The endpoint answers one line per line sent, so each answer is matched to its record."""
    write_lines(tmp_path / "in.csv", [f"id-{i},{i}.5,x{i}" for i in range(40)])
    summary = run(
        endpoint,
        tmp_path / "in.csv",
        tmp_path / "out",
        content_type="text/csv",
        accept="text/csv",
        split_type="Line",
        batch_strategy="MultiRecord",
        assemble_with="Line",
        input_filter="$[1:]",
        join_source="Input",
        output_filter="$[0,-1]",
    )
    assert summary.requests == 1
    sent = next(iter(endpoint.attempts))
    assert sent == b"".join(b"%d.5,x%d\n" % (i, i) for i in range(40))  # the id filtered out
    lines = (tmp_path / "out" / "in.csv.out").read_text().splitlines()
    assert lines == [f"id-{i},X{i}" for i in range(40)]  # input id + the answer's last column
