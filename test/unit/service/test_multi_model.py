"""sagemaker_tfs.service.handlers.multi_model: the service reads what the registry writes.

The registry's control API runs in the supervisor; here its model descriptions are made by
the registry's own ``LoadedModel.describe`` and handed to the service's ``ModelDirectory``
in place of the unix-socket client.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sagemaker_tfs.ports import Instance
from sagemaker_tfs.service.handlers.code_namespaces import prefix_of
from sagemaker_tfs.service.handlers.multi_model import ModelDirectory, ModelLocation
from sagemaker_tfs.service.handlers.user_code import UserCodeError
from sagemaker_tfs.service.routing.connections import Channels
from sagemaker_tfs.supervisor.multi_model.registry import LoadedModel
from sagemaker_tfs.wire.errors import HttpError


class Registry:
    """The control API's answers, from the registry's own descriptions."""

    def __init__(self, *models: LoadedModel) -> None:
        self.models = {model.name: model for model in models}
        self.asked = 0

    def loaded(self) -> list[dict]:
        self.asked += 1
        return [model.describe() for model in self.models.values()]

    def describe(self, name: str) -> dict | None:
        self.asked += 1
        model = self.models.get(name)
        return model.describe() if model is not None else None


def registered(name: str, state: str = "AVAILABLE", root: str = "/work/models",
               ports: tuple[int, int] = (9001, 9002)) -> LoadedModel:  # fmt: skip
    url = f"/opt/ml/models/{name}"
    return LoadedModel(name, url, f"{root}/{name}", (Instance(*ports),), state, 0)


def directory(
    registry: Registry, models_root: str = "/opt/ml/models", channels: Channels | None = None
) -> ModelDirectory:
    channels = Channels() if channels is None else channels
    return ModelDirectory(registry, channels, models_root)  # type: ignore[arg-type]


def test_a_loaded_model_is_found_where_the_registry_put_it() -> None:
    assert directory(Registry(registered("m"))).lookup("m") == ModelLocation(
        name="m", base_path="/work/models/m", grpc_port=9001, rest_port=9002
    )


@pytest.mark.parametrize("registry", [Registry(), Registry(registered("m", state="UNLOADING"))])
def test_a_model_not_loaded_or_unloading_is_404(registry: Registry) -> None:
    with pytest.raises(HttpError) as raised:
        directory(registry).lookup("m")
    assert raised.value.status == 404
    assert raised.value.message == "Model m is not loaded yet."


def test_lookups_are_cached_until_forgotten() -> None:
    registry = Registry(registered("m"))
    models = directory(registry)
    models.lookup("m")
    models.lookup("m")
    assert registry.asked == 1
    models.forget("m")
    models.lookup("m")
    assert registry.asked == 2


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


INFERENCE = """
import utils
from mylib import version
from mylib.sub import helper


def handler(data, context):
    return f"{utils.NAME} {version()} {helper()}", "text/plain"
"""


def model_with_code(root: Path, name: str) -> None:
    """A model whose code/ has a utils.py and a code/lib package of its own (``mylib``, which
    imports itself by its plain name, and a submodule importing its parent relatively)."""
    code = root / name / "code"
    write(code / "inference.py", INFERENCE)
    write(code / "utils.py", f"NAME = {name!r}\n")
    write(code / "lib" / "mylib" / "__init__.py",
          "from mylib.core import VERSION\n\ndef version():\n    return VERSION\n")  # fmt: skip
    write(code / "lib" / "mylib" / "core.py", f"VERSION = '{name}-lib'\n")
    write(code / "lib" / "mylib" / "sub.py",
          "from . import core\n\ndef helper():\n    return core.VERSION.upper()\n")  # fmt: skip


def answer(models: ModelDirectory, name: str) -> object:
    user_code = models.user_code(models.lookup(name))
    assert user_code is not None and user_code.handler is not None
    return user_code.handler(None, None)[0]


def test_each_model_imports_its_own_modules(tmp_path: Path) -> None:
    root = tmp_path / "models"
    for name in ("a", "b"):
        model_with_code(root, name)
    registry = Registry(
        registered("a", root=str(root), ports=(9001, 9002)),
        registered("b", root=str(root), ports=(9003, 9004)),
    )
    models = directory(registry, str(root))
    assert answer(models, "a") == "a a-lib A-LIB"
    assert answer(models, "b") == "b b-lib B-LIB"
    assert answer(models, "a") == "a a-lib A-LIB"
    assert "utils" not in sys.modules and "mylib" not in sys.modules  # nothing plain leaks
    a_prefix, b_prefix = (prefix_of(str(root / name / "code")) for name in ("a", "b"))
    b_modules = [name for name in sys.modules if name.startswith(b_prefix)]
    assert {name.rsplit(".", 1)[-1] for name in b_modules} >= {"inference", "utils", "sub"}

    del registry.models["b"]  # unloaded: its modules go at the next look at the registry
    models.forget("a")
    assert answer(models, "a") == "a a-lib A-LIB"
    assert [name for name in b_modules if name in sys.modules] == []
    assert any(name.startswith(a_prefix) for name in sys.modules)
    del registry.models["a"]
    models.forget("a")
    with pytest.raises(HttpError):
        models.lookup("a")
    assert not [name for name in sys.modules if name.startswith(a_prefix)]


def test_code_that_cannot_be_imported_leaves_nothing_behind(tmp_path: Path) -> None:
    root = tmp_path / "models"
    write(root / "m" / "code" / "inference.py", "import utils\n")
    write(root / "m" / "code" / "utils.py", "raise RuntimeError('broken on purpose')\n")
    models = directory(Registry(registered("m", root=str(root))), str(root))
    with pytest.raises(UserCodeError, match="broken on purpose"):
        models.user_code(models.lookup("m"))
    prefix = prefix_of(str(root / "m" / "code"))
    assert not [name for name in sys.modules if name.startswith(prefix)]


def test_the_channels_of_unloaded_models_are_closed_and_dropped() -> None:
    registry = Registry(registered("a", ports=(9001, 9002)), registered("b", ports=(9003, 9004)))
    channels = Channels()
    models = directory(registry, channels=channels)
    for name in ("a", "b"):
        channels.get(models.lookup(name).grpc_port)
    assert len(channels) == 2
    del registry.models["b"]
    registry.models["a"] = registered("a", ports=(9005, 9006))  # reloaded elsewhere
    models.forget("a")
    assert models.lookup("a").grpc_port == 9005
    assert len(channels) == 0  # both old ones dropped; the new one is made when used


def test_a_model_loaded_since_the_list_was_fetched_is_found_at_once() -> None:
    """A load into the shared model servers takes tens of milliseconds: well within the
    second the list is kept for."""
    registry = Registry(registered("a"))
    models = directory(registry)
    models.lookup("a")
    registry.models["b"] = registered("b")
    assert models.lookup("b").name == "b"
    with pytest.raises(HttpError) as raised:
        models.lookup("never")
    assert raised.value.status == 404
