"""examples/translate.py and examples/unilm_seq2seq.py end to end, on tiny settings."""

import json
import pathlib
import subprocess
import sys

import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the SavedModels use)

from examples import compare_seq2seq, unilm_seq2seq
from tfnlp import datasets, metrics

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _usage_error(capsys, parse, argv):
    """What argparse's `parser.error` writes: the exit code is 2."""
    with pytest.raises(SystemExit) as exited:
        parse(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err


def run_example(script, output, *arguments):
    command = [sys.executable, str(ROOT / "examples" / script), "--output", str(output),
               "--export", str(output / "saved_model"), *arguments]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((output / "results.json").read_text())


def served(output, texts):
    model = tf.saved_model.load(str(output / "saved_model" / "1"))
    return model.signatures["serving_default"](text=tf.constant(texts))


@pytest.mark.slow
def test_translate(tmp_path):
    result = run_example(
        "translate.py", tmp_path, "--max-train-pairs", "256", "--vocabulary-size", "400",
        "--num-layers", "1", "--source-length", "24", "--target-length", "24", "--epochs", "1",
        "--batch-size", "32", "--eval-pairs", "8", "--beam-size", "2",
    )
    assert {"bleu_copy_source_baseline", "bleu_greedy", "bleu_beam2"} <= set(result)
    assert result["test_verses"] == 8 and result["train_pairs"] == 256
    assert list((tmp_path / "logs").rglob("events.out.tfevents.*"))
    assert (tmp_path / "source_vocab.txt").exists() and (tmp_path / "target_vocab.txt").exists()
    outputs = served(tmp_path, ["In the beginning God created the heaven.", ""])
    assert outputs["output_text"].shape == (2,) and outputs["token_ids"].shape == (2, 24)
    # The export decodes as the example did (beam 2, its length penalty).
    examples = result["examples_beam2"]
    assert len(examples) == 5
    outputs = served(tmp_path, [e["source"] for e in examples])["output_text"].numpy()
    assert [t.decode() for t in outputs] == [e["output"] for e in examples]


@pytest.mark.slow
def test_unilm_seq2seq(tmp_path):
    result = run_example(
        "unilm_seq2seq.py", tmp_path, "--vocabulary-size", "400", "--pretrain-steps", "4",
        "--max-train-pairs", "72", "--epochs", "1", "--eval-pairs", "8", "--beam-size", "2",
        "--source-length", "24", "--max-length", "16", "--sequence-length", "40",
        "--classifier-epochs", "0", "--perplexity-sentences", "64", "--lm-steps", "3",
        "--lm-sequence-length", "24", "--fine-tuning", "pseudo-masked",
    )  # the masked fine-tuning: tests/models/test_unilm.py and the docs' UniLM block
    assert result["copy_source"]["bleu"] > 30  # the two English versions share most words
    for name in ("copy_source", "greedy", "beam2", "beam2_trigram_blocking"):
        assert set(result[name]) == {"bleu", "rouge1", "rouge2", "rougeL"}
    # Not compared: 3 left-to-right steps give about 300 against the unigram's 204 (seeds 0, 1).
    assert result["left_to_right_perplexity"] > 1.0 and result["unigram_perplexity"] > 1.0
    samples = result["continuations"]
    assert set(samples) == {"temperature_0.7", "temperature_1.2"}
    assert all(len(lines) == 3 and all(" | " in line for line in lines)
               for lines in samples.values())
    assert result["options"]["lm_steps"] == 3 and result["options"]["lm_sequence_length"] == 24
    assert result["options"]["fine_tuning"] == "pseudo-masked"
    for phase in ("pretrain", "left_to_right", "finetune"):
        assert list((tmp_path / "logs" / phase).rglob("events.out.tfevents.*")), phase
    outputs = served(tmp_path, ["And God said, Let there be light: and there was light.", ""])
    assert outputs["output_text"].shape == (2,) and outputs["token_ids"].shape == (2, 16)
    continued = tf.saved_model.load(str(tmp_path / "saved_model" / "1")).signatures["continue"](
        text=tf.constant(["It was a dark and stormy night"]), temperature=tf.constant([0.8]),
        top_k=tf.constant([40]), top_p=tf.constant([0.95]), seed=tf.constant([7], tf.int64),
        max_new_tokens=tf.constant([5]), repetition_penalty=tf.constant([1.2]))
    assert continued["lengths"].numpy()[0] <= 5


def test_unilm_seq2seq_fine_tuning_options(capsys):
    assert unilm_seq2seq.parse_args([]).masking_rate == 0.7  # the paper's, by default
    pseudo = unilm_seq2seq.parse_args(["--fine-tuning", "pseudo-masked"])
    assert pseudo.fine_tuning == "pseudo-masked" and pseudo.masking_rate is None
    assert "--masking-rate is for --fine-tuning masked" in _usage_error(
        capsys, unilm_seq2seq.parse_args, ["--fine-tuning", "pseudo-masked", "--masking-rate", "0.5"])


@pytest.mark.slow
def test_compare_seq2seq(tmp_path):
    result = compare_seq2seq.main([
        "--pairs", "bible_archaic_modern", "--layers", "2", "--hidden-dim", "32",
        "--vocabulary-size", "300", "--source-length", "16", "--target-length", "16",
        "--steps", "4", "--max-train-pairs", "64", "--eval-pairs", "6", "--beam-size", "2",
        "--unilm-fine-tuning", "masked", "--lm-steps", "2", "--output", str(tmp_path),
    ])
    assert json.loads((tmp_path / "results.json").read_text()) == json.loads(json.dumps(result))
    test = datasets.read_text_pairs("bible_archaic_modern", "test")[:6]
    assert result["copy_source_bleu"] == round(
        metrics.corpus_bleu([t for _, t in test], [s for s, _ in test]), 2)
    assert result["train_pairs"] == 64 and result["test_verses"] == 6
    # One block of UniLM against one encoder and one decoder block: about the same size.
    sizes = result["unilm"]["parameters"], result["transformer"]["parameters"]
    assert 0.8 < sizes[0] / sizes[1] < 1.25, sizes
    for name in ("transformer", "unilm"):
        assert {"bleu_greedy", "bleu_beam2", "parameters"} <= set(result[name])
        examples = result[name]["examples"]
        assert [e["source"] for e in examples] == [s for s, _ in test[:3]]
        assert all(isinstance(e["output"], str) for e in examples)
    # The default fine-tuning, UniLM alone.
    pseudo = compare_seq2seq.main([
        "--pairs", "bible_archaic_modern", "--models", "unilm", "--layers", "2",
        "--hidden-dim", "32", "--vocabulary-size", "300", "--source-length", "16",
        "--target-length", "16", "--steps", "2", "--max-train-pairs", "64", "--eval-pairs", "2",
        "--beam-size", "2", "--output", str(tmp_path / "pseudo"),
    ])
    assert pseudo["options"]["unilm_fine_tuning"] == "pseudo-masked" and "transformer" not in pseudo
    assert pseudo["unilm"]["parameters"] == result["unilm"]["parameters"]


def test_compare_seq2seq_refuses_an_odd_depth_and_a_bad_head_count(capsys):
    assert compare_seq2seq.parse_args([]).layers == 4
    assert "--layers must be an even number" in _usage_error(
        capsys, compare_seq2seq.parse_args, ["--layers", "3"])
    assert "--hidden-dim (100) must be a multiple of --num-heads" in _usage_error(
        capsys, compare_seq2seq.parse_args, ["--hidden-dim", "100", "--num-heads", "3"])
