"""`tfnlp finetune --task tagging` and its evaluate, predict and export, on a user's CoNLL-U and IOB2 files."""

import json
import os
import pathlib
import random
import re
import subprocess
import sys

import keras
import pytest

from tests.test_cli import ROOT, _error, _tfnlp_here
from tfnlp import cli

# A toy grammar: part-of-speech sentences (with a multiword token, "don't" = do + n't)
# and entity sentences.
_DET, _ADJ = ["the", "a", "this"], ["big", "old", "green"]
_NOUN, _VERB = ["dog", "cat", "house", "river", "teacher", "book"], ["sees", "likes", "finds", "reads"]
_ENTITIES = {"PER": [["Ada", "Lovelace"], ["Alan"], ["Grace", "Hopper"]],
             "LOC": [["Paris"], ["New", "York"]], "ORG": [["Acme"]]}


def _conllu_sentence(rng, i):
    """CoNLL-U lines of a sentence: comments, word lines, every 4th a multiword token."""
    words = [(rng.choice(_DET).capitalize(), "DET")]
    words += [(rng.choice(_ADJ), "ADJ")] if rng.random() < 0.5 else []
    words += [(rng.choice(_NOUN), "NOUN")]
    multiword = len(words) + 1 if i % 4 == 0 else None
    words += [("do", "AUX"), ("n't", "PART")] if multiword else []
    words += [(rng.choice(_VERB), "VERB"), (rng.choice(_DET), "DET"), (rng.choice(_NOUN), "NOUN"),
              (".", "PUNCT")]
    lines = [f"# sent_id = s{i}", f"# text = {' '.join(w for w, _ in words)}"]
    for n, (word, tag) in enumerate(words, 1):
        if n == multiword:
            lines.append(f"{n}-{n + 1}\tdon't\t_\t_\t_\t_\t_\t_\t_\t_")
        lines.append(f"{n}\t{word}\t{word.lower()}\t{tag}\t_\t_\t0\tdep\t_\t_")
    return lines


def _iob2_sentence(rng, i):
    """UniversalNER-style lines (`index word tag`) of a sentence with three entities."""
    tagged = []
    for type_, after in (("PER", "visited"), ("LOC", "with"), ("ORG", ".")):
        entity = rng.choice(_ENTITIES[type_])
        tagged += [(w, ("B-" if j == 0 else "I-") + type_) for j, w in enumerate(entity)]
        tagged.append((after, "O"))
    return [f"# sent_id = n{i}"] + [f"{k}\t{w}\t{t}" for k, (w, t) in enumerate(tagged, 1)]


def _write(path, sentence, count, start):
    rng = random.Random(start)
    path.write_text("\n\n".join("\n".join(sentence(rng, i)) for i in range(start, start + count)) + "\n",
                    encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tagging")
    found = {
        "train.conllu": _write(folder / "train.conllu", _conllu_sentence, 40, 0),
        "test.conllu": _write(folder / "test.conllu", _conllu_sentence, 10, 100),
        "train.iob2": _write(folder / "train.iob2", _iob2_sentence, 40, 0),
        "test.iob2": _write(folder / "test.iob2", _iob2_sentence, 10, 100),
    }
    raw = folder / "raw.txt"
    raw.write_text("Ada Lovelace visited Paris with Acme.\n\nGrace Hopper visited New York, the cat.\n",
                   encoding="utf-8")
    # For `tfnlp vocab` and `pretrain`: documents of 4 sentences.
    texts = [line[len("# text = "):] for line in (folder / "train.conllu").read_text().splitlines()
             if line.startswith("# text = ")] + [line for line in raw.read_text().splitlines() if line]
    corpus = folder / "corpus.txt"
    corpus.write_text("\n\n".join("\n".join(texts[i:i + 4]) for i in range(0, len(texts), 4)) + "\n",
                      encoding="utf-8")
    return {**found, "raw.txt": str(raw), "corpus.txt": str(corpus), "folder": folder}


def _json_lines(text):
    return [json.loads(line) for line in text.strip().split("\n")]


def test_conllu_vocab_finetune_evaluate_predict_export_serve(files, capsys):
    """The whole path with the Transformer tagger from scratch (`--model transformer`)."""
    import numpy as np
    import tensorflow as tf

    from tests.export.serving.harness import CppServer
    from tfnlp import data

    folder = files["folder"]
    vocabulary = str(folder / "vocab.txt")
    _tfnlp_here(capsys, "vocab", "--corpus", files["corpus.txt"], "--size", "200", "--output", vocabulary)
    run = folder / "pos"
    out = _tfnlp_here(capsys, "finetune", "--task", "tagging", "--train", files["train.conllu"],
                      "--test", files["test.conllu"], "--vocabulary", vocabulary, "--epochs", "1",
                      "--batch-size", "8", "--model", "transformer", "--output", str(run))
    assert "test token accuracy" in out and "36 training sentences" in out  # 4 held out
    results = json.loads((run / "results.json").read_text())
    assert results["tag_names"] == ["ADJ", "AUX", "DET", "NOUN", "PART", "PUNCT", "VERB"]
    assert not results["entity_tags"] and results["validation"]["step"] == 4  # one epoch: 36 // 8
    test = results["test"]
    assert (test["sentences"], test["words_past_sequence_length"]) == (10, 0) and "entities" not in test
    assert 0 <= test["token_accuracy"] <= 1 and test["words"] == data.read_conllu(files["test.conllu"]).num_words
    config = json.loads((run / "config.json").read_text())
    assert config["kind"] == "tagger" and config["settings"]["tag_column"] == "upos"

    out = _tfnlp_here(capsys, "evaluate", "--task", "tagging", "--run", str(run), "--data",
                      files["test.conllu"])
    assert json.loads((run / "evaluation.json").read_text()) == test and "token accuracy" in out
    # XPOS is "_" in these files: a column without tags is refused, naming the line.
    with pytest.raises(SystemExit, match=r"`data`: .*test.conllu, line 3: the XPOS field is '_'"):
        cli.main(["evaluate", "--task", "tagging", "--run", str(run), "--data", files["test.conllu"],
                  "--tag-column", "xpos"])

    lines = _json_lines(_tfnlp_here(capsys, "predict", "--task", "tagging", "--run", str(run),
                                    "--input", files["test.conllu"]))
    words = data.read_conllu(files["test.conllu"]).words
    assert [line["words"] for line in lines] == words  # the file's words, "do" "n't" of "don't"
    assert all(set(line["tags"]) <= set(results["tag_names"]) and "entities" not in line for line in lines)

    _tfnlp_here(capsys, "export", "--run", str(run), "--output", str(folder / "served"))
    served = tf.saved_model.load(str(folder / "served" / "1"))
    outputs = served.signatures["tag_words"](words=tf.ragged.constant(words).to_tensor(""))
    exported = [[t.decode() for t in row[:n]] for row, n in zip(outputs["tags"].numpy().tolist(),
                                                                 outputs["num_words"].numpy(), strict=True)]
    assert exported == [line["tags"] for line in lines]  # the SavedModel tags as `predict` does
    texts = ["The big dog sees a cat.", ""]
    outputs = served.signatures["serving_default"](text=tf.constant(texts))
    tagger = keras.saving.load_model(run / "model.keras", compile=False)
    assert outputs["num_words"].numpy().tolist() == [7, 0]
    assert [t.decode() for t in outputs["tags"][0].numpy()] == tagger.predict_tags(texts)[0]
    # ... and TF Serving's C++ loader answers as `tf.saved_model.load` does, on both signatures.
    path = str(folder / "served" / "1")
    with CppServer() as server:
        server.load(path)
        assert [n for n, _ in server.warmup(path)] == ["serving_default"] * 2 + ["tag_words"] * 2
        cpp = server.call(path, "serving_default", text=texts)
        cpp_words = server.call(path, "tag_words", words=tf.ragged.constant(words).to_tensor("").numpy())
    for name, value in outputs.items():
        expected = value.numpy()
        if expected.dtype == object:
            assert cpp[name].tolist() == [[b.decode() for b in row] for row in expected], name
        else:
            np.testing.assert_allclose(cpp[name], expected, atol=1e-5, err_msg=name)
    assert [[t for t in row[:n]] for row, n in zip(cpp_words["tags"].tolist(), cpp_words["num_words"],
                                                  strict=True)] == [line["tags"] for line in lines]


def _pretrained_run(files):
    """A run directory as `tfnlp pretrain bert` leaves it (that command is tested in
    tests/test_cli.py; untrained here, which saves the 10 s it takes)."""
    from tfnlp import data, models

    bert = files["folder"] / "bert"
    bert.mkdir()
    texts = pathlib.Path(files["corpus.txt"]).read_text(encoding="utf-8").split("\n")
    vocabulary = data.learn_wordpiece_vocabulary([t for t in texts if t], 120, progress=False)
    (bert / "vocab.txt").write_text("\n".join(vocabulary) + "\n", encoding="utf-8")
    backbone = models.BertBackbone.from_architecture("bert_tiny", vocabulary_size=len(vocabulary),
                                                     max_sequence_length=16)
    models.BertPretrainer(backbone, next_sentence=False, tokenizer=data.WordPieceTokenizer(vocabulary),
                          sequence_length=16, max_predictions_per_seq=3).save(bert / "model.keras")
    (bert / "config.json").write_text(json.dumps({
        "kind": "bert", "settings": {"sequence_length": 16}, "normalization": "bert",
        "vocabulary": "vocab.txt"}), encoding="utf-8")
    return bert


def test_iob2_on_a_pretrained_bert_with_a_crf_entities_and_words_past_the_length(files, capsys):
    bert, run = _pretrained_run(files), files["folder"] / "ner"
    # No validation (all 40 sentences train); 8 pieces leave some words untagged. In a
    # fresh process, its output to pipes: a line per 5% of training, none of TensorFlow's
    # or the tagger's warnings.
    done = subprocess.run(
        [sys.executable, "-m", "tfnlp.cli", "finetune", "--task", "tagging", "--train", files["train.iob2"],
         "--test", files["test.iob2"], "--word-column", "1", "--crf", "--sequence-length", "8",
         "--validation-fraction", "0", "--pretrained", str(bert), "--steps", "2", "--batch-size", "8",
         "--output", str(run)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"})
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout + done.stderr
    assert "40 training sentences" in out and "no validation" in out and "past the sequence length" in out
    noise = [line for line in out.splitlines() if re.match(r"[IWEF]\d{4} ", line) or "warn" in line.lower()
             or "absl::InitializeLog" in line or "cuInit" in line]
    assert "step 2/2" in out and "\r" not in out and not noise, "\n".join(noise[:20])
    results = json.loads((run / "results.json").read_text())
    assert results["entity_tags"] and results["validation"] is None
    assert results["tag_names"] == ["O", "B-LOC", "B-ORG", "B-PER", "I-LOC", "I-PER"]
    test = results["test"]
    assert test["words_past_sequence_length"] > 0
    entities = test["entities"]
    assert entities["micro"]["support"] == 30 and {"micro", "macro", "weighted"} <= set(entities)
    assert {"LOC", "ORG", "PER"} <= set(entities["per_type"])
    for name in ("precision", "recall", "f1"):
        assert 0 <= entities["macro"][name] <= 1
    tagger = keras.saving.load_model(run / "model.keras", compile=False)
    pretrainer = keras.saving.load_model(bert / "model.keras", compile=False)
    assert tagger.crf is not None and tagger.backbone.vocabulary_size == pretrainer.backbone.vocabulary_size
    assert (run / "vocab.txt").read_text() == (bert / "vocab.txt").read_text()

    lines = _json_lines(_tfnlp_here(capsys, "predict", "--task", "tagging", "--run", str(run),
                                    "--input", files["raw.txt"]))
    texts = pathlib.Path(files["raw.txt"]).read_text(encoding="utf-8").splitlines()
    assert [line["text"] for line in lines] == texts and lines[1]["words"] == []
    assert lines[0]["words"] == ["Ada", "Lovelace", "visited", "Paris", "with", "Acme", "."]
    assert lines[0]["tags"][-1] is None  # past the 8 pieces: no tag
    for line in lines:
        assert len(line["tags"]) == len(line["words"])
        for entity in line["entities"]:
            assert line["text"][entity["start"]:entity["end"]] == entity["text"]
            assert entity["label"] in ("LOC", "ORG", "PER")
    # The model's predictions, entities as `predict_tags` + `entity_spans` give them.
    from tfnlp import metrics

    tags = tagger.predict_tags(texts)
    assert [line["tags"] for line in lines] == tags
    assert [[(e["label"], e["word_start"], e["word_end"]) for e in line["entities"]] for line in lines] == [
        metrics.entity_spans([t or "O" for t in row]) for row in tags]
    lines = _json_lines(_tfnlp_here(capsys, "predict", "--task", "tagging", "--run", str(run),
                                    "--input", files["test.iob2"]))  # the word column as in finetune
    assert lines[0]["words"][0] in ("Ada", "Alan", "Grace") and "entities" in lines[0]


def test_bad_files_and_settings_are_refused_and_nothing_is_written(files, capsys, tmp_path):
    output = tmp_path / "out"
    base = ["finetune", "--task", "tagging", "--output", str(output)]
    message = _error(capsys, [*base, "--train", files["train.conllu"], "--model", "elmo"])
    assert "--model elmo needs --pretrained RUN, a `tfnlp pretrain elmo` output directory" in message
    for flags, expected in [
        (["--train", files["train.conllu"], "--tag-column", "upsos"], "not a CoNLL-U column"),
        (["--train", files["train.iob2"], "--tag-column", "upos"], "must be a column index for a CoNLL"),
        (["--train", files["train.conllu"], "--test", files["test.iob2"]], "give files of one format"),
        (["--train", files["corpus.txt"].replace(".txt", ".md")], "is not a file"),
        (["--train", files["train.conllu"], "--sequence-length", "2"], "at least 3"),
        (["--train", files["train.conllu"], "--pretrained", str(tmp_path)], "not a tfnlp output"),
        (["--train", files["train.conllu"], "--model", "transformer", "--architecture", "bert_mini"],
         "`architecture` is for --model bert"),
        (["--train", files["train.conllu"], "--model", "bilstm", "--vocabulary", files["corpus.txt"]],
         "--model bilstm learns its word vocabulary from the training sentences"),
    ]:
        assert expected in _error(capsys, [*base, *flags]), flags
    odd = tmp_path / "train.data"
    odd.write_text("a\tO\n", encoding="utf-8")
    assert "give --format" in _error(capsys, [*base, "--train", str(odd)])

    # A malformed line (8 fields), and an unknown tag in the test file: the command stops
    # with the file and the line (exit status 1), before anything is written.
    lines = pathlib.Path(files["train.conllu"]).read_text(encoding="utf-8").split("\n")
    lines[6] = "\t".join(lines[6].split("\t")[:8])  # a word line
    malformed = tmp_path / "malformed.conllu"
    malformed.write_text("\n".join(lines), encoding="utf-8")
    unknown = tmp_path / "unknown.conllu"
    lines = pathlib.Path(files["test.conllu"]).read_text(encoding="utf-8").split("\n")
    noun = next(i for i, line in enumerate(lines) if "\tNOUN\t" in line)
    lines[noun] = lines[noun].replace("\tNOUN\t", "\tNOUM\t")
    unknown.write_text("\n".join(lines), encoding="utf-8")
    for flags, expected in [
        (["--train", str(malformed)], f"`train`: {malformed}, line 7: 8 tab-separated fields"),
        (["--train", files["train.conllu"], "--test", str(unknown)],
         f"`test`: {unknown}, line {noun + 1}: the tag 'NOUM' is not in `tag_names`"),
    ]:
        with pytest.raises(SystemExit) as raised:
            cli.main([*base, *flags])
        assert raised.value.code.startswith("tfnlp: error: ") and expected in raised.value.code
        assert not output.exists()
    # ... as a user sees it: a message on stderr and exit status 1.
    done = subprocess.run([sys.executable, "-m", "tfnlp.cli", *base, "--train", str(malformed)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "line 7: 8 tab-separated fields" in done.stderr
    assert not output.exists()


def test_elmo_tagger_on_a_pretrained_bilm_and_its_bilstm_control(files, capsys, tmp_path):
    """--model elmo on a `tfnlp pretrain elmo` run (untrained here: that command is tested in
    tests/test_cli.py), with a CRF, then evaluate, predict raw text and export; --model bilstm."""
    import tensorflow as tf

    from tfnlp import models

    elmo = tmp_path / "elmo"
    elmo.mkdir()
    models.ELMoBiLM(word_vocabulary_size=20, num_layers=1, units=8, projection_dim=4,
                    filters=((1, 4), (2, 4)), num_highway_layers=1, max_characters=20,
                    num_sampled=None).save(elmo / "model.keras")
    (elmo / "config.json").write_text(json.dumps({"kind": "elmo", "settings": {"sequence_length": 20}}),
                                      encoding="utf-8")
    run = tmp_path / "ner"
    out = _tfnlp_here(capsys, "finetune", "--task", "tagging", "--train", files["train.iob2"], "--test",
                      files["test.iob2"], "--tag-column", "2", "--word-column", "1", "--model", "elmo",
                      "--pretrained", str(elmo), "--crf", "--epochs", "2", "--batch-size", "8",
                      "--output", str(run))
    assert "max_words 8 (the longest training sentence: 8 words)" in out and "entity micro-F1" in out
    tagger = keras.saving.load_model(run / "model.keras", compile=False)
    assert type(tagger).__name__ == "BiLSTMTokenClassifier" and tagger.elmo is not None
    assert tagger.elmo.bilm.max_characters == 20 and tagger.crf is not None
    out = _tfnlp_here(capsys, "evaluate", "--task", "tagging", "--run", str(run), "--data", files["test.iob2"])
    assert json.loads((run / "evaluation.json").read_text()) == json.loads(
        (run / "results.json").read_text())["test"]
    lines = _json_lines(_tfnlp_here(capsys, "predict", "--task", "tagging", "--run", str(run), "--input",
                                    files["raw.txt"]))
    assert lines[0]["words"][:2] == ["Ada", "Lovelace"] and lines[0]["tags"] == tagger.predict_tags(
        ["Ada Lovelace visited Paris with Acme."])[0]
    _tfnlp_here(capsys, "export", "--run", str(run), "--output", str(tmp_path / "served"))
    served = tf.saved_model.load(str(tmp_path / "served" / "1")).signatures["serving_default"]
    outputs = served(text=tf.constant(["Ada Lovelace visited Paris with Acme.", ""]))
    assert outputs["num_words"].numpy().tolist() == [7, 0]
    assert [t.decode() for t in outputs["tags"][0].numpy()] == lines[0]["tags"]

    control = tmp_path / "bilstm"
    _tfnlp_here(capsys, "finetune", "--task", "tagging", "--train", files["train.iob2"], "--steps", "2",
                "--validation-fraction", "0", "--model", "bilstm", "--output", str(control))
    tagger = keras.saving.load_model(control / "model.keras", compile=False)
    assert type(tagger).__name__ == "BiLSTMTokenClassifier" and tagger.elmo is None


def test_bert_from_scratch_is_the_default_model(files, capsys, tmp_path):
    run = tmp_path / "bert"
    _tfnlp_here(capsys, "finetune", "--task", "tagging", "--train", files["train.iob2"], "--steps", "2",
                "--validation-fraction", "0", "--vocabulary-size", "100", "--output", str(run))
    tagger = keras.saving.load_model(run / "model.keras", compile=False)
    assert type(tagger).__name__ == "BertTokenClassifier" and tagger.backbone.hidden_dim == 128


def test_help_and_refused_models_answer_without_importing_tensorflow(files, tmp_path):
    from tfnlp.cli import tasks

    assert "tagging" in tasks.names("finetune") and tasks.get_task("tagging").kind == "tagger"
    refused = ["--train", files["train.conllu"], "--model", "elmo", "--output", str(tmp_path / "o")]
    for argv, status, shown in ((["finetune", "--task", "tagging", "--help"], 0, "--tag-column"),
                                (["predict", "--task", "tagging", "--help"], 0, "--word-column"),
                                (["finetune", "--task", "tagging", *refused], 2, "needs --pretrained")):
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "tfnlp.cli", *argv],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == status and shown in done.stdout + done.stderr, done.stderr[-2000:]
        imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line}
        assert "tensorflow" not in imported and "keras" not in imported, argv


def test_the_conllu_columns_agree_with_the_reader():
    from tfnlp.cli.tasks import tagging
    from tfnlp.data import tagged

    assert tagging.CONLLU_COLUMNS == tagged.CONLLU_COLUMNS
