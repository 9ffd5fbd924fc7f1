"""Running a resolved job: read, batch, invoke with bounded concurrency, assemble in order.

The main thread reads each input object as a stream, splits and packs it into mini-batches
and submits them to a pool of MaxConcurrentTransforms threads (so at most that many requests
are in flight). Submitted batches wait in one FIFO window, which bounds memory: at most
``WINDOW_PER_WORKER`` per thread, and beyond one per thread at most ``WINDOW_BYTES`` of
request bodies. The main thread takes answers from the window's head, so outputs are written
in input order whatever order the answers arrive in. With SplitType None the worker
reads the object itself, so many small objects (images) are read concurrently too.

The first batch that fails for good stops the job: nothing more is sent, every output not
yet complete is discarded, and ``JobFailed`` names the input object and its record(s).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

from sagemaker_tfs.transform import records as recs
from sagemaker_tfs.transform.batching import MiniBatch, mini_batches
from sagemaker_tfs.transform.endpoint_client import EndpointClient, InvocationError
from sagemaker_tfs.transform.filters import DataProcessing, FilterError
from sagemaker_tfs.transform.job import TransformJob
from sagemaker_tfs.transform.progress import Progress, Summary
from sagemaker_tfs.transform.storage import InputObject, OutputSink, StorageError, list_inputs

logger = logging.getLogger(__name__)

WINDOW_PER_WORKER = 4  # queued work keeps the threads busy while the head is slow
WINDOW_BYTES = 256 << 20


class JobFailed(RuntimeError):
    """The job stopped; the message names the input object and record, as SageMaker does."""


@dataclass
class _FileState:
    source: InputObject
    sink: OutputSink | None = None


@dataclass
class _Done:
    batch: MiniBatch
    answer: bytes


@dataclass
class _Pending:
    state: _FileState
    future: Future[_Done] | None  # None: the end of this file (commit it)
    where: str = ""
    size: int = 0  # request body bytes (an estimate for whole objects)


class Runner:
    def __init__(self, job: TransformJob, client: EndpointClient) -> None:
        if not job.resolved:
            raise ValueError("resolve() the job before running it")
        self.job = job
        self.client = client
        self.limit = job.max_payload_bytes
        self.processing = DataProcessing.build(
            job.content_type,
            job.accept or "",
            job.input_filter,
            job.output_filter,
            job.join_source,
        )
        self.workers = job.max_concurrent_transforms or 1

    def run(self) -> Summary:
        inputs = list(list_inputs(self.job.input, self.job.manifest))
        if not inputs:
            raise JobFailed(f"no input objects under {self.job.input}")
        sizes = [i.size for i in inputs]
        total = None if None in sizes or self.job.compression == "Gzip" else sum(sizes)  # type: ignore[arg-type]
        progress = Progress(self.job.progress, total, len(inputs))
        logger.info("%d input objects%s", len(inputs), f", {total} bytes" if total else "")
        failed = True
        try:
            self._run(inputs, progress)
            failed = False
        finally:
            summary = progress.finish(self.client.retries, failed)
        return summary

    def _run(self, inputs: list[InputObject], progress: Progress) -> None:
        window: deque[_Pending] = deque()
        window_bytes = 0
        open_states: list[_FileState] = []
        pool = ThreadPoolExecutor(self.workers, thread_name_prefix="transform")
        try:
            for source in inputs:
                state = _FileState(source)
                open_states.append(state)
                for where, size, work in self._work_items(source):
                    while len(window) >= self.workers * WINDOW_PER_WORKER or (
                        len(window) >= self.workers and window_bytes + size > WINDOW_BYTES
                    ):
                        window_bytes -= window[0].size
                        self._drain(window.popleft(), progress)
                    window.append(_Pending(state, pool.submit(work), where, size))
                    window_bytes += size
                window.append(_Pending(state, None))
            while window:
                self._drain(window.popleft(), progress)
        except BaseException:
            for pending in window:
                if pending.future is not None:
                    pending.future.cancel()
            for state in open_states:
                if state.sink is not None:
                    state.sink.abort()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _work_items(self, source: InputObject) -> Iterator[tuple[str, int, Callable[[], _Done]]]:
        """(what it is, for messages; body bytes; the function a worker runs) per request."""
        if self.job.split_type == "None":
            yield "record 1", source.size or 0, lambda: self._invoke(self._whole_object(source))
            return
        try:
            with source.open() as raw:
                stream = recs.decompressed(raw, self.job.compression)
                records = recs.split(stream, self.job.split_type, self.limit)
                prepare = self.processing.filter_input if self.processing.filters_input else None
                for batch in mini_batches(
                    records,
                    self.job.split_type,
                    self.job.batch_strategy or "",
                    self.limit,
                    prepare,
                    keep_records=self.processing.per_record_output,
                ):
                    yield batch.describe(), len(batch.body), partial(self._invoke, batch)
        except (recs.RecordError, FilterError, StorageError, OSError, EOFError) as error:
            raise JobFailed(f"{source.location}: {error}") from None

    def _whole_object(self, source: InputObject) -> MiniBatch:
        try:
            with source.open() as raw:
                data = next(
                    recs.whole_object(recs.decompressed(raw, self.job.compression), self.limit)
                )
        except (recs.RecordError, StorageError, OSError, EOFError) as error:
            raise JobFailed(f"{source.location}: {error}") from None
        body = self.processing.filter_input(data) if self.processing.filters_input else data
        return MiniBatch(0, 1, body, [data])

    def _invoke(self, batch: MiniBatch) -> _Done:
        return _Done(batch, self.client.invoke(batch.body))

    def _drain(self, pending: _Pending, progress: Progress) -> None:
        state = pending.state
        if state.sink is None:
            state.sink = OutputSink(self.job.output, state.source.name)
        if pending.future is None:
            state.sink.commit()
            progress.file_done()
            logger.debug("wrote %s", state.sink.location)
            return
        try:
            done = pending.future.result()
            output = self._assemble(done)
        except (InvocationError, FilterError) as error:
            raise JobFailed(f"{state.source.location}: {pending.where}: {error}") from None
        for piece in output:
            state.sink.write(piece)
        progress.advance(done.batch.count, len(done.batch.body), sum(map(len, output)))

    def _assemble(self, done: _Done) -> list[bytes]:
        """The output's pieces (an answer and its newline: not copied into one)."""
        line = self.job.assemble_with == "Line"
        if not self.processing.per_record_output:
            if line and not done.answer.endswith(b"\n"):
                return [done.answer, b"\n"]
            return [done.answer]
        answers = _answer_lines(done)
        pairs = zip(done.batch.records, answers, strict=True)
        parts = [self.processing.process_output(record, answer) for record, answer in pairs]
        return [b"".join(p + b"\n" for p in parts) if line else b"".join(parts)]


def _answer_lines(done: _Done) -> list[bytes]:
    """One answer per record: the whole answer for one record, else one line each."""
    if done.batch.count == 1:
        return [done.answer.rstrip(b"\r\n")]
    lines = [line for line in done.answer.splitlines() if line.strip()]
    if len(lines) != done.batch.count:
        raise FilterError(
            f"the answer has {len(lines)} lines for {done.batch.count} records, so "
            "--join-source/--output-filter cannot match them: answer one line per record "
            "(e.g. --accept application/jsonlines) or use --batch-strategy SingleRecord"
        )
    return lines
