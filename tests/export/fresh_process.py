"""Calls SavedModels' signatures in a process of its own that never imports tfnlp.

Two backends, each one process per test process serving every SavedModel its
tests ask for (so the tests pay TensorFlow's start-up once, not per call):

- "python": `tf.saved_model.load` in a Python process that imports only
  TensorFlow and tensorflow-text (how a Python user loads an export);
- "cpp": TensorFlow's C++ `LoadSavedModel` in `tests/export/serving/`, the
  loader TF Serving runs, fed `PredictRequest`s as TF Serving feeds them.
"""

import atexit
import json
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

_SERVER = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # registers the ops; tfnlp itself is never imported
    assert "tfnlp" not in sys.modules
    models = {}
    print("@@ready", flush=True)
    for line in sys.stdin:
        call = json.loads(line)
        try:
            if call["op"] == "load":
                models[call["path"]] = tf.saved_model.load(call["path"])
                reply = {"loaded": call["path"]}
            elif call["op"] == "forget":
                reply = {"forgot": models.pop(call["path"], None) is not None}
            else:
                inputs = {k: tf.constant([t.encode("latin-1") for t in v], tf.string)
                          if isinstance(v, list) else tf.constant(v["values"], v["dtype"])
                          for k, v in call["inputs"].items()}
                outputs = models[call["path"]].signatures[call["signature"]](**inputs)
                reply = {"outputs": {k: {"shape": v.shape.as_list(), "dtype": v.dtype.name,
                                         "values": v.numpy().tolist()} for k, v in outputs.items()}}
        except Exception as error:  # reported to the test, which fails on it
            reply = {"error": f"{type(error).__name__}: {error}"[-3000:]}
        print("@@" + json.dumps(reply, default=lambda b: b.decode("utf-8", "replace")), flush=True)
    """
)


def as_bytes(text):
    """Carries raw bytes (valid UTF-8 or not) through JSON as latin-1 code points."""
    if isinstance(text, bytes):
        return text.decode("latin-1")
    return text.encode("utf-8").decode("latin-1")


class _Server:
    """The serving process: JSON requests on its stdin, `@@`-prefixed JSON replies on its stdout."""

    def __init__(self):
        from tests.export.serving.harness import PipeReader

        self._log = tempfile.TemporaryFile()  # TensorFlow's stderr, shown on failure
        self._process = subprocess.Popen([sys.executable, "-c", _SERVER], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self._log)
        self._reader = PipeReader(self._process, self._log, "the serving process")
        if self._read_reply(timeout=300) != "ready":
            raise AssertionError("the serving process did not start")

    def alive(self):
        return self._process.poll() is None

    def rss_bytes(self):
        from tests.export.serving.harness import rss_bytes

        return rss_bytes(self._process.pid)

    def request(self, timeout, **request):
        """Sends one request; returns its reply (a dict), failing the test on an error."""
        self._process.stdin.write((json.dumps(request) + "\n").encode())
        self._process.stdin.flush()
        reply = json.loads(self._read_reply(timeout))
        assert "error" not in reply, f"{request!r:.300} raised {reply.get('error')}"
        return reply

    def _read_reply(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            line = self._reader.line(deadline)
            if line.startswith(b"@@"):
                return line[2:].decode()
            # anything else a library printed

    def close(self):
        try:
            self._process.stdin.close()
            self._process.wait(timeout=60)
        finally:
            self._process.kill()
            self._log.close()


BACKENDS = ("python", "cpp")

_servers = {}


def _shared_server(backend):
    """This test process's server of `backend`, started (again, should it have died) on demand."""
    server = _servers.get(backend)
    if server is None or not server.alive():
        if backend == "python":
            server = _Server()
        elif backend == "cpp":
            from tests.export.serving.harness import CppServer

            server = CppServer()
        else:
            raise ValueError(f"unknown backend {backend!r}")
        _servers[backend] = server
    return server


@atexit.register
def _close_servers():
    for server in _servers.values():
        server.close()


def recycle_servers(max_rss_bytes):
    """Closes the servers holding more than `max_rss_bytes` of memory (restarted on demand).

    A serving process keeps every function library it ever loaded, even after
    `forget`; tests/conftest.py calls this between test files so that a long
    test session does not run out of memory. Returns the bytes the servers
    left running hold.
    """
    kept = 0
    for backend, server in list(_servers.items()):
        rss = server.rss_bytes() if server.alive() else None
        if rss is None or rss > max_rss_bytes:
            server.close()
            del _servers[backend]
        else:
            kept += rss
    return kept


class ServingProcess:
    """A SavedModel loaded once in a serving process (no tfnlp), called over pipes.

    Use it as a context manager (`with ServingProcess(path) as process:`);
    leaving it unloads the model. `process(signature, **inputs)` sends one
    request (each input a list of `str` or `bytes`, any bytes at all) and
    returns `{output: np.ndarray}` with the served shapes (strings decoded
    from UTF-8; a numeric input is a NumPy array of the signature's dtype); a signature that raises, a process that dies, or a call that
    takes longer than `timeout` seconds fails the test. `backend` is "python"
    (`tf.saved_model.load`) or "cpp" (the C++ loader of TF Serving).
    """

    def __init__(self, path, timeout=120, backend="python"):
        self.path, self.timeout, self.backend = str(path), timeout, backend
        self._server = _shared_server(backend)
        if backend == "python":
            self._server.request(300, op="load", path=self.path)
        else:
            self._server.load(self.path)

    def __call__(self, signature, **inputs):
        if self.backend == "cpp":
            return self._server.call(self.path, signature, timeout=self.timeout, **inputs)
        reply = self._server.request(self.timeout, op="call", path=self.path, signature=signature,
                                     inputs={k: _input(v) for k, v in inputs.items()})
        return {name: _array(output) for name, output in reply["outputs"].items()}

    def alive(self):
        """Whether the serving process that holds the model is still running."""
        return self._server.alive()

    def refused(self, signature, **inputs):
        """The error message of a request that must fail (the C++ server only)."""
        if self.backend != "cpp":
            raise ValueError("`refused` needs backend='cpp'")
        return self._server.call(self.path, signature, expect_error=True, timeout=self.timeout, **inputs)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def close(self):
        if not self.alive():
            return
        if self.backend == "python":
            self._server.request(60, op="forget", path=self.path)
        else:
            self._server.forget(self.path)


def serve(path, calls, backend="python"):
    """Runs `calls` = [{"signature": name, "inputs": {arg: [str or bytes]}}] on the SavedModel at `path`.

    Returns one `{output: nested lists}` per call (strings decoded from UTF-8).
    """
    with ServingProcess(path, timeout=300, backend=backend) as process:
        return requests(process, calls)


def requests(process, calls):
    """`serve`'s calls on a `ServingProcess` that is already loaded (one a module shares)."""
    return [{k: v.tolist() for k, v in process(c["signature"], **c["inputs"]).items()} for c in calls]


class ServingProcesses:
    """`ServingProcess`es opened on demand and kept loaded until `close`: a module fixture.

    `processes(path, backend)` loads the SavedModel at `path` in `backend`'s
    server the first time it is asked for and returns the same process after;
    loading (and the first run of each signature) is what a test that only
    sends requests need not pay again.
    """

    def __init__(self, timeout=300):
        self.timeout, self._open = timeout, {}

    def __call__(self, path, backend="python"):
        key = (str(path), backend)
        if key not in self._open or not self._open[key].alive():
            self._open[key] = ServingProcess(path, timeout=self.timeout, backend=backend)
        return self._open[key]

    def close(self):
        for process in self._open.values():
            process.close()
        self._open.clear()


def _input(values):
    """A request input for JSON: texts as latin-1 code points, a NumPy array with its dtype."""
    if isinstance(values, np.ndarray) and values.dtype != object:
        return {"values": values.tolist(), "dtype": values.dtype.name}
    return [as_bytes(t) for t in values]


def _array(output):
    if output["dtype"] == "string":
        values = np.array(output["values"], dtype=object)
    else:
        values = np.array(output["values"], dtype=output["dtype"])
    return values.reshape(output["shape"])


# Texts no user should be able to break a server with: empty and blank, control
# characters and NUL, right-to-left and combining marks, emoji, CJK, Arabic,
# invalid UTF-8 (lone continuation and lead bytes, overlong forms, surrogates
# encoded), the tokenizer's own special tokens, and 1 MB texts.
HOSTILE_TEXTS = (
    "", " ", "\t\n\r \u3000\u00a0", "\x00", "a\x00b\x07\x1b[31m", "\u202eright-to-left\u202c",
    "e\u0301\u0301\u0301 \u0327", "\U0001F600\U0001F44D\U0001F3FD \u2764\ufe0f", "中文字符很长",
    "مرحبا بالعالم", "[CLS] [SEP] [PAD] [MASK] [UNK] <S> </S>", b"\xff\xfe", b"\xc3", b"\x80abc",
    b"\xc0\xaf", b"\xed\xa0\x80", "x" * 1_000_000, "word " * 200_000, "中" * 350_000,
    b"\xff" * 1_000_000, "[MASK] " * 150_000,
)


def text_strategy():
    """Any text: arbitrary Unicode, arbitrary bytes, or one of `HOSTILE_TEXTS`."""
    from hypothesis import strategies as st

    return st.one_of(st.sampled_from(HOSTILE_TEXTS), st.text(max_size=60), st.binary(max_size=60))


def check_any_batch_is_served(process, signature, names, check, max_examples=25):
    """Property: every batch (0-4 rows of any texts, one per input in `names`) is served.

    Each output's first dimension is the batch size, every float output is
    finite, and `check(outputs, batch_size)` holds (the signature's own
    documented shapes and ranges).
    """
    from hypothesis import HealthCheck, example, given, settings
    from hypothesis import strategies as st

    width = len(names)
    rows = st.lists(st.tuples(*[text_strategy()] * width), max_size=4)
    # Always tried as well: the empty batch, an all-empty row, and (pairs)
    # either side empty next to a 1 MB other side.
    always = [[], [("",) * width], [("x" * 1_000_000,) + ("",) * (width - 1)]]
    if width == 2:
        always.append([("", "only the second"), ("only the first", ""), ("", "x" * 1_000_000)])

    @settings(max_examples=max_examples, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(rows=rows)
    def served(rows):
        outputs = process(signature, **{name: [row[i] for row in rows] for i, name in enumerate(names)})
        for name, value in outputs.items():
            assert value.shape[:1] == (len(rows),), (name, value.shape)
            if value.dtype.kind == "f":
                assert np.isfinite(value).all(), name
        check(outputs, len(rows))

    for batch in always:
        served = example(rows=batch)(served)
    served()
