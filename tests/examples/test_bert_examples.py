"""The BERT examples end to end on tiny settings: real learning, real export."""

import json
import warnings

import numpy as np
import pytest

from examples import finetune_classifier, pretrain_bert
from tests.export.fresh_process import serve
from tests.export.serving.harness import CppServer


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    output = tmp_path_factory.mktemp("bert_pretrain")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = pretrain_bert.main([
            "--preset", "bert_tiny", "--vocabulary-size", "2000", "--sequence-length", "64",
            "--max-predictions", "10", "--steps", "2400", "--steps-per-epoch", "400",
            "--learning-rate", "2e-3", "--max-documents", "150", "--eval-batches", "40",
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
        "--logs", str(tmp_path / "logs"),
    ])
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
def test_pretraining_reads_the_users_texts_for_masked_lm_alone(tmp_path):
    # The user's unlabelled texts, as a TSV with other columns: a word found
    # only there must enter the vocabulary, and no next-sentence head is
    # trained or reported.
    rows = ["id\ttext"] + [
        f"{i}\tThe zorblax tasted great. I would buy a zorblax again! Order {i} came fast."
        for i in range(200)
    ]
    (tmp_path / "mine.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    settings = [
        "--preset", "bert_tiny", "--vocabulary-size", "600", "--sequence-length", "32",
        "--max-predictions", "5", "--steps", "40", "--steps-per-epoch", "20",
        "--max-documents", "10", "--eval-batches", "2", "--no-next-sentence",
        "--domain-texts", str(tmp_path / "mine.tsv"), "--domain-repeats", "2",
        "--output", str(tmp_path / "out"),
    ]
    result = pretrain_bert.main(settings)
    assert "zorblax" in (tmp_path / "out" / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert "nsp_accuracy" not in result and 0 <= result["mlm_accuracy"] <= 1
    assert result["steps"] == 40
    with pytest.raises(ValueError, match="review"):  # a column the file lacks is named
        pretrain_bert.main(settings[:-4] + ["--domain-text-column", "review", "--output",
                                            str(tmp_path / "other")])
    with pytest.raises(SystemExit):
        pretrain_bert.parse_args(["--domain-repeats", "0"])


@pytest.mark.slow
def test_finetuning_reports_each_seed_on_a_subset_of_the_reviews(pretrained, tmp_path):
    output, _, _ = pretrained
    result = finetune_classifier.main([
        "--pretrained", str(output), "--sequence-length", "32", "--epochs", "1",
        "--train-examples", "64", "--seeds", "2", "--skip-scratch", "--export", "",
        "--logs", str(tmp_path / "logs"),
    ])
    accuracies = result["pretrained_test_accuracies"]
    assert len(accuracies) == 2
    assert result["pretrained_test_accuracy"] == pytest.approx(np.mean(accuracies))
    assert result["pretrained_test_accuracy_sd"] == pytest.approx(np.std(accuracies, ddof=1))
    assert result["train_examples"] == 64 and "saved_model" not in result
    assert "scratch_test_accuracy" not in result
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == [
        "pretrained_seed0", "pretrained_seed1"
    ]
    with pytest.raises(SystemExit):
        finetune_classifier.main(["--seeds", "0"])
