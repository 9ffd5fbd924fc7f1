"""DataProcessing: InputFilter, JoinSource and OutputFilter on JSON and CSV records.

SageMaker's JSONPath subset: ``$``, ``.name`` / ``['name', ...]`` children, ``[i, ...]``
indices (negative from the end), ``[start:end]`` slices and ``*`` wildcards; no recursive
descent (``..``) or filter expressions. Expressions are parsed by jsonpath-ng, checked
against the subset once, and applied per record:

- A CSV record is the array of its columns (strings, as read), written back as CSV.
- A JSON record is the parsed value, written back as compact JSON.
- A path that names one element gives that element; several names give an object of
  them (``$['id','SageMakerOutput']``); indices, slices and wildcards give an array.
- JoinSource ``Input``: for JSON, an object input gets the answer under
  ``SageMakerOutput``, an array input gets it appended; for CSV, the answer's columns are
  appended to the input's.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from typing import Any

from jsonpath_ng import JSONPath, parse
from jsonpath_ng.jsonpath import Child, Descendants, Fields, Index, Root, Slice, Wildcard

from sagemaker_tfs.wire.http_headers import media_type

JOIN_KEY = "SageMakerOutput"
_SUPPORTED_NODES = (Root, Child, Fields, Index, Slice, Wildcard)


class FilterError(ValueError):
    """A record or an answer that a filter cannot apply to; the message says why."""


def _is_csv(content_type: str) -> bool:
    return media_type(content_type).name == "text/csv"


def compile_path(expression: str, option: str) -> JSONPath:
    """Parse ``expression``; raises ``FilterError`` outside SageMaker's subset."""
    if not expression.startswith("$"):
        raise FilterError(f"{option} {expression!r}: a JSONPath starts with '$'")
    try:
        path = parse(expression)
    except Exception as error:  # jsonpath-ng raises bare Exceptions for syntax errors
        raise FilterError(f"{option} {expression!r}: {error}") from None
    stack: list[Any] = [path]
    while stack:
        node = stack.pop()
        if isinstance(node, Descendants) or not isinstance(node, _SUPPORTED_NODES):
            raise FilterError(
                f"{option} {expression!r}: SageMaker supports only $, .name, ['name',...], "
                "[i,...], [start:end] and * (no '..' or filter expressions)"
            )
        if isinstance(node, Child):
            stack.extend((node.left, node.right))
    return path


def _gives_array(path: JSONPath) -> bool:
    node = path
    while isinstance(node, Child):
        if isinstance(node.right, (Slice, Wildcard)) or (
            isinstance(node.right, Index) and len(node.right.indices) > 1
        ):
            return True
        node = node.left
    return False


def select(path: JSONPath, document: Any) -> Any:
    """What ``path`` picks out of ``document``, shaped as SageMaker shapes it."""
    matches = path.find(document)
    last = path.right if isinstance(path, Child) else path
    if isinstance(last, Fields) and len(last.fields) > 1:
        return {str(m.path.fields[0]): m.value for m in matches}
    if _gives_array(path):
        return [m.value for m in matches]
    if not matches:
        raise FilterError(f"'{path}' matches nothing in {_preview(document)}")
    return matches[0].value


def _preview(document: Any) -> str:
    text = json.dumps(document, separators=(",", ":"))
    return text if len(text) <= 120 else text[:117] + "..."


@dataclass(frozen=True)
class DataProcessing:
    """The three settings, compiled once, with the content types they read and write."""

    content_type: str
    accept: str
    input_filter: JSONPath | None
    output_filter: JSONPath | None
    join_input: bool

    @classmethod
    def build(
        cls,
        content_type: str,
        accept: str,
        input_filter: str | None,
        output_filter: str | None,
        join_source: str,
    ) -> DataProcessing:
        return cls(
            content_type,
            accept,
            compile_path(input_filter, "--input-filter") if input_filter else None,
            compile_path(output_filter, "--output-filter") if output_filter else None,
            join_source == "Input",
        )

    @property
    def filters_input(self) -> bool:
        return self.input_filter is not None

    @property
    def per_record_output(self) -> bool:
        """Answers must be matched to their records (split per line)."""
        return self.join_input or self.output_filter is not None

    def filter_input(self, record: bytes) -> bytes:
        if self.input_filter is None:
            return record
        csv_input = _is_csv(self.content_type)
        return _dump(select(self.input_filter, _load(record, csv_input, "input")), csv_input)

    def process_output(self, record: bytes, answer: bytes) -> bytes:
        """The line written for one record: its answer, joined and filtered as configured."""
        csv_answer = _is_csv(self.accept)
        if not self.join_input and self.output_filter is None:
            return answer
        value = _load(answer, csv_answer, "answer")
        csv_out = csv_answer
        if self.join_input:
            csv_input = _is_csv(self.content_type)
            value = _join(_load(record, csv_input, "input"), value, csv_input)
            csv_out = csv_input
        if self.output_filter is not None:
            value = select(self.output_filter, value)
        return _dump(value, csv_out)


def _join(source: Any, answer: Any, csv_input: bool) -> Any:
    if csv_input:
        return list(source) + (answer if isinstance(answer, list) else [answer])
    if isinstance(source, dict):
        return {**source, JOIN_KEY: answer}
    if isinstance(source, list):
        return [*source, answer]
    raise FilterError(
        f"cannot join an answer to the JSON input {_preview(source)}: "
        "it is neither an object nor an array"
    )


def _load(data: bytes, as_csv: bool, what: str) -> Any:
    try:
        text = data.decode("utf-8")
        if as_csv:
            rows = list(csv.reader(io.StringIO(text)))
            if len(rows) != 1:
                raise FilterError(f"the {what} is {len(rows)} CSV rows, not one")
            return rows[0]
        return json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError, csv.Error) as error:
        kind = "CSV" if as_csv else "JSON"
        raise FilterError(f"the {what} is not {kind}: {error}") from None


def _dump(value: Any, as_csv: bool) -> bytes:
    if as_csv:
        row = value if isinstance(value, list) else [value]
        out = io.StringIO()
        csv.writer(out, lineterminator="").writerow(
            [
                json.dumps(v, separators=(",", ":")) if isinstance(v, (dict, list)) else v
                for v in row
            ]
        )
        return out.getvalue().encode("utf-8")
    return json.dumps(value, separators=(",", ":")).encode("utf-8")
