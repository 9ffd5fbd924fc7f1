"""Which models a model directory holds (docs/contract.md "Model directory"): the model
directory itself when it has version directories, else each sub-directory that has them."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

# A model name, wherever one is checked (full match): URL routes, Target-Model, the control API,
# names written into the nginx configuration. The njs has its copy, tested against this one.
MODEL_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


@dataclass(frozen=True)
class ModelSpec:
    """A model served by every model server instance: its name, its base directory and the
    version numbers found there (all of them are served, as the reference container does)."""

    name: str
    base_path: str
    versions: tuple[int, ...] = ()


def version_dirs(base_path: str | os.PathLike[str]) -> list[Path]:
    """Numeric, non-hidden sub-directories of ``base_path`` that hold a SavedModel."""
    base = Path(base_path)
    if not base.is_dir():
        return []
    found = []
    for child in sorted(base.iterdir()):
        if not child.name.isdigit() or not child.is_dir():
            continue
        if (child / "saved_model.pb").is_file() or (child / "saved_model.pbtxt").is_file():
            found.append(child)
    return found


def model_spec(name: str, base_path: str | os.PathLike[str]) -> ModelSpec:
    """A model and every version it has on disk (``00000123`` is version 123)."""
    versions = tuple(sorted({int(path.name) for path in version_dirs(base_path)}))
    return ModelSpec(name, str(base_path), versions)


def discover_models(model_dir: str) -> tuple[ModelSpec, ...]:
    """The models under ``model_dir`` (docs/contract.md "Model directory").

    ``model_dir`` itself is a model when it holds version directories (it takes the
    directory's name); otherwise each non-hidden sub-directory other than ``code`` that
    holds version directories is one, in name order.
    """
    root = Path(model_dir)
    if version_dirs(root):
        return (model_spec(root.resolve().name, root),)
    models = []
    if root.is_dir():
        for child in sorted(root.iterdir()):
            if child.name.startswith(".") or child.name == "code" or not child.is_dir():
                continue
            if version_dirs(child):
                models.append(model_spec(child.name, child))
    return tuple(models)
