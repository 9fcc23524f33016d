"""examples/pretrain_elmo.py then examples/elmo_classifier.py end to end, on tiny settings."""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the SavedModel uses)

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _run(script, *arguments):
    done = subprocess.run([sys.executable, str(ROOT / "examples" / script), *arguments],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]


def _tags(folder):
    return {
        value.tag
        for path in folder.glob("events.out.tfevents.*")
        for event in tf.compat.v1.train.summary_iterator(str(path))
        for value in event.summary.value
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("elmo")
    _run("pretrain_elmo.py", "--max-train-sentences", "400", "--max-eval-sentences", "60",
         "--vocabulary-size", "300", "--units", "24", "--projection-dim", "8",
         "--num-sampled", "40", "--filters", "1:4,2:4,3:8", "--max-characters", "16",
         "--sequence-length", "24", "--epochs", "1", "--dtype", "float32", "--logs", str(root / "pretrain"),
         "--output", str(root / "bilm"), "--export", str(root / "bilm_saved_model"))
    _run("elmo_classifier.py", "--bilm", str(root / "bilm" / "bilm.keras"),
         "--max-train-examples", "200", "--max-tokens", "48", "--epochs", "2",
         "--logs", str(root / "classifier"), "--export", str(root / "classifier_saved_model"))
    _run("elmo_bilstm.py", "--bilm", str(root / "bilm" / "bilm.keras"), "--max-train-examples", "120",
         "--max-tokens", "32", "--units", "8", "--embedding-dim", "16", "--epochs", "2",
         "--seeds", "2", "--logs", str(root / "bilstm"))
    return root, {
        name: json.loads((root / name / "results.json").read_text())
        for name in ("pretrain", "classifier", "bilstm")
    }


def test_pretraining_reports_held_out_perplexity_next_to_a_unigram_model(runs):
    # Reported, not compared: at these settings (12 steps) the biLM's held-out
    # perplexity is about 290 against the unigram model's 59.8 (seeds 0-2); at
    # a learning rate of 1e-2 still 100 to 160, and level with it (57 to 60)
    # only after 200 steps.
    root, results = runs
    result = results["pretrain"]
    for key in ("test_perplexity", "unigram_perplexity"):
        assert set(result[key]) == {"forward", "backward"}
        assert all(1.0 < value < 1e4 for value in result[key].values())
    # The baseline depends on the corpus and the vocabulary alone.
    assert result["unigram_perplexity"] == pytest.approx({"forward": 59.82, "backward": 59.82}, abs=0.01)
    assert result["vocabulary_size"] <= 300 and result["train_sentences"] == 400
    words = (root / "bilm" / "words.txt").read_text(encoding="utf-8").split("\n")
    assert words[:3] == ["<S>", "</S>", "<UNK>"]
    assert {"epoch_loss", "epoch_forward_perplexity"} <= _tags(root / "pretrain" / "validation")
    assert {"test_forward_perplexity", "unigram_backward_perplexity"} <= _tags(root / "pretrain" / "test")


def test_classifier_reports_elmo_layer_0_and_the_majority_class(runs):
    # Reported, not compared: at these settings both ELMo classifiers predict
    # the majority class (accuracy 0.658 each, seeds 0-2).
    _, results = runs
    result = results["classifier"]
    for name in ("elmo", "layer_0_only", "majority_class"):
        assert 0.0 <= result[name]["accuracy"] <= 1.0 and 0.0 <= result[name]["macro_f1"] <= 1.0
    assert result["majority_class"]["accuracy"] == pytest.approx(0.658)
    assert len(result["elmo"]["layer_weights"]) == 3 and len(result["layer_0_only"]["layer_weights"]) == 1
    assert sum(result["elmo"]["layer_weights"]) == pytest.approx(1.0, abs=1e-3)
    # Pooling the mix == mixing the pooled layers: the end-to-end model agrees.
    assert result["end_to_end_max_difference"] < 1e-4


def test_bilstm_is_trained_with_and_without_elmo_over_each_seed(runs):
    _, results = runs
    result = results["bilstm"]
    for arm in ("bilstm", "bilstm_elmo"):
        assert [run["seed"] for run in result[arm]["runs"]] == [0, 1]
        accuracies = [run["accuracy"] for run in result[arm]["runs"]]
        assert result[arm]["accuracy_mean"] == pytest.approx(np.mean(accuracies), abs=1e-4)
        assert result[arm]["accuracy_sd"] == pytest.approx(np.std(accuracies, ddof=1), abs=1e-4)
        assert all(1 <= run["best_epoch"] <= run["epochs"] <= 2 for run in result[arm]["runs"])
    assert result["elmo_minus_without"] == pytest.approx(
        result["bilstm_elmo"]["accuracy_mean"] - result["bilstm"]["accuracy_mean"], abs=1e-4)
    # The test reviews resampled: the same mean difference, inside its interval.
    bootstrap = result["paired_bootstrap"]
    assert bootstrap["difference"] == pytest.approx(result["elmo_minus_without"], abs=2e-4)
    low, high = bootstrap["interval_95"]
    assert low <= bootstrap["difference"] <= high and 0.0 <= bootstrap["share_not_above_zero"] <= 1.0
    # The ELMo arm trained its mix (3 layers, weights moved off the uniform start).
    for run in result["bilstm_elmo"]["runs"]:
        assert len(run["layer_weights"]) == 3 and max(abs(w - 1 / 3) for w in run["layer_weights"]) > 1e-4
    assert result["majority_class"]["accuracy"] == pytest.approx(0.658)
    assert result["train_examples"] == 120 and result["word_vocabulary_size"] > 3
    # The stored frozen-biLM layers give what ELMoEmbedder gives end to end.
    assert result["end_to_end_max_difference"] < 1e-4


def test_both_exports_serve_raw_text(runs):
    root, results = runs
    for name, saved in (("pretrain", "bilm_saved_model"), ("classifier", "classifier_saved_model")):
        assert results[name]["saved_model"] == str(root / saved / "1")
        embed = tf.saved_model.load(results[name]["saved_model"]).signatures["serving_default"]
        outputs = embed(text=tf.constant(["Emma was handsome, clever, and rich.", ""]))
        assert outputs["elmo"].shape[:2] == outputs["padding_mask"].shape == (2, 11)
        assert outputs["layers"].shape[1] == 3
        np.testing.assert_array_equal(outputs["padding_mask"].numpy().sum(1), [11, 2])
        assert np.all(np.isfinite(outputs["elmo"].numpy()))
