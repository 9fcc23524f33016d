"""examples/text_classifier.py end to end in a subprocess, on tiny settings."""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the SavedModel uses)

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    logs = tmp_path_factory.mktemp("text_classifier")
    command = [
        sys.executable, str(ROOT / "examples" / "text_classifier.py"),
        "--max-train-examples", "400", "--vocabulary-size", "600", "--sequence-length", "64",
        "--bucket-boundaries", "32", "--num-layers", "1", "--num-heads", "2", "--hidden-dim", "16",
        "--epochs", "1", "--logs", str(logs), "--export", str(logs / "saved_model"),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return logs, json.loads((logs / "results.json").read_text())


def test_results_report_the_model_next_to_the_baselines_and_tfidf_beats_the_majority(run):
    # The transformer is not compared: one epoch on 400 reviews gives the
    # majority class (accuracy 0.658, seeds 0-2); TF-IDF gets 0.702.
    _, result = run
    for name in ("transformer", "tfidf_logistic_regression", "majority_class"):
        assert set(result[name]) == {"accuracy", "macro_f1"}
        assert all(0.0 <= value <= 1.0 for value in result[name].values())
    assert result["majority_class"]["accuracy"] == pytest.approx(0.658)
    assert result["tfidf_logistic_regression"]["accuracy"] > result["majority_class"]["accuracy"]
    matrix = np.array(result["confusion_matrix"])
    assert matrix.shape == (2, 2) and matrix.sum() == 1000
    assert np.trace(matrix) / 1000 == pytest.approx(result["transformer"]["accuracy"])
    assert result["train_examples"] == 400 and result["epochs_trained"] == 1


def test_writes_the_confusion_matrix_png_and_tensorboard_logs(run):
    logs, _ = run
    image = tf.image.decode_png((logs / "confusion_matrix.png").read_bytes())
    assert image.shape[0] > 100 and image.shape[1] > 100
    for folder in ("train", "validation", "test"):
        assert list((logs / folder).glob("events.out.tfevents.*")), folder
    tags = {
        value.tag
        for path in (logs / "test").glob("events.out.tfevents.*")
        for event in tf.compat.v1.train.summary_iterator(str(path))
        for value in event.summary.value
    }
    assert {"confusion_matrix", "test_accuracy", "test_macro_f1"} <= tags


def test_export_serves_raw_text(run):
    logs, result = run
    assert result["saved_model"] == str(logs / "saved_model" / "1")
    served = tf.saved_model.load(result["saved_model"]).signatures["serving_default"]
    outputs = served(text=tf.constant(["Delicious, will buy again.", ""]))
    np.testing.assert_allclose(outputs["probabilities"].numpy().sum(-1), 1.0, atol=1e-6)
    assert set(outputs["label"].numpy()) <= {b"other", b"great"}
