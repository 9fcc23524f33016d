"""The `tfnlp` command line: validation up front, and a real pipeline end to end."""

import json
import pathlib
import subprocess
import sys

import keras
import pytest

from tfnlp import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORPUS = "\n".join([
    "It is a truth universally acknowledged.", "A single man must be in want of a wife.", "",
    "Emma Woodhouse, handsome, clever, and rich.", "She had lived nearly twenty-one years.",
    "The whale swam on.", "", "Call me Ishmael.", "Some years ago I went to sea.",
] * 20)


def _error(capsys, argv):
    with pytest.raises(SystemExit) as raised:
        cli.main(argv)
    assert raised.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("command", [["vocab"], ["pretrain", "bert"], ["pretrain", "unilm"],
                                     ["pretrain", "elmo"], ["finetune"], ["export"]])
def test_help_documents_every_setting(command):
    parser = cli.build_parser()
    subparser = parser
    for word in command:
        subparser = next(a for a in subparser._actions if hasattr(a, "choices") and a.choices
                         and word in a.choices).choices[word]
    text = subparser.format_help()
    schema = cli._schema(type("Args", (), {"command": command[0], "model_name": command[-1]})())
    for name, (_, _default, description, _) in schema.items():
        assert "--" + name.replace("_", "-") in text, name
        assert " ".join(description.split()[:3]) in " ".join(text.split()), name


def test_unknown_keys_and_wrong_types_are_refused_before_anything_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative outputs ("o") would land here
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"steps": 10, "batch_sise": 8}))
    message = _error(capsys, ["pretrain", "bert", "--config", str(config), "--output", str(tmp_path)])
    assert "batch_sise" in message and "allowed" in message
    config.write_text(json.dumps({"steps": "ten"}))
    assert "`steps` must be int" in _error(capsys, ["pretrain", "elmo", "--config", str(config),
                                                   "--output", str(tmp_path)])
    config.write_text(json.dumps({"jit_compile": "yes"}))
    assert "`jit_compile` must be bool or 'auto'" in _error(
        capsys, ["finetune", "--config", str(config), "--pretrained", "x", "--output", "y"])
    config.write_text("[1, 2]")
    assert "mapping" in _error(capsys, ["export", "--config", str(config)])
    config.write_text("{not json")
    assert "not valid JSON" in _error(capsys, ["export", "--config", str(config)])
    assert "`output` is required" in _error(capsys, ["pretrain", "elmo"])
    assert "`profile`" in _error(capsys, ["pretrain", "elmo", "--output", "o", "--profile", "5"])
    assert "`steps` must be positive" in _error(capsys, ["pretrain", "elmo", "--output", "o", "--steps", "0"])
    assert "invalid int value" in _error(capsys, ["pretrain", "elmo", "--steps", "many"])
    assert "invalid choice" in _error(capsys, ["pretrain", "elmo", "--dtype", "float8"])
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c\n", encoding="utf-8")
    assert "`corpus`" in _error(capsys, ["pretrain", "elmo", "--output", "o", "--corpus", "missing.txt"])
    assert "`vocabulary`" in _error(capsys, ["pretrain", "bert", "--output", "o", "--corpus", str(corpus),
                                             "--vocabulary", "missing.txt"])
    assert "multiple of 6" in _error(capsys, ["pretrain", "unilm", "--output", "o", "--batch-size", "8"])
    assert "finite" in _error(capsys, ["pretrain", "elmo", "--output", "o", "--learning-rate", "nan"])
    assert "`sequence_length` must be positive" in _error(
        capsys, ["pretrain", "elmo", "--output", "o", "--sequence-length", "0"])
    assert "`pretrained`" in _error(capsys, ["finetune", "--pretrained", str(tmp_path / "none"), "--output", "o"])
    assert "STOP <= steps" in _error(capsys, ["pretrain", "elmo", "--output", "o", "--steps", "5",
                                              "--profile", "3:9"])
    config.write_text(json.dumps({"profile": 615}))  # what YAML 1.1 reads for an unquoted 10:15
    assert "quote it" in _error(capsys, ["pretrain", "elmo", "--config", str(config), "--output", "o"])
    assert "`sequence_length` must be at least 5" in _error(
        capsys, ["pretrain", "bert", "--output", "o", "--sequence-length", "4"])
    words = tmp_path / "words.txt"
    words.write_text("<S>\n</S>\n<UNK>\nthe\n", encoding="utf-8")
    assert "not a WordPiece vocabulary" in _error(
        capsys, ["pretrain", "unilm", "--output", "o", "--vocabulary", str(words)])
    wordpiece = tmp_path / "vocab.txt"
    wordpiece.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n", encoding="utf-8")
    assert "not a words vocabulary: it must start with ['<S>', '</S>', '<UNK>']" in _error(
        capsys, ["pretrain", "elmo", "--output", "o", "--vocabulary", str(wordpiece)])
    words.write_text("<S>\n</S>\n<UNK>\nthe\na\nthe\n", encoding="utf-8")
    assert "lists words more than once: ['the']" in _error(
        capsys, ["pretrain", "elmo", "--output", "o", "--vocabulary", str(words)])
    words.write_bytes(b"<S>\n</S>\n<UNK>\ncaf\xe9\n")  # Latin-1
    assert "is not UTF-8 text" in _error(capsys, ["pretrain", "elmo", "--output", "o", "--vocabulary", str(words)])
    assert "`size` must exceed the 5 reserved" in _error(
        capsys, ["vocab", "--corpus", str(corpus), "--size", "5", "--output", "v.txt"])
    pretrained = tmp_path / "pretrained"
    pretrained.mkdir()
    (pretrained / "config.json").write_text(json.dumps({"kind": "bert", "settings": {"sequence_length": 64}}))
    assert "exceeds the pretrained model's position table (64" in _error(
        capsys, ["finetune", "--pretrained", str(pretrained), "--output", "o", "--sequence-length", "128"])
    assert not (tmp_path / "o").exists()  # nothing was started


def test_a_corpus_of_one_sentence_documents_is_refused_for_bert_pretraining(tmp_path, capsys):
    # Next-sentence pairs need two sentences of one document; before, the
    # repeated pipeline waited forever for a first batch.
    corpus = tmp_path / "reviews.txt"
    corpus.write_text("\n\n".join(["Great coffee, will buy again.", "Stale and bitter."] * 30),
                      encoding="utf-8")
    with pytest.raises(SystemExit, match="gives no bert training batch of 8"):
        cli.main(["pretrain", "bert", "--corpus", str(corpus), "--vocabulary-size", "100",
                  "--sequence-length", "32", "--batch-size", "8", "--output", str(tmp_path / "o")])


def test_documents_in_a_corpus_file_end_at_lines_that_are_blank_once_stripped(tmp_path):

    from tfnlp.cli import _runs

    corpus = tmp_path / "corpus.txt"
    # Spaces or tabs on the separating line, Windows line ends, blank lines
    # at the start and end, and several blank lines in a row.
    corpus.write_bytes(b"\n  \nOne.\r\nTwo.\r\n \t \r\nThree.\n\n\n\nFour.\nFive.  \n\n")
    assert _runs.read_corpus(str(corpus)) == [["One.", "Two."], ["Three."], ["Four.", "Five."]]
    corpus.write_text(" \n\t\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="holds no text"):
        _runs.read_corpus(str(corpus))


def test_yaml_config_and_flags_override_it(tmp_path):
    pytest.importorskip("yaml")
    config = tmp_path / "settings.yaml"
    config.write_text("steps: 40\nbatch_size: 12\ndtype: mixed_bfloat16\nlearning_rate: 1e-3\n")
    args = cli.build_parser().parse_args(["pretrain", "unilm", "--config", str(config), "--steps", "7",
                                          "--output", "o"])
    flags = {k: v for k, v in vars(args).items() if k not in ("command", "model_name", "config")}
    settings = cli.resolve(cli._schema(args), cli.load_config(str(config)), flags)
    assert settings["steps"] == 7 and settings["batch_size"] == 12
    assert settings["dtype"] == "mixed_bfloat16" and settings["architecture"] == "bert_tiny"
    assert settings["learning_rate"] == 1e-3  # YAML 1.1 reads 1e-3 as text; accepted as a number
    assert settings["jit_compile"] == "auto"  # Keras resolves it: XLA where a GPU or TPU is visible
    for value in (True, False, "auto"):
        assert cli.resolve(cli._schema(args), {"jit_compile": value}, flags)["jit_compile"] == value


def _configure(argv):
    """The checked settings of `tfnlp ARGV` (no TensorFlow: nothing runs)."""
    args = cli.build_parser(argv).parse_args(argv)
    return cli._command(args.command).configure(args)


def test_old_spellings_work_for_one_release_and_say_so(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"kind": "classifier", "settings": {}}))
    labelled = tmp_path / "test.tsv"
    labelled.write_text("text\tlabel\ngreat coffee\tgreat\n", encoding="utf-8")
    cases = [  # (command, old flag, new flag, setting, value)
        (["evaluate", "--data", str(labelled)], "--model", "--run", "run", str(run)),
        (["predict", "--input", str(labelled)], "--model", "--run", "run", str(run)),
        (["export", "--output", str(tmp_path / "served")], "--model", "--run", "run", str(run)),
        (["pretrain", "bert", "--output", "o"], "--preset", "--architecture", "architecture", "bert_mini"),
        (["pretrain", "elmo", "--output", "o"], "--preset", "--architecture", "architecture",
         "elmo_original"),
    ]
    for command, old, new, name, value in cases:
        capsys.readouterr()
        settings = _configure([*command, new, value])
        assert settings[name] == value and capsys.readouterr().err == ""
        assert _configure([*command, old, value]) == settings
        assert f"`{old}` is deprecated: use `{new}`" in capsys.readouterr().err
        with pytest.raises(SystemExit):
            cli.main([*command, "--help"])
        shown = capsys.readouterr().out
        assert new in shown and old not in shown  # the old spelling is hidden from --help
        # ... and as a key of a --config file.
        config = tmp_path / "config.json"
        config.write_text(json.dumps({old.strip("-"): value}))
        assert _configure([*command, "--config", str(config)]) == settings
        assert f"the setting `{old.strip('-')}` (in {config}) is deprecated" in capsys.readouterr().err
        config.write_text(json.dumps({old.strip("-"): value, name: value}))
        assert f"sets both `{name}` and its old name" in _error(capsys, [*command, "--config", str(config)])
    # --model is finetune's own setting (bert or transformer), not an old spelling there.
    assert _configure(["finetune", "--model", "transformer", "--output", "o"])["model"] == "transformer"
    assert "deprecated" not in capsys.readouterr().err


def test_the_cli_constants_agree_with_the_library():
    from tfnlp import data, models
    from tfnlp.cli import _settings, pretrain
    from tfnlp.data import elmo

    assert _settings.SPECIAL_TOKENS == tuple(data.SPECIAL_TOKENS)
    assert _settings.WORD_TOKENS == (elmo.BOS, elmo.EOS, elmo.UNK)
    for name, table in (("bert", models.BERT_ARCHITECTURES), ("unilm", models.BERT_ARCHITECTURES),
                        ("elmo", models.ELMO_ARCHITECTURES)):
        assert set(pretrain.SPECS[name].options["architecture"][3]) <= set(table), name


@pytest.fixture
def toy_task(monkeypatch):
    """A task registered for one test: the registry is restored after it."""
    from tfnlp.cli import _settings, tasks

    monkeypatch.setattr(tasks, "TASKS", dict(tasks.TASKS))

    @tasks.register_task("toy")
    class Toy(tasks.Task):
        kind = "toy_model"
        help = "a task of tests/test_cli.py"
        finetune_options = {"words": (str, None, "toy words to learn", None)}
        runs = []

        def check(self, command, settings):
            if settings["words"] == "none":
                raise _settings.ConfigError("`words` must not be none.")

        def finetune(self, settings):
            self.runs.append(settings)
            print(f"toy finetune on {settings['words']}")
            return 0

        def export(self, model, run, config, settings):
            return "nowhere"

    return Toy


def test_a_new_task_is_one_registered_class_and_no_command_changes(toy_task, tmp_path, capsys):
    from tfnlp.cli import export, tasks

    with pytest.raises(ValueError, match="registered already"):
        tasks.register_task("toy")(toy_task)
    with pytest.raises(SystemExit):
        cli.main(["finetune", "--help"])
    assert "{classification,tagging,toy}" in capsys.readouterr().out
    # Each command lists the tasks that have it: Toy has no evaluate.
    assert "invalid choice: 'toy'" in _error(capsys, ["evaluate", "--task", "toy", "--run", "r"])
    for task in (["--task", "toy"], ["--task=toy"], ["--tas", "toy"]):  # argparse's abbreviation too
        with pytest.raises(SystemExit):
            cli.main(["finetune", *task, "--help"])
        text = capsys.readouterr().out
        assert "toy words to learn" in text and "--batch-size" in text and "--label-column" not in text
    assert "`words` must not be none" in _error(
        capsys, ["finetune", "--task", "toy", "--words", "none", "--output", str(tmp_path)])
    assert "`words` is required" in _error(capsys, ["finetune", "--task", "toy", "--output", "o"])
    assert "invalid choice: 'toys'" in _error(capsys, ["finetune", "--task", "toys", "--output", "o"])
    assert cli.main(["finetune", "--task", "toy", "--words", "hello", "--output", str(tmp_path)]) == 0
    assert "toy finetune on hello" in capsys.readouterr().out
    assert toy_task.runs[-1]["words"] == "hello" and toy_task.runs[-1]["steps"] == 1000  # training's
    assert export.exporters()["toy_model"](None, None, None, None) == "nowhere"  # by its runs' kind


def test_the_registry_holds_the_built_in_tasks():
    from tfnlp.cli import tasks

    assert tasks.names() == ["classification", "tagging"]  # and no test's task left behind


def test_every_help_answers_without_importing_tensorflow():
    for argv in (["vocab"], ["pretrain", "elmo"], ["evaluate"], ["predict", "--task", "classification"],
                 ["export"], ["generate"]):
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "tfnlp.cli", *argv, "--help"],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "usage: tfnlp" in done.stdout, done.stderr[-2000:]
        imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line}
        assert "tensorflow" not in imported and "keras" not in imported, argv


def _tfnlp(*argv, stdin=None):
    """`python -m tfnlp.cli ARGV` in a fresh process, as a user runs it."""
    done = subprocess.run([sys.executable, "-m", "tfnlp.cli", *argv], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _tfnlp_here(capsys, *argv):
    """The same command in this process: each step of a pipeline test would
    otherwise pay a TensorFlow start-up; the last step of each runs in a
    fresh process (`_tfnlp`), reading what these wrote."""
    keras.backend.clear_session()
    capsys.readouterr()
    assert cli.main(list(argv)) == 0
    return capsys.readouterr().out


def test_console_script_is_installed():
    script = pathlib.Path(sys.executable).parent / "tfnlp"
    assert script.exists(), "reinstall tfnlp (pip install -e .) to get the console script"


def test_vocab_pretrain_resume_finetune_export_generate(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS, encoding="utf-8")
    out = _tfnlp_here(capsys, "vocab", "--corpus", str(corpus), "--size", "300",
                      "--output", str(tmp_path / "v.txt"))
    assert "tokens written" in out and (tmp_path / "v.txt").read_text().startswith("[PAD]")

    bert = tmp_path / "bert"
    common = ["--corpus", str(corpus), "--vocabulary", str(tmp_path / "v.txt"), "--sequence-length", "32",
              "--max-predictions", "4", "--batch-size", "8", "--checkpoint-every", "2",
              "--log-every", "1", "--output", str(bert)]
    out = _tfnlp_here(capsys, "pretrain", "bert", "--steps", "3", *common)
    assert "3 steps done" in out
    # Resumes from the step-3 checkpoint on disk (restarts of killed processes: tests/training).
    out = _tfnlp_here(capsys, "pretrain", "bert", "--steps", "5", *common)
    assert "5 steps done" in out
    assert json.loads((bert / "config.json").read_text())["kind"] == "bert"
    assert (bert / "model.keras").exists() and list((bert / "logs").glob("events.out.tfevents.*"))
    assert (bert / "logs" / "projector" / "projector_config.pbtxt").exists()
    assert list((bert / "logs" / "attention").glob("events.out.tfevents.*"))  # attention images

    reviews = tmp_path / "reviews"
    out = _tfnlp_here(capsys, "finetune", "--pretrained", str(bert), "--output", str(reviews),
                      "--steps", "2", "--batch-size", "8", "--sequence-length", "32",
                      "--dtype", "mixed_bfloat16")
    assert "test accuracy" in out
    # --dtype reaches the pretrained (float32) encoder too, not only the new head.
    classifier = keras.saving.load_model(reviews / "model.keras", compile=False)
    assert {layer.dtype_policy.name for layer in classifier.backbone._flatten_layers()
            if layer.weights} == {"mixed_bfloat16"}
    _tfnlp_here(capsys, "export", "--model", str(reviews), "--output", str(tmp_path / "served"))
    with pytest.raises(SystemExit, match=r"is not a SavedModel; it holds the version\(s\) \['1'\]"):
        list(__import__("tfnlp.cli.generate", fromlist=["generate"]).generate(str(tmp_path / "served"), ["x"]))
    lines = _tfnlp("generate", "--saved-model", str(tmp_path / "served" / "1"),
                   stdin="great coffee, will buy again\nstale and bitter\n").strip().split("\n")
    assert len(lines) == 2 and all(line.split("\t")[0] in ("other", "great") for line in lines)


def test_pretrain_elmo_and_unilm_on_a_small_corpus(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS, encoding="utf-8")
    # The softmax's words from `tfnlp vocab --kind words`.
    _tfnlp_here(capsys, "vocab", "--corpus", str(corpus), "--kind", "words", "--size", "20",
                "--output", str(tmp_path / "words.txt"))
    out = _tfnlp_here(capsys, "pretrain", "elmo", "--corpus", str(corpus), "--steps", "2",
                      "--batch-size", "4", "--sequence-length", "12", "--output", str(tmp_path / "elmo"),
                      "--vocabulary", str(tmp_path / "words.txt"))
    assert "2 steps done" in out
    assert (tmp_path / "elmo" / "words.txt").read_text() == (tmp_path / "words.txt").read_text()
    _tfnlp_here(capsys, "export", "--model", str(tmp_path / "elmo"),
                "--output", str(tmp_path / "elmo_served"))
    line = _tfnlp_here(capsys, "generate", "--saved-model", str(tmp_path / "elmo_served" / "1"),
                       "--text", "Call me")
    assert json.loads(line)["outputs"]["elmo"][-1] == 256  # 2 x the elmo_small projection
    out = _tfnlp_here(capsys, "pretrain", "unilm", "--corpus", str(corpus), "--vocabulary-size", "200",
                      "--steps", "2", "--batch-size", "6", "--sequence-length", "32",
                      "--output", str(tmp_path / "unilm"))
    assert "2 steps done" in out
    unilm = keras.saving.load_model(tmp_path / "unilm" / "model.keras", safe_mode=True)
    generated = unilm.generate(["Call me"], max_length=4)  # the model keeps its tokenizer
    assert len(generated) == 1 and isinstance(generated[0], str)
    _tfnlp_here(capsys, "export", "--model", str(tmp_path / "unilm"),
                "--output", str(tmp_path / "unilm_served"))
    lines = _tfnlp("generate", "--saved-model", str(tmp_path / "unilm_served" / "1"),
                   "--text", "Call me", "--text", "").split("\n")
    assert len(lines) == 3 and lines[-1] == ""  # two outputs (any text: 2 training steps)
    # Sampling and prompt continuation through the export's `sample` and `continue`.
    served = str(tmp_path / "unilm_served" / "1")
    sampled = [_tfnlp_here(capsys, "generate", "--saved-model", served, "--text", "Call me",
                           "--text", "Ishmael", "--top-p", "0.9", "--seed", "3", *more)
               for more in ((), ("--continue", "--temperature", "2", "--max-new-tokens", "3"))]
    in_memory = [unilm.generate(["Call me", "Ishmael"], top_p=0.9, seed=3),
                 unilm.continue_prompt(["Call me", "Ishmael"], top_p=0.9, seed=3, temperature=2.0,
                                       max_new_tokens=3)]
    assert [out.split("\n")[:2] for out in sampled] == in_memory
    with pytest.raises(SystemExit, match="`top_p` must be a number in"):
        cli.main(["generate", "--saved-model", served, "--text", "x", "--top-p", "2"])
    with pytest.raises(SystemExit, match="need a `sample` signature"):
        cli.main(["generate", "--saved-model", str(tmp_path / "elmo_served" / "1"), "--text", "x",
                  "--seed", "1"])


def test_a_directory_written_before_the_normalization_key_keeps_its_tokenizer():
    import tensorflow as tf

    from tfnlp.cli import _runs

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "1998", ","]
    old = _runs.tokenizer(vocabulary, {"kind": "bert", "settings": {}})  # no key: nfkc
    new = _runs.tokenizer(vocabulary, {"kind": "bert", "normalization": "bert"})
    assert (old.normalization, new.normalization) == ("nfkc", "bert")
    assert old(tf.constant(["１９９８，"])).to_list() == [[5, 6]]
    assert new(tf.constant(["１９９８，"])).to_list() == [[1, 1]]
