"""Calls a SavedModel's signatures in a new Python process without tfnlp."""

import json
import subprocess
import sys
import textwrap

_LOADER = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # registers the ops; tfnlp itself is never imported
    assert "tfnlp" not in sys.modules
    model = tf.saved_model.load(sys.argv[1])
    results = []
    for call in json.load(open(sys.argv[2])):
        inputs = {k: tf.constant([t.encode("latin-1") for t in v], tf.string)
                  for k, v in call["inputs"].items()}
        outputs = model.signatures[call["signature"]](**inputs)
        results.append({k: v.numpy().tolist() for k, v in outputs.items()})
    print(json.dumps(results, default=lambda b: b.decode("utf-8", "replace")))
    """
)


def as_bytes(text):
    """Carries raw bytes (valid UTF-8 or not) through JSON as latin-1 code points."""
    if isinstance(text, bytes):
        return text.decode("latin-1")
    return text.encode("utf-8").decode("latin-1")


def serve(path, calls, tmp_path):
    """Runs `calls` = [{"signature": name, "inputs": {arg: [str or bytes]}}] on `path`."""
    calls = [
        {"signature": c["signature"], "inputs": {k: [as_bytes(t) for t in v] for k, v in c["inputs"].items()}}
        for c in calls
    ]
    request = tmp_path / "calls.json"
    request.write_text(json.dumps(calls))
    result = subprocess.run([sys.executable, "-c", _LOADER, path, str(request)],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])
