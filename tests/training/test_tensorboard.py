"""TensorBoard output of `training.fit`: scalars, histograms, attention images, profiler
traces and the embedding projector, read back from the event files and from a real
`tensorboard` server's HTTP data API."""

import collections
import glob
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import families
from tfnlp import data, training

STEPS = 3
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran"]
# The tokenizer's vocabulary, padded to the tiny model's vocabulary size.
VOCABULARY = SPECIAL + WORDS + [f"w{i}" for i in range(families.VOCABULARY - len(SPECIAL) - len(WORDS))]
# What the projector labels the rows with: awkward tokens included.
LABELS = VOCABULARY[:-5] + ["tab\there", "new\nline", " ", "猫", "cr\rx"]
ESCAPED = VOCABULARY[:-5] + ["tab\\there", "new\\nline", "' '", "猫", "cr\\rx"]


def _events(directory):
    """tag -> (plugin name, [(step, value)]) over the event files directly in `directory`."""
    found = collections.defaultdict(lambda: ["", []])
    for path in sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                entry = found[value.tag]
                entry[0] = value.metadata.plugin_data.plugin_name or entry[0]
                entry[1].append((event.step, tf.make_ndarray(value.tensor)))
    return dict(found)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One short training run that logs everything, and its projector files."""
    log_dir = str(tmp_path_factory.mktemp("tensorboard") / "logs")
    keras.utils.set_random_seed(1234)
    model = families.model("bert_classifier")
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(VOCABULARY), families.LENGTH)
    probe = "the cat sat on the mat"
    every_two = training.AttentionImages(model.backbone, preprocessor, probe, log_dir, every_n_steps=2)
    at_end = training.AttentionImages(model.backbone, preprocessor, probe, os.path.join(log_dir, "end"))
    history = training.fit(model, families.batches("bert_classifier"), STEPS, log_dir=log_dir, log_every=1,
                           histogram_every=1, profile_steps=(2, 3), callbacks=[every_two, at_end], verbose=0)
    config = training.write_embedding_projector(log_dir, model.backbone.token_embedding, LABELS)
    return {"log_dir": log_dir, "model": model, "history": history, "config": config,
            "probe_length": int(tf.reduce_sum(preprocessor(tf.constant([probe]))["padding_mask"]))}


def test_fit_writes_scalars_histograms_and_attention_images(run):
    assert run["history"]["steps"] == STEPS
    events = _events(run["log_dir"])
    steps = list(range(1, STEPS + 1))
    scalars = {tag for tag, (plugin, _) in events.items() if plugin == "scalars"}
    assert scalars == {f"train/{name}" for name in run["history"] if name != "steps"} | {"train/learning_rate"}
    assert {"train/loss", "train/accuracy"} <= scalars
    for tag in scalars:
        assert [s for s, _ in events[tag][1]] == steps, tag
    np.testing.assert_allclose([float(v) for _, v in events["train/loss"][1]], run["history"]["loss"], rtol=1e-6)
    # One histogram per trainable weight, tagged with its path, at every step.
    variables = run["model"].trainable_variables
    histograms = {tag for tag, (plugin, _) in events.items() if plugin == "histograms"}
    assert histograms == {v.path for v in variables} and len(histograms) == len(variables)
    embedding = run["model"].backbone.token_embedding.embeddings
    (_, first), *_, (last_step, last) = events[embedding.path][1]
    assert last_step == STEPS and last.shape[1] == 3  # (buckets, [left edge, right edge, count])
    assert last[:, 2].sum() == np.prod(embedding.shape)
    assert last[0, 0] == pytest.approx(float(np.min(embedding.numpy())))

    # Attention images under fit: every 2 steps and at the end; or only at the end.
    layers = len(run["model"].backbone.transformer_layers)
    for directory, expected_steps in ((os.path.join(run["log_dir"], "attention"), [2, 3]),
                                      (os.path.join(run["log_dir"], "end", "attention"), [3])):
        images = _events(directory)
        assert sorted(images) == [f"attention/layer_{i}" for i in range(layers)]
        for plugin, values in images.values():
            assert plugin == "images" and [s for s, _ in values] == expected_steps
            width, height = (int(v) for v in values[0][1][:2])  # PNG-encoded image summaries
            heads = run["model"].backbone.transformer_layers[0].num_heads
            assert (width, height) == (heads * (4 * run["probe_length"] + 1), 4 * run["probe_length"])


def test_profile_steps_write_a_profiler_trace(run, tmp_path):
    traces = glob.glob(os.path.join(run["log_dir"], "plugins", "profile", "*", "*.xplane.pb"))
    assert len(traces) == 1 and os.path.getsize(traces[0]) > 0
    model = families.model("bert_classifier")
    dataset = families.batches("bert_classifier")
    with pytest.raises(ValueError, match="`profile_steps` needs `log_dir`"):
        training.fit(model, dataset, 2, profile_steps=(1, 2), verbose=0)
    with pytest.raises(ValueError, match="`histogram_every` needs `log_dir`"):
        training.fit(model, dataset, 2, histogram_every=1, verbose=0)
    for bad in ((0, 1), (3, 2), (1,), 5, "12", (1.5, 2)):
        with pytest.raises(ValueError, match="profile_steps"):
            training.fit(model, dataset, 2, log_dir=str(tmp_path), profile_steps=bad, verbose=0)


def test_embedding_projector_files(run):
    log_dir = run["log_dir"]
    assert run["config"] == os.path.join(log_dir, "projector_config.pbtxt")
    with open(os.path.join(log_dir, "metadata.tsv"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    assert lines[-1] == "" and lines[:-1] == ESCAPED  # one token per line, no header
    from google.protobuf import text_format
    from tensorboard.plugins import projector

    with open(run["config"], encoding="utf-8") as f:
        config = text_format.Parse(f.read(), projector.ProjectorConfig())
    (embedding,) = config.embeddings
    assert embedding.tensor_name == "token_embedding/.ATTRIBUTES/VARIABLE_VALUE"
    assert embedding.metadata_path == "metadata.tsv"
    assert list(embedding.tensor_shape) == [families.VOCABULARY, 16]
    reader = tf.train.load_checkpoint(config.model_checkpoint_path)
    np.testing.assert_array_equal(reader.get_tensor(embedding.tensor_name),
                                  run["model"].backbone.token_embedding.embeddings.numpy())
    # Written beside fit's checkpoints without touching their `checkpoint` index file.
    assert not os.path.exists(os.path.join(log_dir, "checkpoint"))

    with pytest.raises(ValueError, match="49 tokens but `embeddings` has 50 rows"):
        training.write_embedding_projector(log_dir, run["model"].backbone.token_embedding, LABELS[:-1])
    with pytest.raises(ValueError, match="matrix"):
        training.write_embedding_projector(log_dir, np.zeros(3), ["a", "b", "c"])
    with pytest.raises(ValueError, match="name"):
        training.write_embedding_projector(log_dir, np.zeros((1, 2)), ["a"], name="a/b")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port, route, **query):
    url = f"http://127.0.0.1:{port}{route}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
    with urllib.request.urlopen(url, timeout=10) as response:
        body = response.read()
    return json.loads(body) if response.headers.get_content_type() == "application/json" else body


def test_tensorboard_serves_the_run(run, tmp_path):
    port = _free_port()
    script = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    command = [script] if os.path.exists(script) else [sys.executable, "-m", "tensorboard.main"]
    # --load_fast=false: one Python process (no data-server child) to stop by PID.
    command += ["--logdir", run["log_dir"], "--host", "127.0.0.1", "--port", str(port), "--load_fast=false"]
    log = open(tmp_path / "tensorboard.log", "w")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        expected = {
            "/data/plugin/scalars/tags": {".": {"train/loss", "train/learning_rate"}},
            "/data/plugin/images/tags": {"attention": {"attention/layer_0"},
                                         "end/attention": {"attention/layer_0"}},
            "/data/plugin/histograms/tags": {".": {run["model"].backbone.token_embedding.embeddings.path}},
        }
        found = {}
        for _ in range(120):  # polls half a second apart
            if found and all(set(tags) <= set(found[route].get(r, ())) for route, runs in expected.items()
                             for r, tags in runs.items()):
                break
            assert server.poll() is None, f"tensorboard exited:\n{(tmp_path / 'tensorboard.log').read_text()}"
            try:
                found = {route: _get(port, route) for route in expected}
                found["/data/runs"] = _get(port, "/data/runs")
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass  # not listening yet
            time.sleep(0.5)
        assert found and all(set(tags) <= set(found[route].get(r, ())) for route, runs in expected.items()
                             for r, tags in runs.items()), f"tensorboard never listed the run's tags: {found}"
        assert {".", "attention", "end/attention"} <= set(found["/data/runs"])
        assert {"train/loss", "train/accuracy", "train/learning_rate"} <= set(
            found["/data/plugin/scalars/tags"]["."])
        assert set(found["/data/plugin/images/tags"]["attention"]) == {"attention/layer_0"}
        losses = _get(port, "/data/plugin/scalars/scalars", run=".", tag="train/loss")
        assert [step for _, step, _ in losses] == list(range(1, STEPS + 1))
        # The projector: the run, its tensor and the vocabulary as metadata.
        assert _get(port, "/data/plugin/projector/runs") == ["."]
        info = _get(port, "/data/plugin/projector/info", run=".")
        (embedding,) = info["embeddings"]
        assert embedding["tensorName"] == "token_embedding/.ATTRIBUTES/VARIABLE_VALUE"
        assert embedding["tensorShape"] == [families.VOCABULARY, 16]
        metadata = _get(port, "/data/plugin/projector/metadata", run=".", name=embedding["tensorName"])
        assert metadata.decode("utf-8").split("\n")[:-1] == ESCAPED
        tensor = _get(port, "/data/plugin/projector/tensor", run=".", name=embedding["tensorName"])
        np.testing.assert_array_equal(np.frombuffer(tensor, "float32").reshape(families.VOCABULARY, 16),
                                      run["model"].backbone.token_embedding.embeddings.numpy())
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=15)
        log.close()
    # Stopped by the test's SIGTERM within the 15 s: TensorBoard's handler says so and exits 0
    # (a kill after the timeout gives -9, a crash another code), and the port is free again.
    output = (tmp_path / "tensorboard.log").read_text()
    assert server.returncode == 0 and "TensorBoard caught SIGTERM; exiting" in output, (server.returncode, output)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_logged_learning_rate_is_the_one_each_step_used(tmp_path):
    # Loss = w, so plain SGD lowers w by exactly the step's learning rate.
    w = keras.Input((1,))
    model = keras.Sequential([w, keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros")])
    schedule = keras.optimizers.schedules.PiecewiseConstantDecay([0, 1], [0.5, 0.25, 0.125])
    model.compile(optimizer=keras.optimizers.SGD(schedule), loss=lambda y, p: tf.reduce_mean(p))
    kernels = []

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            kernels.append(float(model.layers[0].kernel.numpy()[0, 0]))

    batches = tf.data.Dataset.from_tensors((tf.ones((1, 1)), tf.zeros((1, 1)))).repeat()
    training.fit(model, batches, 3, log_dir=str(tmp_path), log_every=1, callbacks=[Record()], verbose=0)
    used = -np.diff([0.0] + kernels)
    np.testing.assert_allclose(used, [0.5, 0.25, 0.125])
    logged = [float(v) for _, v in _events(str(tmp_path))["train/learning_rate"][1]]
    np.testing.assert_allclose(logged, used)
