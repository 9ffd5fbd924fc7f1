"""The model servers' own metrics, passed through under TF Serving's names.

Each model server (TF Serving's binary or ours) exports its metrics at ``MONITORING_PATH`` on
its REST port (``command_lines`` writes it into their monitoring config). At each
scrape they are fetched (concurrently) and passed through as text, every sample given a
``model_server`` label (the supervised child's name) and the families of several model
servers joined, so that each family appears once. The text is relabelled line by line
rather than parsed into ``prometheus_client`` families and written out again: parsing 5,700
lines (50 models' load-time histograms) took ~100 ms, over the budget of a whole scrape.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from prometheus_client.utils import floatToGoString

from sagemaker_tfs.wire.metrics import UNKNOWN_MODEL

logger = logging.getLogger(__name__)

# Every model server exports TF Serving's Prometheus metrics on its REST port at this path.
MONITORING_PATH = "/monitoring/prometheus/metrics"
FETCH_TIMEOUT_SECONDS = 2.0
MAX_CONCURRENT_FETCHES = 8
LABEL = "model_server"


@dataclass(frozen=True)
class MonitoredServer:
    """A model server to scrape: its child's name and its REST port."""

    name: str
    rest_port: int


def fetch(server: MonitoredServer, path: str, timeout: float = FETCH_TIMEOUT_SECONDS) -> str:
    """The exposition text of one model server; "" when it does not answer (starting, gone)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=timeout)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        body = response.read()
        if response.status != 200:
            logger.debug("%s: %s answered %d", server.name, path, response.status)
            return ""
        return body.decode("utf-8", "replace")
    except OSError as error:
        logger.debug("%s: cannot read its metrics: %s", server.name, error)
        return ""
    finally:
        connection.close()


_MODEL_NAME = re.compile(r'model_name="((?:[^"\\]|\\.)*)"')
_UNKNOWN_LABEL = f'model_name="{UNKNOWN_MODEL}"'


class Families:
    """Exposition lines grouped by family, in the order families were first seen.

    ``served_models(name)``: whether a ``model_name`` label may pass as it is; the samples of
    any other name (TF Serving's binary counts requests by the name asked for, made-up ones
    included) are summed under ``model_name="unknown"`` (all are counters or histograms)."""

    def __init__(self, served_models: Callable[[str], bool] = lambda name: True) -> None:
        self._served_models = served_models
        self._headers: dict[str, dict[str, str]] = {}
        self._samples: dict[str, list[str]] = {}
        self._unknown: dict[str, dict[str, float]] = {}  # family -> series -> sum

    def add(self, text: str, server_name: str) -> None:
        """One model server's text; each sample gets ``model_server="server_name"``."""
        label = f'{LABEL}="{server_name}"'
        family = ""
        for line in text.splitlines():
            if not line.strip():
                continue
            if line.startswith("#"):  # HELP and TYPE kept once; "# EOF" and comments dropped
                parts = line.split(None, 3)
                if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                    family = parts[2]
                    self._headers.setdefault(family, {}).setdefault(parts[1], line)
                    self._samples.setdefault(family, [])
                continue
            line = with_label(line, label)
            found = _MODEL_NAME.search(line)
            if found is not None and not self._served_models(found.group(1)):
                self._add_unknown(family, line, found)
                continue
            self._samples.setdefault(family, []).append(line)

    def _add_unknown(self, family: str, line: str, found: re.Match[str]) -> None:
        relabelled = line[: found.start()] + _UNKNOWN_LABEL + line[found.end() :]
        series, _, value = relabelled.rpartition(" ")
        try:
            number = float(value)
        except ValueError:
            return
        self._samples.setdefault(family, [])
        sums = self._unknown.setdefault(family, {})
        sums[series] = sums.get(series, 0.0) + number

    def text(self) -> str:
        lines: list[str] = []
        for family, samples in self._samples.items():
            headers = self._headers.get(family, {})
            lines += [headers[kind] for kind in ("HELP", "TYPE") if kind in headers]
            lines += samples
            sums = self._unknown.get(family, {})
            lines += [f"{series} {floatToGoString(total)}" for series, total in sums.items()]
        return "\n".join(lines) + "\n" if lines else ""


def with_label(sample: str, label: str) -> str:
    """``name{a="b"} 1`` -> ``name{LABEL,a="b"} 1``; ``name 1`` -> ``name{LABEL} 1``."""
    brace, space = sample.find("{"), sample.find(" ")
    if 0 <= brace < space or (brace >= 0 and space < 0):
        separator = "" if sample[brace + 1 : brace + 2] == "}" else ","
        return f"{sample[: brace + 1]}{label}{separator}{sample[brace + 1 :]}"
    if space < 0:
        return sample
    return f"{sample[:space]}{{{label}}}{sample[space:]}"


def exposition(
    servers: Sequence[MonitoredServer],
    path: str,
    served_models: Callable[[str], bool] = lambda name: True,
) -> str:
    """Every server's metrics as one text, each family once; ``model_name`` labels of models
    not served summed as ``unknown``."""
    if len(servers) <= 1:
        texts = [fetch(server, path) for server in servers]
    else:
        workers = min(MAX_CONCURRENT_FETCHES, len(servers))
        with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="metrics") as pool:
            texts = list(pool.map(lambda server: fetch(server, path), servers))
    families = Families(served_models)
    for server, text in zip(servers, texts, strict=True):
        families.add(text, server.name)
    return families.text()
