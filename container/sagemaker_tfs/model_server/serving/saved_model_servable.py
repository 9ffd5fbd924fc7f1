"""One loaded SavedModel version, run the way TF Serving runs it: a TF1 graph and a Session.

``tf.saved_model.load`` cannot load TF1 models that parse tf.Example (TF Serving's own
half_plus_three), while the TF1 loader handles both TF1 exports and TF2/Keras exports, so
every version is loaded into its own ``tf.Graph`` + ``tf.compat.v1.Session``.

Sessions are thread-safe, so requests run concurrently with no lock around ``run``; the
only lock guards the cache of fast callables (one per signature, input and output set).
When batching is on, every run goes through the batch scheduler instead of the callable.

A run with no other run of the version in flight executes its graph in the request's own
thread (``RunOptions.inter_op_thread_pool = -1``) rather than in TensorFlow's inter-op pool:
handing a small graph to the pool and waiting for it costs more CPU than the graph itself
(~0.1 ms a run here, docs/performance.md). Runs that overlap go to the pool, which bounds how
many ops execute at once: a compute-bound model run in every caller's thread at once thrashes
the cores (20% fewer answers at 8 connections, measured); unless the graph's runs are short
(``SessionRunner``), which then always run inline. Graphs over
``INLINE_GRAPH_MAX_BYTES`` always use the pool, since each callable holds its own copy of the
graph's constants and running inline needs a second one.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from itertools import islice

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2, meta_graph_pb2
from tensorflow.python.saved_model.loader_impl import SavedModelLoader, get_init_op
from tensorflow_serving.apis import classification_pb2, regression_pb2

from sagemaker_tfs.model_server.errors import Code, ServingError, unavailable
from sagemaker_tfs.model_server.monitoring import METRICS
from sagemaker_tfs.model_server.serving.classify_regress import (
    CLASSIFY_METHOD,
    REGRESS_METHOD,
    REGRESS_OUTPUT,
    Classified,
    Examples,
    check_regression_outputs,
    classification_arrays,
    classification_outputs,
    classification_result,
    examples_input,
    regression_result,
    regression_values,
    serialized_examples,
)
from sagemaker_tfs.model_server.serving.predict_checks import (
    check_inputs,
    check_predict_method,
    output_aliases,
)
from sagemaker_tfs.model_server.serving.rank_guard import rank_strict_inputs
from sagemaker_tfs.model_server.serving.servable import (
    BatchedRuns,
    RunFunction,
    SessionRunner,
    check_caller_waits,
)
from sagemaker_tfs.model_server.serving.signatures import (
    ServableSignature,
    SignatureTable,
)
from sagemaker_tfs.model_server.serving.string_outputs import (
    JoinedNames,
    JoinedStrings,
    joined_fetches,
    joined_result,
    string_output_names,
)

# Session callables kept per version: one per (signature, inputs, outputs) that requests ask
# for; output filters are the client's choice, so the oldest go past this many.
MAX_CALLABLES = 64
# Graphs up to this size (their GraphDef, constants included) get a second callable per
# signature that runs in the caller's thread.
INLINE_GRAPH_MAX_BYTES = 16 << 20


@dataclasses.dataclass(frozen=True)
class ServableOptions:
    """How versions load and answer (``--saved_model_tags``,
    ``--enable_signature_method_name_check``)."""

    tags: tuple[str, ...] = ("serve",)
    method_name_check: bool = False


class SavedModelServable(SignatureTable, BatchedRuns):
    """A loaded model version: its session, signatures and predict/classify/regress."""

    def __init__(
        self,
        name: str,
        version: int,
        session: tf.compat.v1.Session,
        meta_graph: meta_graph_pb2.MetaGraphDef,
        options: ServableOptions = ServableOptions(),
        joined: dict[str, JoinedNames] | None = None,
    ) -> None:
        self.name = name
        self._joined = joined or {}  # string output tensor -> its joined fetches
        self.version = version
        self._session = session
        self._options = options
        super().__init__(meta_graph.signature_def)
        # signature -> alias -> the op that needs the alias's recorded rank (rank_guard.py)
        self._rank_strict = rank_strict_inputs(
            session.graph,
            {
                key: {alias: spec.name for alias, spec in signature.inputs.items()}
                for key, signature in self._signatures.items()
            },
        )
        self._callables: dict[tuple[str, tuple[str, ...], tuple[str, ...]], SessionRunner] = {}
        self._inline_allowed = meta_graph.graph_def.ByteSize() <= INLINE_GRAPH_MAX_BYTES
        self._callables_lock = threading.Lock()
        self._in_flight = 0
        self._closed = False
        self._idle = threading.Condition()

    @classmethod
    def load(
        cls,
        name: str,
        version: int,
        path: str,
        config: tf.compat.v1.ConfigProto,
        options: ServableOptions = ServableOptions(),
    ) -> SavedModelServable:
        """Load the SavedModel at ``path`` (the MetaGraph of ``options.tags``); raises on any
        load failure. The load is counted in the metrics with TF's two stages: the graph
        (``restore_graph``), then its variables and init ops (``init_graph``)."""
        graph = tf.Graph()
        session = tf.compat.v1.Session(graph=graph, config=config)
        started = time.perf_counter()
        stages: dict[str, float] = {}
        try:
            loader = SavedModelLoader(path)
            with graph.as_default():
                saver, _ = loader.load_graph(graph, list(options.tags))
                stages["restore_graph"] = time.perf_counter() - started
                meta_graph = loader.get_meta_graph_def_from_tags(list(options.tags))
                loader.restore_variables(session, saver)
                _run_init_op(loader, session, meta_graph, list(options.tags))
                stages["init_graph"] = time.perf_counter() - started - stages["restore_graph"]
                _check_variables_restored(session, graph, meta_graph, saver)
            outputs = [(t.name, t.dtype) for d in meta_graph.signature_def.values()
                       for t in d.outputs.values() if t.name]  # fmt: skip
            joined = joined_fetches(graph, string_output_names(outputs))
            graph.finalize()
            servable = cls(name, version, session, meta_graph, options, joined)
        except BaseException:
            session.close()
            METRICS.record_load(path, False, stages)
            raise
        METRICS.record_load(path, True, stages)
        return servable

    def close(self, drain_timeout: float = 30.0) -> None:
        """Refuse new runs, wait (bounded) for runs in flight, then close the session."""
        with self._idle:
            self._closed = True
            self._idle.wait_for(lambda: self._in_flight == 0, timeout=drain_timeout)
        self._session.close()

    def _enter(self) -> bool:
        """Count a run in; True when it is the only one in flight."""
        with self._idle:
            if self._closed:
                raise unavailable(
                    f"Servable {{name: {self.name} version: {self.version}}} is being unloaded"
                )
            self._in_flight += 1
            return self._in_flight == 1

    def _leave(self) -> None:
        with self._idle:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.notify_all()

    # ----- running -----

    def _callable(
        self, signature: ServableSignature, inputs: tuple[str, ...], fetches: tuple[str, ...]
    ) -> SessionRunner:
        key = (signature.name, inputs, fetches)
        runner = self._callables.get(key)
        if runner is not None:
            return runner
        with self._callables_lock:
            runner = self._callables.get(key)
            if runner is None:
                options = config_pb2.CallableOptions(
                    feed=[signature.inputs[alias].name for alias in inputs],
                    fetch=list(fetches),
                )
                inline = None
                if self._inline_allowed:
                    options.run_options.inter_op_thread_pool = -1  # the caller's thread
                    inline = self._session_callable(options)
                    options.run_options.ClearField("inter_op_thread_pool")
                runner = SessionRunner(self._session_callable(options), inline)
                if len(self._callables) >= MAX_CALLABLES:  # the oldest; callers keep theirs
                    self._callables.pop(next(iter(self._callables)))
                self._callables[key] = runner
        return runner

    def _session_callable(self, options: config_pb2.CallableOptions) -> RunFunction:
        # The C++ fast path: no per-call graph lookups or Python-side feed checks.
        session_callable = self._session._make_callable_from_options(options)

        def run(values: Sequence[np.ndarray]) -> list[np.ndarray]:
            return list(session_callable(*values))

        return run

    def _run(
        self,
        signature: ServableSignature,
        feeds: dict[str, np.ndarray],
        outputs: tuple[str, ...],
        api: str,
        fetches: tuple[str, ...] = (),
    ) -> list[np.ndarray]:
        inputs = tuple(sorted(feeds))
        values = [feeds[alias] for alias in inputs]
        fetches = fetches or tuple(signature.outputs[alias].name for alias in outputs)
        alone = self._enter()
        try:
            runner = self._callable(signature, inputs, fetches)
            if self._batcher is None:  # a batched task is checked when its batch forms
                check_caller_waits()
            with METRICS.runtime(self.name, api):
                if self._batcher is not None:
                    key = (self.name, self.version, signature.name, inputs, outputs)
                    return self._batcher.submit(key, values, runner)
                return runner.run(values, alone)
        except tf.errors.OpError as error:
            raise ServingError(Code(error.error_code), error.message) from None
        finally:
            self._leave()

    def predict(
        self,
        signature_name: str,
        inputs: dict[str, np.ndarray],
        output_filter: Sequence[str] = (),
    ) -> dict[str, np.ndarray]:
        """Run a predict signature; returns output alias -> array (filter order kept)."""
        signature = self.signature(signature_name)
        check_predict_method(signature, self._options.method_name_check)
        check_inputs(signature, inputs, self._rank_strict.get(signature.name, {}))
        outputs = output_aliases(signature, output_filter)
        results = self._run(signature, inputs, outputs, "Predict")
        return dict(zip(outputs, results, strict=True))

    def predict_joined(
        self, signature_name: str, inputs: dict[str, np.ndarray]
    ) -> dict[str, np.ndarray | JoinedStrings]:
        """``predict`` with string outputs fetched joined (``string_outputs``), for the REST
        answer; as ``predict`` when runs are batched (the batcher splits arrays)."""
        signature = self.signature(signature_name)
        outputs = output_aliases(signature, ())
        names = [signature.outputs[alias].name for alias in outputs]
        if self._batcher is not None or not any(name in self._joined for name in names):
            return dict(self.predict(signature_name, inputs))
        check_predict_method(signature, self._options.method_name_check)
        check_inputs(signature, inputs, self._rank_strict.get(signature.name, {}))
        fetches = tuple(f for name in names for f in self._joined.get(name, (name,)))
        results = iter(self._run(signature, inputs, outputs, "Predict", fetches))
        return {
            alias: joined_result(*islice(results, 3)) if name in self._joined else next(results)
            for alias, name in zip(outputs, names, strict=True)
        }

    def classify(
        self, signature_name: str, request_input: Examples
    ) -> classification_pb2.ClassificationResult:
        return classification_result(self.classify_arrays(signature_name, request_input))

    def classify_arrays(self, signature_name: str, request_input: Examples) -> Classified:
        signature = self.signature(signature_name)
        check = self._options.method_name_check
        input_alias = examples_input(signature, CLASSIFY_METHOD, check)
        outputs = classification_outputs(signature)
        examples = serialized_examples(request_input)
        values = self._run(signature, {input_alias: examples}, outputs, "Classify")
        return classification_arrays(len(examples), dict(zip(outputs, values, strict=True)))

    def regress(
        self, signature_name: str, request_input: Examples
    ) -> regression_pb2.RegressionResult:
        return regression_result(self.regress_values(signature_name, request_input))

    def regress_values(self, signature_name: str, request_input: Examples) -> np.ndarray:
        signature = self.signature(signature_name)
        input_alias = examples_input(signature, REGRESS_METHOD, self._options.method_name_check)
        check_regression_outputs(signature)
        examples = serialized_examples(request_input)
        (values,) = self._run(signature, {input_alias: examples}, (REGRESS_OUTPUT,), "Regress")
        return regression_values(len(examples), values)


def _variables_feeding(graph: tf.Graph, tensor_names: list[str]) -> list[tf.Tensor]:
    """Resource variable handles the given tensors depend on (walking the outer graph)."""
    seen: set[str] = set()
    elements = [graph.as_graph_element(name) for name in tensor_names]
    stack = [element if isinstance(element, tf.Operation) else element.op for element in elements]
    handles = []
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        if op.type == "VarHandleOp":
            handles.append(op.outputs[0])
        stack.extend(tensor.op for tensor in op.inputs)
        stack.extend(op.control_inputs)
    return handles


def _run_init_op(
    loader: SavedModelLoader,
    session: tf.compat.v1.Session,
    meta_graph: meta_graph_pb2.MetaGraphDef,
    tags: list[str],
) -> None:
    """The loader's ``run_init_ops``, except for an init op that is a lone NoOp (what TF2
    exports have): running it does nothing, yet makes TensorFlow optimize the whole graph for
    it (~0.12 s of MobileNetV2's load, docs/performance.md)."""
    init_op = get_init_op(meta_graph)
    if init_op is None:
        return
    if init_op.type == "NoOp" and not init_op.inputs and not init_op.control_inputs:
        return
    loader.run_init_ops(session, tags)


def _restored_by(graph: tf.Graph, saver: tf.compat.v1.train.Saver | None) -> set[str]:
    """Names of the variables (VarHandleOps) the saver's restore op writes: a TF1 saver
    assigns each from its RestoreV2, a TF2 export's restore function takes them as inputs.
    Once the restore has run (it raises otherwise), these hold values."""
    if saver is None:
        return set()
    return {
        handle.op.name for handle in _variables_feeding(graph, [saver.saver_def.restore_op_name])
    }


def _check_variables_restored(
    session: tf.compat.v1.Session,
    graph: tf.Graph,
    meta_graph: meta_graph_pb2.MetaGraphDef,
    saver: tf.compat.v1.train.Saver | None,
) -> None:
    """Fail the load if a signature reads a variable the checkpoint did not restore.

    Some TF2 exports (e.g. a Keras 3 model wrapped in a ``tf.Module`` and saved with
    ``tf.saved_model.save``) capture variables the checkpoint does not restore; every
    request would then fail with "Could not find variable". Failing the load says so once.

    Only the variables the restore op does not write are asked about in the session (the
    init ops may have set them): a run of new ops makes TensorFlow optimize the whole graph
    again, ~0.35 s of MobileNetV2's ~1.4 s load (docs/performance.md), and a model whose
    variables all come from its checkpoint needs none.
    """
    outputs = [
        info.name
        for signature in meta_graph.signature_def.values()
        for info in signature.outputs.values()
        if info.name
    ]
    restored = _restored_by(graph, saver)
    handles = [h for h in _variables_feeding(graph, outputs) if h.op.name not in restored]
    if not handles:
        return
    checks = [tf.raw_ops.VarIsInitializedOp(resource=handle) for handle in handles]
    initialized = session.run(checks)
    missing = [handle.op.name for handle, ok in zip(handles, initialized, strict=True) if not ok]
    if missing:
        raise ValueError(
            f"{len(missing)} variables read by the signatures were not restored from the "
            f"checkpoint (e.g. {', '.join(sorted(missing)[:3])}); the SavedModel cannot be "
            "served in a TF1 session as TF Serving runs it (export Keras models with "
            "model.export())"
        )
