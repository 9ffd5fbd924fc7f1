"""Which model versions are served: discovery, version policies, loading, labels, reload.

Each model's base path is scanned for version directories (numeric names only). The
version policy picks the versions to serve; new ones are loaded in the background
(START -> LOADING -> AVAILABLE, or END with the error) and versions the policy no longer
selects are unloaded (UNLOADING -> END) once no wanted version is still loading, so a
model stays available while a newer version replaces an older one. A poller repeats the
scan every ``--file_system_poll_wait_seconds``.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import threading
import time
from collections.abc import Callable

from tensorflow_serving.apis import get_model_status_pb2, status_pb2
from tensorflow_serving.config import model_server_config_pb2

from sagemaker_tfs.model_server.errors import Code, ServingError, invalid_argument, not_found
from sagemaker_tfs.model_server.model_server_config import ConfiguredModel, model_specs
from sagemaker_tfs.model_server.serving.garbage import COLLECTOR
from sagemaker_tfs.model_server.serving.servable import Servable
from sagemaker_tfs.model_server.serving.version_dirs import directory_stamp, list_versions

logger = logging.getLogger(__name__)

State = get_model_status_pb2.ModelVersionStatus.State
ServableLoader = Callable[[str, int, str], Servable]


@dataclasses.dataclass
class VersionState:
    """One version's lifecycle state, its servable once loaded, and its error if it failed."""

    version: int
    path: str
    state: int = State.START
    error: ServingError | None = None
    servable: Servable | None = None


class Model:
    """All versions of one model and its labels."""

    def __init__(self, spec: ConfiguredModel) -> None:
        self.spec = spec
        self.versions: dict[int, VersionState] = {}
        # Applied only once every label points at an available version (see reload_config).
        self.labels: dict[str, int] = {}
        # The base path's stamp when the poller last listed it (see directory_stamp).
        self.listed_stamp: tuple[int, int] | None = None

    def available(self) -> dict[int, Servable]:
        return {
            version: state.servable
            for version, state in self.versions.items()
            if state.state == State.AVAILABLE and state.servable is not None
        }


class ModelManager:
    """Holds the served models; the front ends ask it for servables and status."""

    def __init__(
        self,
        loader: ServableLoader,
        max_num_load_retries: int = 0,
        load_retry_interval_seconds: float = 60.0,
        poll_wait_seconds: float = 1.0,
        num_load_threads: int = 2,
        after_unload: Callable[[], None] = COLLECTOR.collect_soon,
        allow_labels_for_unavailable: bool = False,
    ) -> None:
        self._loader = loader
        # Once a version is closed: its graph's memory comes back with a collection.
        self._after_unload = after_unload
        self._max_retries = max_num_load_retries
        self._retry_interval = max(0.0, load_retry_interval_seconds)
        self._poll_wait = poll_wait_seconds
        self._allow_unavailable_labels = allow_labels_for_unavailable
        self._models: dict[str, Model] = {}
        self._lock = threading.RLock()
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=num_load_threads, thread_name_prefix="model-load"
        )
        self._pending: dict[concurrent.futures.Future, Model] = {}
        self._stopping = threading.Event()
        self._poller: threading.Thread | None = None

    # ----- configuration -----

    def reload_config(self, config: model_server_config_pb2.ModelServerConfig) -> None:
        """Serve exactly the models of ``config``; waits for the new versions to load.

        Only what changed is touched: a model whose entry is the same as before is neither
        rescanned nor reloaded, so adding one model to a thousand costs one model's load.
        """
        specs = {spec.name: spec for spec in model_specs(config)}
        logger.info("Adding/updating models.")
        with self._lock:
            for name in [name for name in self._models if name not in specs]:
                logger.info("Removing model: %s", name)
                self._remove_model(self._models.pop(name))
            changed = []
            for name, spec in specs.items():
                model = self._models.get(name)
                if model is not None and model.spec == spec:
                    continue  # TF Serving logs every model again; here only those that changed
                logger.info(" (Re-)adding model: %s", name)
                if model is not None and model.spec.base_path != spec.base_path:
                    self._remove_model(self._models.pop(name))
                    model = None
                if model is None:
                    logger.info(
                        "Model %s: base path %s, version policy %s",
                        name,
                        spec.base_path,
                        spec.policy.describe(),
                    )
                    model = self._models[name] = Model(spec)
                else:
                    model.spec = spec
                changed.append(model)
            for model in changed:
                if self._poll_wait >= 0:  # a negative --file_system_poll_wait_seconds: never
                    self._scan(model)
        self.wait_for_loads(changed)
        relabeled = {model.spec.name for model in changed}
        self._apply_labels(
            [spec for spec in specs.values() if spec.labels or spec.name in relabeled]
        )

    def _apply_labels(self, specs: list[ConfiguredModel]) -> None:
        """Take the config's labels, or none of them if one names an unavailable version
        (with ``--allow_version_labels_for_unavailable_models``, a new label, or one that
        keeps its version, may name a version that is not available yet)."""
        with self._lock:
            for spec in specs:
                model = self._models[spec.name]
                available = model.available()
                for label, version in spec.labels.items():
                    unchanged = model.labels.get(label, version) == version
                    if version not in available and not (
                        self._allow_unavailable_labels and unchanged
                    ):
                        raise ServingError(
                            Code.FAILED_PRECONDITION,
                            f"Request to assign label to version {version} of model "
                            f"{spec.name}, which is not currently available for inference",
                        )
            for spec in specs:
                self._models[spec.name].labels = dict(spec.labels)

    def start_polling(self) -> None:
        """Rescan the base paths every poll interval (once only if the interval is <= 0)."""
        if self._poll_wait <= 0 or self._poller is not None:
            return
        self._poller = threading.Thread(target=self._poll_loop, name="fs-poll", daemon=True)
        self._poller.start()

    def _poll_loop(self) -> None:
        """Each round lists the directories without the lock and applies each listing under
        it, so requests never wait for it; a base path whose stamp did not change since it
        was listed is not listed again (a thousand listings a second cost ~5% of a core)."""
        while not self._stopping.wait(self._poll_wait):
            with self._lock:
                models = list(self._models.values())
            for model in models:
                stamp = directory_stamp(model.spec.base_path)
                if stamp is not None and stamp == model.listed_stamp:
                    continue
                on_disk = list_versions(model.spec.base_path)
                with self._lock:
                    if self._models.get(model.spec.name) is model:
                        self._scan(model, on_disk)
                        model.listed_stamp = stamp

    def shutdown(self) -> None:
        """Stop polling and loading, and close every session."""
        self._stopping.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            for model in self._models.values():
                for state in model.versions.values():
                    if state.servable is not None:
                        state.servable.close()
                        state.servable = None

    def wait_for_loads(
        self, models: list[Model] | None = None, timeout: float | None = None
    ) -> None:
        """Block until every load of ``models`` (default: all) started so far has finished,
        successfully or not, including loads those loads started in turn."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                pending = [
                    future
                    for future, model in self._pending.items()
                    if not future.done() and (models is None or model in models)
                ]
            if not pending:
                return
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            concurrent.futures.wait(pending, timeout=remaining)
            if deadline is not None and time.monotonic() >= deadline:
                return

    # ----- loading and unloading -----

    def _scan(self, model: Model, on_disk: dict[int, str] | None = None) -> None:
        """Load the wanted versions found on disk, unload the others once none is loading
        (called under the lock; ``on_disk``: a listing made without it)."""
        if on_disk is None:
            on_disk = list_versions(model.spec.base_path)
        wanted = set(model.spec.policy.select(list(on_disk)))
        for version in sorted(wanted, reverse=True):
            state = model.versions.get(version)
            if state is None or (state.state == State.END and state.error is None):
                self._start_load(model, VersionState(version, on_disk[version]))
        still_loading = any(
            model.versions[version].state in (State.START, State.LOADING)
            for version in wanted
            if version in model.versions
        )
        if still_loading:
            return
        for version, state in model.versions.items():
            if version not in wanted and state.state == State.AVAILABLE:
                self._unload(model, state)

    def _start_load(self, model: Model, state: VersionState) -> None:
        model.versions[state.version] = state
        future = self._pool.submit(self._load, model, state)
        self._pending[future] = model
        future.add_done_callback(self._forget_load)

    def _forget_load(self, future: concurrent.futures.Future) -> None:
        with self._lock:
            self._pending.pop(future, None)

    def _load(self, model: Model, state: VersionState) -> None:
        name = model.spec.name
        with self._lock:
            state.state = State.LOADING
        logger.info("Loading servable version {name: %s version: %d}", name, state.version)
        attempt = 0
        while True:
            try:
                servable = self._loader(name, state.version, state.path)
                break
            except Exception as error:  # noqa: BLE001 - any load failure ends in END
                attempt += 1
                if attempt > self._max_retries or self._stopping.is_set():
                    self._fail(model, state, error)
                    return
                logger.warning(
                    "Loading %s version %d failed, retrying: %s", name, state.version, error
                )
                if self._stopping.wait(self._retry_interval):
                    return
        with self._lock:
            if model.versions.get(state.version) is not state or self._stopping.is_set():
                servable.close()
                return
            state.servable = servable
            state.state = State.AVAILABLE
            logger.info(
                "Successfully loaded servable version {name: %s version: %d}", name, state.version
            )
            self._scan(model)

    def _fail(self, model: Model, state: VersionState, error: Exception) -> None:
        """END with the error; a ``ServingError`` (a load TF Serving fails with a status of
        its own, such as a TFLite model's bad SignatureDefs) keeps its code and is named by
        it, any other error is UNKNOWN and named by its type."""
        if isinstance(error, ServingError):
            code, cause = error.code, f"{error.code.name}: {error.message}"
        else:
            code, cause = Code.UNKNOWN, f"{type(error).__name__}: {error}"
        message = (
            f"Loading servable: {{name: {model.spec.name} version: {state.version}}} failed: "
            f"{cause}"
        )
        logger.error("%s", message)
        with self._lock:
            state.state = State.END
            state.error = ServingError(code, message)
            self._scan(model)

    def _unload(self, model: Model, state: VersionState) -> None:
        servable_id = f"{{name: {model.spec.name} version: {state.version}}}"
        logger.info("Unloading servable version %s", servable_id)
        state.state = State.UNLOADING
        servable, state.servable = state.servable, None
        state.state = State.END
        if servable is None:
            return

        if self._stopping.is_set():
            servable.close()
        else:
            # Closing waits for requests in flight; never do that under the manager lock.
            self._pool.submit(self._close, servable, servable_id)

    def _close(self, servable: Servable, servable_id: str) -> None:
        servable.close()
        logger.info("Done unloading servable version %s", servable_id)
        self._after_unload()

    def _remove_model(self, model: Model) -> None:
        for state in model.versions.values():
            if state.state == State.AVAILABLE:
                self._unload(model, state)
            elif state.state in (State.START, State.LOADING):
                state.state = State.END

    # ----- lookups -----

    def get_servable(
        self, name: str, version: int | None = None, label: str | None = None
    ) -> Servable:
        """The servable a request addresses, or TF Serving's NotFound/InvalidArgument error."""
        with self._lock:
            model = self._models.get(name)
            if label is not None:
                version = _labeled_version(model, label)
            available = model.available() if model is not None else {}
            if version is None:
                if not available:
                    raise not_found(f"Servable not found for request: Latest({name})")
                return available[max(available)]
            servable = available.get(version)
            if servable is None:
                raise not_found(f"Servable not found for request: Specific({name}, {version})")
            return servable

    def serves(self, name: str) -> bool:
        """Whether a model of that name is in the config in effect (no lock: counted for each
        request, which must not wait behind a reload; a dict lookup is atomic)."""
        return name in self._models

    def get_model_status(
        self, request: get_model_status_pb2.GetModelStatusRequest
    ) -> get_model_status_pb2.GetModelStatusResponse:
        """Versions newest first, with state and error; NotFound as TF Serving words it."""
        name = request.model_spec.name
        if not name:
            raise invalid_argument("Missing model name in request.")
        with self._lock:
            model = self._models.get(name)
            states = sorted(
                model.versions.values() if model else [], key=lambda s: s.version, reverse=True
            )
            if request.model_spec.HasField("version"):
                wanted = request.model_spec.version.value
                states = [state for state in states if state.version == wanted]
                if not states:
                    raise not_found(f"Could not find version {wanted} of model {name}")
            elif request.model_spec.version_label:
                version = _labeled_version(model, request.model_spec.version_label)
                states = [state for state in states if state.version == version]
            if not states:
                raise not_found(f"Could not find any versions of model {name}")
            response = get_model_status_pb2.GetModelStatusResponse()
            for state in states:
                response.model_version_status.append(_version_status(state))
            return response


def _labeled_version(model: Model | None, label: str) -> int:
    """The version ``label`` names, or TF Serving's InvalidArgument error."""
    labels = model.labels if model is not None else {}
    if label not in labels:
        raise invalid_argument(f"Unrecognized servable version label: {label}")
    return labels[label]


def _version_status(state: VersionState) -> get_model_status_pb2.ModelVersionStatus:
    status = get_model_status_pb2.ModelVersionStatus(version=state.version, state=state.state)
    status.status.CopyFrom(status_pb2.StatusProto())
    if state.error is not None:
        status.status.error_code = state.error.code.value
        status.status.error_message = state.error.message
    return status
