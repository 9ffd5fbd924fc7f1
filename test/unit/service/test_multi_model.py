"""sagemaker_tfs.service.multi_model: the service reads what the registry writes.

The registry's control API runs in the supervisor; here its model descriptions are made by
the registry's own ``LoadedModel.describe`` and handed to the service's ``ModelDirectory``
in place of the unix-socket client.
"""

from __future__ import annotations

import pytest
from sagemaker_tfs.config import Instance
from sagemaker_tfs.service.multi_model import ModelDirectory, ModelLocation
from sagemaker_tfs.supervisor.registry import LoadedModel
from sagemaker_tfs.wire.errors import HttpError


class Registry:
    """The control API's answers, from the registry's own descriptions."""

    def __init__(self, *models: LoadedModel) -> None:
        self.models = {model.name: model for model in models}
        self.asked = 0

    def describe(self, name: str) -> dict | None:
        self.asked += 1
        model = self.models.get(name)
        return model.describe() if model is not None else None


def registered(name: str, state: str = "AVAILABLE") -> LoadedModel:
    url = f"/opt/ml/models/{name}"
    return LoadedModel(name, url, f"/work/models/{name}", (Instance(9001, 9002),), state, 0)


def directory(registry: Registry) -> ModelDirectory:
    return ModelDirectory(registry, "/opt/ml/models", "/work")  # type: ignore[arg-type]


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
