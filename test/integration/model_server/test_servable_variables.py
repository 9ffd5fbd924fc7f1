"""A SavedModel whose signature reads a variable that nothing gives a value fails its load
with one clear error (``servable._check_variables_restored``), rather than every request
failing later with "Could not find variable"; one whose variables come from its checkpoint or
its init op loads and answers. Real TF1 SavedModels, made here, loaded in-process."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from sagemaker_tfs.model_server.serving.saved_model_servable import SavedModelServable

CONFIG = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)


def save_model(export_dir: Path, saved: str, init_op_sets: str | None = None) -> None:
    """y = x * a + b, resource variables a = 2 and b = 3; the checkpoint holds only the
    variables named in ``saved``; ``init_op_sets`` names one the init op assigns 3 to."""
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        x = tf.compat.v1.placeholder(tf.float32, [None], name="x")
        variables = {
            name: tf.compat.v1.get_variable(name, initializer=value, use_resource=True)
            for name, value in (("a", 2.0), ("b", 3.0))
        }
        y = x * variables["a"] + variables["b"]
        session.run(tf.compat.v1.global_variables_initializer())
        init_op = None
        if init_op_sets is not None:
            init_op = variables[init_op_sets].assign(3.0).op
        builder = tf.compat.v1.saved_model.Builder(str(export_dir))
        signature = tf.compat.v1.saved_model.predict_signature_def({"x": x}, {"y": y})
        builder.add_meta_graph_and_variables(
            session,
            ["serve"],
            signature_def_map={"serving_default": signature},
            saver=tf.compat.v1.train.Saver(var_list=[variables[name] for name in saved]),
            main_op=init_op,
        )
        builder.save()


def predict(servable: SavedModelServable, values: list[float]) -> np.ndarray:
    return servable.predict("", {"x": np.array(values, dtype=np.float32)})["y"]


def test_every_variable_from_the_checkpoint(tmp_path: Path) -> None:
    save_model(tmp_path / "1", saved="ab")
    servable = SavedModelServable.load("m", 1, str(tmp_path / "1"), CONFIG)
    np.testing.assert_allclose(predict(servable, [1.0, 4.0]), [5.0, 11.0])


def test_a_variable_the_checkpoint_lacks_fails_the_load(tmp_path: Path) -> None:
    save_model(tmp_path / "1", saved="a")
    with pytest.raises(ValueError, match="1 variables read by the signatures were not restored"):
        SavedModelServable.load("m", 1, str(tmp_path / "1"), CONFIG)


def test_a_variable_the_init_op_sets_is_fine(tmp_path: Path) -> None:
    save_model(tmp_path / "1", saved="a", init_op_sets="b")
    servable = SavedModelServable.load("m", 1, str(tmp_path / "1"), CONFIG)
    np.testing.assert_allclose(predict(servable, [1.0]), [5.0])
