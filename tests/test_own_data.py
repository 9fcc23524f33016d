"""Your own labelled data, end to end: a TSV the project has never seen, through the CLI and in Python."""

import json
import os
import pathlib
import random
import re
import subprocess
import sys

import keras
import pytest

from tests.export.fresh_process import ServingProcess
from tfnlp import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]
TOPICS = {
    "sport": "match goal team score coach league player win season stadium".split(),
    "food": "recipe flavour sauce bake dinner spicy sweet kitchen taste bread".split(),
    "weather": "rain storm sunny forecast cold wind cloud snow humid temperature".split(),
}
FILLER = "the a of and to in it was very quite really some today this that we they".split()
# Every field a results file must have (test metrics).
RESULT_FIELDS = {"examples", "accuracy", "macro_f1", "per_class", "confusion_matrix",
                 "majority_class_accuracy"}


def write_topics(path, count, seed, label_column="category", fmt="tsv"):
    """A labelled file of short texts in three topics (a user's data, made here), unbalanced classes."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        label = rng.choices(list(TOPICS), weights=[5, 3, 2])[0]
        words = rng.choices(FILLER, k=6) + rng.choices(TOPICS[label], k=2)
        rng.shuffle(words)
        rows.append((str(i), " ".join(words).capitalize() + ".", label))
    with open(path, "w", encoding="utf-8") as f:
        if fmt == "jsonl":
            f.writelines(json.dumps({"id": i, "text": t, label_column: y}) + "\n" for i, t, y in rows)
        else:
            f.write(f"id\ttext\t{label_column}\n")
            f.writelines(f"{i}\t{t}\t{y}\n" for i, t, y in rows)
    return path


def _run(capsys, *argv):
    keras.backend.clear_session()
    capsys.readouterr()
    assert cli.main(list(argv)) == 0
    return capsys.readouterr().out


def test_cli_alone_vocab_pretrain_mlm_finetune_evaluate_export_serve(tmp_path, capsys):
    train = write_topics(tmp_path / "train.tsv", 600, seed=1)
    test = write_topics(tmp_path / "test.tsv", 200, seed=2)
    vocabulary = tmp_path / "vocab.txt"
    _run(capsys, "vocab", "--corpus", str(train), "--size", "200", "--output", str(vocabulary))

    # Pretraining on the texts of the same file, masked LM only: no sentence pairs needed.
    bert = tmp_path / "bert"
    out = _run(capsys, "pretrain", "bert", "--corpus", str(train), "--objectives", "mlm",
               "--vocabulary", str(vocabulary), "--sequence-length", "32", "--max-predictions", "5",
               "--batch-size", "16", "--steps", "12", "--checkpoint-every", "6",
               "--output", str(bert))
    assert re.search(r"step 6: validation loss [0-9.]+, mlm_accuracy", out), out
    assert "step 12: validation" in out
    assert (bert / "backbone.keras").exists()  # for fine-tuning in Python
    assert "nsp" not in keras.saving.load_model(bert / "model.keras", compile=False).output_names

    classifier = tmp_path / "classifier"
    out = _run(capsys, "finetune", "--train", str(train), "--test", str(test), "--label-column",
               "category", "--pretrained", str(bert), "--batch-size", "16", "--epochs", "3",
               "--output", str(classifier))
    assert "sequence_length 16" in out  # from the percentiles of these texts' lengths
    assert "540 training, 60 validation examples, 3 classes" in out  # 10% held out
    results = json.loads((classifier / "results.json").read_text())
    figures = results["test"]
    assert RESULT_FIELDS <= set(figures)
    assert set(figures["per_class"]) == set(TOPICS) == set(results["labels"])
    assert all({"precision", "recall", "f1", "support"} <= set(v) for v in figures["per_class"].values())
    assert sum(map(sum, figures["confusion_matrix"]["rows"])) == figures["examples"] == 200
    assert figures["accuracy"] > figures["majority_class_accuracy"] + 0.1, figures

    out = _run(capsys, "evaluate", "--model", str(classifier), "--data", str(test))
    assert json.loads((classifier / "evaluation.json").read_text())["accuracy"] == figures["accuracy"]

    texts = tmp_path / "new.txt"
    texts.write_text("Rain, storm and wind all day.\nA sweet bread for dinner.\n", encoding="utf-8")
    predicted = _run(capsys, "predict", "--model", str(classifier), "--input", str(texts))
    assert [line.split("\t")[0] in TOPICS for line in predicted.strip().split("\n")] == [True, True]

    _run(capsys, "export", "--model", str(classifier), "--output", str(tmp_path / "served"))
    with ServingProcess(tmp_path / "served" / "1", backend="cpp") as served:  # TF Serving's loader
        outputs = served("serving_default", text=["The coach and the team won the match.", ""])
        assert set(outputs["label"].tolist()) <= set(TOPICS)
        assert outputs["probabilities"].shape == (2, 3)
        rain = served("serving_default", text=["Rain, storm and wind all day."])["label"][0]
    assert predicted.split("\t")[0] == rain


def _docs_block(page, marker):
    """The Python block of a docs page that follows `marker`."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    # tests/test_docs.py leaves this page to this file: a second block would run nowhere.
    assert text.count("```python") == 1, f"docs/{page}: one Python block expected"
    after = text[text.index(marker):]
    return after.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_docs_python_path_runs_in_ten_lines(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_topics(tmp_path / "train.tsv", 400, seed=3)
    write_topics(tmp_path / "test.tsv", 100, seed=4)
    code = _docs_block("own_data.md", "## In Python")
    lines = [line for line in code.splitlines() if line.strip() and not line.startswith("#")]
    assert len(lines) <= 10, code
    keras.utils.set_random_seed(0)
    namespace = {}
    exec(compile(code, "docs/own_data.md", "exec"), namespace)
    printed = capsys.readouterr().out
    classifier = namespace["classifier"]
    assert classifier.labels == sorted(TOPICS)
    assert "test accuracy" in printed
    accuracy = float(printed.split("test accuracy")[1].split()[0])
    assert accuracy > 0.8, printed
    assert os.path.exists(tmp_path / "saved_models" / "topics" / "1" / "saved_model.pb")


def _error(capsys, argv, status=1):
    """What `tfnlp ARGV` printed on failing with `status`: 2 for settings refused before anything
    runs (argparse's usage errors, on stderr), 1 for a data file found wrong while running
    (the exit code is the message, which Python prints)."""
    keras.backend.clear_session()
    with pytest.raises(SystemExit) as raised:
        cli.main(argv)
    code = raised.value.code
    assert code == 2 if status == 2 else str(code).startswith("tfnlp: error: "), (code, argv)
    return str(code) + capsys.readouterr().err


def test_bad_files_and_columns_get_errors_that_name_them(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    train = write_topics(tmp_path / "train.tsv", 60, seed=5)
    common = ["finetune", "--model", "transformer", "--output", "o", "--epochs", "1"]
    message = _error(capsys, [*common, "--train", str(train), "--label-column", "topic"])
    assert "no column 'topic' (`label_column`)" in message and "['id', 'text', 'category']" in message
    assert "`train`" in message
    other = tmp_path / "validation.tsv"
    other.write_text("id\ttext\tcategory\n1\tSnow and cold.\tweather\n2\tA new label.\tpolitics\n",
                     encoding="utf-8")
    message = _error(capsys, [*common, "--train", str(train), "--label-column", "category",
                              "--validation", str(other)])
    assert "`validation`" in message and "'politics'" in message and "line 3" in message
    empty = tmp_path / "empty.tsv"
    empty.write_text("", encoding="utf-8")
    assert "empty" in _error(capsys, [*common, "--train", str(empty), "--label-column", "category"])
    latin = tmp_path / "latin.tsv"
    latin.write_bytes("text\tcategory\ncaf\xe9 au lait\tfood\n".encode("latin-1"))
    message = _error(capsys, [*common, "--train", str(latin), "--label-column", "category"])
    assert "not valid UTF-8" in message and "line 2" in message
    message = _error(capsys, [*common, "--train", str(tmp_path / "missing.tsv")], status=2)
    assert "`train`" in message and "is not a file" in message
    message = _error(capsys, ["finetune", "--train", str(train), "--output", "o"], status=2)
    assert "`pretrained` is required with --model bert" in message
    notes = tmp_path / "notes.txt"
    notes.write_text("Rain.\n", encoding="utf-8")
    assert "must be a .tsv, .csv or .jsonl file" in _error(capsys, [*common, "--train", str(notes)], status=2)
    assert not (tmp_path / "o").exists()  # nothing was started


def _quiet_run(*argv):
    """`tfnlp ARGV` in a fresh process, output to pipes (not a terminal): its stdout + stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "tfnlp.cli", *argv], cwd=ROOT, capture_output=True, text=True,
        timeout=600, env={k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


def test_logs_are_quiet_and_line_based_when_not_a_terminal(tmp_path):
    train = write_topics(tmp_path / "train.jsonl", 120, seed=6, fmt="jsonl")
    outputs = [
        _quiet_run("pretrain", "bert", "--corpus", str(train), "--objectives", "mlm",
                   "--vocabulary-size", "150", "--sequence-length", "32", "--batch-size", "8",
                   "--steps", "4", "--checkpoint-every", "2", "--output", str(tmp_path / "bert")),
        _quiet_run("finetune", "--model", "transformer", "--train", str(train), "--label-column",
                   "category", "--batch-size", "16", "--epochs", "2", "--bucket-boundaries", "12",
                   "--output", str(tmp_path / "o")),
    ]
    assert "step 4/4" in outputs[0] and "step 12/12" in outputs[1]
    for output in outputs:
        assert "\r" not in output  # a progress line per 5%, never redrawn in place
        noise = [line for line in output.splitlines()
                 if re.match(r"[IWEF]\d{4} ", line) or "Warning" in line or "warn" in line.lower()
                 or "absl::InitializeLog" in line or "cuInit" in line or "Type inference" in line]
        assert not noise, "\n".join(noise[:20])


def test_help_answers_without_importing_tensorflow():
    for argv, shown in ((["--help"], "finetune"), (["finetune", "--help"], "--text-column")):
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "tfnlp.cli", *argv],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and shown in done.stdout
        imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line}
        assert "tensorflow" not in imported and "keras" not in imported


def test_only_the_tfnlp_program_imports_lazily(tmp_path):
    # Another module run with -m imports tfnlp as a library: everything registered with Keras.
    (tmp_path / "mymodule.py").write_text(
        "import sys, tfnlp\nprint('tfnlp.models' in sys.modules)\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "mymodule"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr[-2000:]
