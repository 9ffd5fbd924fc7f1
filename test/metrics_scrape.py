"""The stack's metrics path as the tests read it: with ``prometheus_client``'s own parser.

Invocations are counted by the supervisor from nginx's log lines, which nginx writes within
``EDGE_FLUSH_SECONDS`` of the answer (nginx/metrics.conf): ``wait_for_samples`` polls until
a scrape shows what a test expects, and ``settled_scrape`` is a baseline that counts every
invocation answered before it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import requests
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from sagemaker_tfs.supervisor.nginx_config import EDGE_LOG_FLUSH_MS


class Scrape:
    """One scrape, parsed: samples by name, each family once."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.families = {}
        for family in text_string_to_metric_families(text):
            assert family.name not in self.families, f"family {family.name} appears twice"
            self.families[family.name] = family

    def samples(self, name: str, **labels: str) -> list[Sample]:
        """Every sample called ``name`` whose labels include ``labels``."""
        return [
            sample
            for family in self.families.values()
            for sample in family.samples
            if sample.name == name and labels.items() <= sample.labels.items()
        ]

    def value(self, name: str, **labels: str) -> float:
        """The sum of those samples (0 when there is none)."""
        return sum(sample.value for sample in self.samples(name, **labels))


EDGE_FLUSH_SECONDS = EDGE_LOG_FLUSH_MS / 1000


def settled_scrape(url: str) -> Scrape:
    """A scrape once nginx has written every line of the invocations answered so far."""
    time.sleep(EDGE_FLUSH_SECONDS * 2)
    return scrape(url)


def scrape(url: str) -> Scrape:
    response = requests.get(url, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return Scrape(response.text)


def wait_for_samples(
    url: str, condition: Callable[[Scrape], bool], timeout: float = 10.0
) -> Scrape:
    """Scrapes until ``condition`` holds (the last scrape is returned either way)."""
    deadline = time.monotonic() + timeout
    while True:
        found = scrape(url)
        if condition(found) or time.monotonic() > deadline:
            return found
        time.sleep(0.1)
