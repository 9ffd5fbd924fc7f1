"""The test model generator: layout, cache, reproducibility and the values the models compute."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest


def run_signature(version_dir: Path, signature: str, feeds: dict[str, object]) -> dict:
    """Run a signature in a TF1 session, the way TF Serving runs SavedModels."""
    import tensorflow as tf

    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], str(version_dir))
        sig = meta.signature_def[signature]
        fetches = {alias: info.name for alias, info in sig.outputs.items()}
        feed = {sig.inputs[alias].name: value for alias, value in feeds.items()}
        return session.run(fetches, feed)


def test_half_plus_three_versions_and_signatures(
    model_generator, tmp_path: Path
) -> None:  # noqa: ANN001
    import tensorflow as tf

    base = model_generator.build_model("half_plus_three", tmp_path)
    assert sorted(p.name for p in base.iterdir()) == ["123", "124"]
    for version, offset in (("123", 3.0), ("124", 4.0)):
        out = run_signature(base / version, "serving_default", {"x": np.array([1.0, 2.0])})
        assert out["y"].tolist() == [0.5 + offset, 1.0 + offset]
        example = tf.train.Example()
        example.features.feature["x"].float_list.value.append(4.0)
        regressed = run_signature(
            base / version,
            "tensorflow/serving/regress",
            {"inputs": np.array([example.SerializeToString()], dtype=object)},
        )
        assert regressed["outputs"].reshape(-1).tolist() == [2.0 + offset]


def test_cache_skips_existing_models(model_generator, tmp_path: Path) -> None:  # noqa: ANN001
    first = model_generator.build_model("multi_io", tmp_path)
    stamp = (first / "1" / "saved_model.pb").stat().st_mtime_ns
    os.utime(first / "1" / "saved_model.pb", ns=(stamp - 10**9, stamp - 10**9))
    again = model_generator.ensure_models(["multi_io"], tmp_path)
    assert again == tmp_path
    assert (first / "1" / "saved_model.pb").stat().st_mtime_ns == stamp - 10**9
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


def test_models_are_reproducible(model_generator, tmp_path: Path) -> None:  # noqa: ANN001
    one = model_generator.build_model("detector", tmp_path / "one")
    two = model_generator.build_model("detector", tmp_path / "two")
    image = np.random.default_rng(0).random((1, 512, 512, 3), dtype=np.float32)
    out_one = run_signature(one / "1", "serving_default", {"images": image})
    out_two = run_signature(two / "1", "serving_default", {"images": image})
    for name in ("output_0", "output_1", "output_2"):
        assert np.array_equal(out_one[name], out_two[name])
    assert [out_one[f"output_{i}"].shape for i in range(3)] == [
        (1, 16, 16, 255),
        (1, 32, 32, 255),
        (1, 64, 64, 255),
    ]


def test_cli_only_and_out(model_generator, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    assert model_generator.main(["--only", "half_plus_two", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "half_plus_two" / "1" / "saved_model.pb").is_file()
    assert "half_plus_two:" in capsys.readouterr().out
    with pytest.raises(KeyError, match="unknown test model"):
        model_generator.ensure_models(["nope"], tmp_path)
