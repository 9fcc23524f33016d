"""The BERT examples end to end on tiny settings: real learning, real export."""

import argparse
import json
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from examples import finetune_classifier, pretrain_bert
from tests.export.fresh_process import serve
from tests.export.serving.harness import CppServer
from tfnlp import data, datasets, models


def _usage_error(capsys, parse, argv):
    """What argparse's `parser.error` writes: the exit code is 2."""
    with pytest.raises(SystemExit) as exited:
        parse(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """1,600 steps at 1e-3 without dropout: held-out next-sentence accuracy 61.6%
    against the majority's 56.0%, masked LM 15.3% against 5.5% (seeds 1-3: NSP 4.1
    to 5.2 points over the majority; AMD EPYC, one thread). At 2e-3 next-sentence
    prediction only just learned and depended on the CPU: 61.6% on a Xeon but
    57.1% on an AMD EPYC, 58.7% with seed 1; at 3e-3 or 4e-3 it stays at the
    majority class."""
    output = tmp_path_factory.mktemp("bert_pretrain")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = pretrain_bert.main([
            "--architecture", "bert_tiny", "--vocabulary-size", "2000", "--sequence-length", "64",
            "--max-predictions", "10", "--steps", "1600", "--steps-per-epoch", "400",
            "--learning-rate", "1e-3", "--dropout", "0", "--max-documents", "150", "--eval-batches", "40",
            "--cache-batches", "400", "--shuffle-buffer", "1000", "--output", str(output),
        ])
    return output, result, [str(w.message) for w in caught]


@pytest.mark.slow
def test_pretraining_learns_masked_lm_and_next_sentence(pretrained):
    output, result, caught = pretrained
    # Held-out chapters: clearly better than always predicting the most
    # frequent token, and better than the majority class for NSP.
    assert result["mlm_accuracy"] > 2 * result["mlm_most_frequent_baseline"]
    assert result["nsp_accuracy"] > result["nsp_majority_baseline"] + 0.02
    assert (output / "backbone.keras").exists() and (output / "vocab.txt").exists()
    assert json.loads((output / "pretraining_results.json").read_text()) == result
    assert list((output / "logs").rglob("events.out.tfevents.*"))
    # Keras knows the held-out steps (counted once) and is told the pipeline shuffles.
    assert not [m for m in caught if "ran out of data" in m or "`shuffle=True`" in m], caught


@pytest.mark.slow
def test_finetuning_from_the_pretrained_backbone_exports_a_model(pretrained, tmp_path):
    output, _, _ = pretrained
    result = finetune_classifier.main([
        "--pretrained", str(output), "--sequence-length", "64", "--epochs", "4",
        "--learning-rate", "5e-4", "--skip-scratch", "--export", str(tmp_path / "reviews"),
        "--logs", str(tmp_path / "logs"), "--pooling", "mean",
    ])
    # Mean pooling, as `make demo`: 73.8% (seeds 1-3 of the backbone: 73.5%, 70.3%,
    # 70.6%) against 65.8% for the majority class. From the [CLS] output, the
    # backbone pretrained at 2e-3 gave a classifier of the majority class on an
    # AMD EPYC (fine-tuned at 2e-4, 3e-4 or 5e-4), not on a Xeon.
    assert result["pretrained_test_accuracy"] > result["majority_baseline"]
    assert (tmp_path / "reviews" / "1" / "saved_model.pb").exists()
    # The demo's export serves in TF Serving's C++ loader as in Python (it did not before).
    texts = ["Great coffee, would buy again!", "stale", ""]
    path = str(tmp_path / "reviews" / "1")
    with CppServer() as server:
        server.load(path)
        assert [n for n, _ in server.warmup(path)] == ["serving_default"] * 2 + ["classify_pairs"] * 2
        cpp = server.call(path, "serving_default", text=texts)
    python = serve(path, [{"signature": "serving_default", "inputs": {"text": texts}}])[0]
    np.testing.assert_allclose(cpp["probabilities"], python["probabilities"], atol=1e-6)
    assert cpp["label"].tolist() == python["label"]


@pytest.mark.slow
def test_pretraining_reads_the_users_texts_for_masked_lm_alone(tmp_path, capsys):
    # The user's unlabelled texts, as a TSV with other columns, and the
    # training reviews: a word found only in the file must enter the
    # vocabulary, and no next-sentence head is trained or reported.
    rows = ["id\ttext"] + [
        f"{i}\tThe zorblax tasted great. I would buy a zorblax again! Order {i} came fast."
        for i in range(200)
    ]
    (tmp_path / "mine.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    common = [
        "--architecture", "bert_tiny", "--vocabulary-size", "600", "--sequence-length", "32",
        "--max-predictions", "5", "--steps", "40", "--steps-per-epoch", "20",
        "--max-documents", "10", "--eval-batches", "2", "--no-next-sentence",
        "--domain-texts", str(tmp_path / "mine.tsv"), "--review-texts",
    ]
    result = pretrain_bert.main(common + [
        "--domain-repeats", "2", "--dropout", "0", "--whole-word-masking", "--masking-rate", "0.2",
        "--token-embeddings", "ppmi", "--output", str(tmp_path / "out"),
    ])
    vocabulary = (tmp_path / "out" / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert "zorblax" in vocabulary
    assert "nsp_accuracy" not in result and 0 <= result["mlm_accuracy"] <= 1
    assert result["steps"] == 40 and result["masking_rate"] == 0.2 and result["whole_word_masking"]
    assert result["token_embeddings"] == "ppmi"
    saved = keras.saving.load_model(tmp_path / "out" / "backbone.keras", safe_mode=True)
    assert saved.get_config()["dropout"] == 0.0
    # The token embedding started from the PPMI vectors of the same sentences
    # (the novels' and the texts'), 40 small steps ago.
    texts = data.read_texts(str(tmp_path / "mine.tsv"), "text")
    texts += [text for text, _ in datasets.read_fine_food_reviews("train")]
    documents = datasets.load_documents("en_novels", "train").take(10).concatenate(
        pretrain_bert.domain_documents(texts, "test"))
    sentences = [s for document in documents.as_numpy_iterator() for s in document]
    tokenizer = data.WordPieceTokenizer(vocabulary)
    ppmi = data.learn_token_embeddings(tokenizer(tf.constant(sentences)), len(vocabulary), 128)
    trained = saved.token_embedding.embeddings.numpy()
    correlation = np.corrcoef(trained.ravel(), ppmi.ravel())[0, 1]
    assert correlation > 0.5, correlation
    with pytest.raises(ValueError, match="no column 'review'"):
        pretrain_bert.main(common + ["--domain-text-column", "review", "--output",
                                     str(tmp_path / "other")])
    assert "--domain-repeats must be at least 1" in _usage_error(
        capsys, pretrain_bert.parse_args, ["--domain-repeats", "0"])
    # With next-sentence pairs, short texts make no pair: the user is told.
    with pytest.warns(UserWarning, match="--no-next-sentence"):
        pretrain_bert.parse_args(["--review-texts"])


def test_the_users_texts_become_documents_of_sentences():
    documents = pretrain_bert.domain_documents(
        ["One. Two! Three?", "  A single text without an end  "], "test"
    )
    assert documents.element_spec == datasets.load_documents("en_novels", "test").element_spec
    assert [d.tolist() for d in documents.as_numpy_iterator()] == [
        [b"One.", b"Two!", b"Three?"], [b"A single text without an end"]
    ]
    with pytest.raises(ValueError, match="no text"):
        pretrain_bert.domain_documents(["   "], "mine.tsv")


@pytest.mark.slow
def test_finetuning_reports_each_seed_on_a_subset_of_the_reviews(pretrained, tmp_path, capsys):
    output, _, _ = pretrained
    result = finetune_classifier.main([
        "--pretrained", str(output), "--sequence-length", "32", "--epochs", "1",
        "--train-examples", "64", "--seeds", "2", "--skip-scratch", "--export", "",
        "--logs", str(tmp_path / "logs"), "--pooling", "mean", "--head-steps", "2",
    ])
    assert result["pooling"] == "mean" and result["head_steps"] == 2
    accuracies = result["pretrained_test_accuracies"]
    assert len(accuracies) == 2
    assert result["pretrained_test_accuracy"] == pytest.approx(np.mean(accuracies))
    assert result["pretrained_test_accuracy_sd"] == pytest.approx(np.std(accuracies, ddof=1))
    assert result["train_examples"] == 64 and "saved_model" not in result
    assert "scratch_test_accuracy" not in result
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == [
        "pretrained_seed0", "pretrained_seed1"
    ]
    # The head's steps, then everything's.
    stages = sorted(p.name for p in (tmp_path / "logs" / "pretrained_seed0").iterdir())
    assert stages == ["all", "head"]
    for bad, message in ((["--seeds", "0"], "--seeds must be at least 1"),
                         (["--train-examples", "0"], "--train-examples must be at least 1"),
                         (["--head-steps", "-1"], "--head-steps must be at least 0")):
        assert message in _usage_error(capsys, finetune_classifier.main, bad), bad


@pytest.mark.slow
def test_learning_curve_reports_both_classifiers_and_tfidf_at_each_size(pretrained, tmp_path, capsys):
    output, _, _ = pretrained
    plot = tmp_path / "figures" / "curve.png"
    result = finetune_classifier.main([
        "--pretrained", str(output), "--sequence-length", "32", "--epochs", "1", "--min-steps", "3",
        "--train-examples", "48", "--learning-curve", "10", "48", "400", "--export", "",
        "--logs", str(tmp_path / "logs"), "--plot", str(plot),
    ])
    points = result["learning_curve"]
    # Sizes at or above the training set are its own last point, not run twice.
    assert [p["train_examples"] for p in points] == [10, 48]
    assert not (tmp_path / "logs" / "curve_48").exists()
    assert not (tmp_path / "logs" / "curve_400").exists()
    for point in points:
        assert {"pretrained_test_accuracy", "scratch_test_accuracy", "tfidf_logistic_regression",
                "majority_baseline"} <= set(point)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads((plot.parent / "learning_curve.json").read_text())
    assert saved["points"] == points and saved["min_steps"] == 3
    # Batches of 32: one step an epoch for 10 examples, two for 48.
    assert [p["epochs"] for p in points] == [3, 2]
    assert sorted(p.name for p in (tmp_path / "logs" / "curve_10").iterdir()) == [
        "from_scratch", "pretrained"
    ]
    for bad, message in ((["--learning-curve", "9"], "--learning-curve sizes must be at least 10"),
                         (["--min-steps", "-1"], "--min-steps must be at least 0"),
                         (["--epochs", "0"], "--epochs must be at least 1"),
                         (["--plot", "elsewhere.png"], "--plot draws the learning curve")):
        assert message in _usage_error(capsys, finetune_classifier.main, bad), bad


def test_head_steps_train_the_head_alone_and_leave_the_backbone_trainable(tmp_path):
    tokenizer = data.WordPieceTokenizer(list(data.SPECIAL_TOKENS) + ["good", "bad"])
    backbone = models.BertBackbone(tokenizer.vocabulary_size(), 1, 2, 16, intermediate_dim=32,
                                   max_sequence_length=16)
    classifier = models.BertClassifier(backbone, preprocessor=data.BertPreprocessor(tokenizer, 16),
                                       labels=["great", "other"], pooling="mean")
    texts, labels = ["good good", "bad", "good", "bad bad"] * 4, ["great", "other"] * 8
    splits = {"train": (texts, labels), "validation": (texts[:4], labels[:4])}
    args = argparse.Namespace(batch_size=8, head_steps=3, head_learning_rate=1e-2)
    encoder = [w.numpy() for w in backbone.weights]
    head = classifier.output_dense.kernel.numpy()
    finetune_classifier.train_head(classifier, args, splits, str(tmp_path / "head"))
    assert int(classifier.optimizer.iterations) == 4  # 2 steps an epoch, at least 3 steps
    for before, after in zip(encoder, backbone.weights, strict=True):
        np.testing.assert_array_equal(before, after.numpy())
    assert not np.array_equal(head, classifier.output_dense.kernel.numpy())
    assert backbone.trainable and len(classifier.trainable_weights) > 2
    # Fine-tuning then moves the backbone too.
    finetune_classifier.fit_stage(classifier, 1e-2, 1, args, splits, str(tmp_path / "all"))
    assert not np.array_equal(encoder[0], backbone.weights[0].numpy())


def test_dtype_policy_auto_takes_bfloat16_only_where_it_runs_natively(tmp_path, monkeypatch):
    monkeypatch.setattr(pretrain_bert.tf.config, "list_physical_devices", lambda kind: [])
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_tile\n")
    assert pretrain_bert.native_bfloat16(str(cpuinfo))
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 fma\n")
    assert not pretrain_bert.native_bfloat16(str(cpuinfo))
    assert not pretrain_bert.native_bfloat16(str(tmp_path / "missing"))
    monkeypatch.setattr(pretrain_bert, "native_bfloat16", lambda: False)
    assert pretrain_bert.parse_args(["--dtype-policy", "auto"]).dtype_policy == "float32"
    monkeypatch.setattr(pretrain_bert, "native_bfloat16", lambda: True)
    assert pretrain_bert.parse_args(["--dtype-policy", "auto"]).dtype_policy == "mixed_bfloat16"
