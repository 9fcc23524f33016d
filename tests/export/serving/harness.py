"""Builds `tfnlp_serve.cc` against the `tensorflow` wheel and talks to it.

`tfnlp_serve` loads SavedModels with TensorFlow's C++ `LoadSavedModel`, the
loader TF Serving runs, and answers TF Serving's `PredictRequest`s (see the
comment at the top of the C++ file for the protocol). It is built once per
TensorFlow version, compiler flags and source (cached under `build/`; test
processes running at once wait for one build). A machine without a C++
compiler gets an error that says so, never a skipped test.

    server = CppServer()
    server.load(path)
    outputs = server.call(path, "serving_default", text=["some text"])  # {name: np.ndarray}

Like the stock `tensorflow_model_server`, the harness disables XLA unless
asked (`CppServer(xla=True)` passes `--xla_cpu_compilation_enabled`).
"""

import fcntl
import hashlib
import os
import select
import shutil
import struct
import subprocess
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "tfnlp_serve.cc")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
CACHE = os.path.join(ROOT, "build", "serving-harness")


class HarnessError(AssertionError):
    """The harness could not be built or started, or a request to it failed."""


def _compiler():
    compiler = os.environ.get("CXX", "g++")
    if shutil.which(compiler) is None:
        raise HarnessError(
            f"The C++ serving harness (tests/export/serving/tfnlp_serve.cc) needs a C++ compiler, "
            f"and `{compiler}` is not on PATH. Install one (`apt-get install g++`; `make install` "
            f"does this where apt-get is available) or point CXX at one."
        )
    return compiler


def _flags(output):
    import tensorflow as tf

    library_dir = os.path.dirname(tf.__file__)
    return [
        "-O2", "-w", *tf.sysconfig.get_compile_flags(), SOURCE, "-o", output, f"-L{library_dir}",
        # Really load libtensorflow_cc (it registers the session factory that
        # LoadSavedModel needs; as-needed linking would drop it).
        "-Wl,--no-as-needed", "-l:libtensorflow_cc.so.2", "-l:libtensorflow_framework.so.2",
        f"-Wl,-rpath,{library_dir}", "-ldl",
    ]


def build_command(output):
    """The compiler command line that builds the harness at `output`."""
    return [_compiler(), *_flags(output)]


_build_failure = None  # a failed build is not retried by every test of this process


def binary():
    """The harness executable, built now if this TensorFlow, source and flags have none yet."""
    import tensorflow as tf

    global _build_failure
    if _build_failure is not None:
        raise HarnessError(_build_failure)
    with open(SOURCE, "rb") as f:
        source = f.read()
    key = hashlib.sha256(source + " ".join(_flags("OUT")).encode()).hexdigest()[:16]
    path = os.path.join(CACHE, f"tfnlp_serve-tf{tf.__version__}-{key}")
    if os.path.exists(path):
        return path
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test process may be building it
        if not os.path.exists(path):
            partial = path + ".partial"
            try:
                built = subprocess.run(build_command(partial), capture_output=True, text=True,
                                       timeout=900)
                failure = None if built.returncode == 0 else built.stderr[-5000:]
            except subprocess.TimeoutExpired:
                failure = "the compiler ran for more than 900 s"
            except HarnessError as error:
                failure = str(error)
            if failure is not None:
                _build_failure = f"building the serving harness failed:\n{failure}"
                raise HarnessError(_build_failure)
            os.replace(partial, path)
    return path


def op_library_dirs():
    """Where tensorflow-text keeps its op libraries (the stock TF Serving links them in)."""
    import tensorflow_text

    return [os.path.join(os.path.dirname(tensorflow_text.__file__), "python", "ops")]


def rss_bytes(pid="self"):
    """The resident memory of process `pid` (0 where /proc cannot tell)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tensor_proto(values):
    """A `TensorProto` of strings: a list of `str`/`bytes` is a batch `(B,)`; an array keeps its shape."""
    import tensorflow as tf

    if not isinstance(values, np.ndarray):
        values = np.array([v.encode("utf-8") if isinstance(v, str) else v for v in values] or [],
                          dtype=object).reshape(len(values))
    return tf.make_tensor_proto(values, dtype=tf.string if values.dtype == object else None)


def predict_request(path, signature, inputs, output_filter=()):
    """A serialized `PredictRequest` for the model loaded from `path`."""
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = os.path.abspath(path)
    request.model_spec.signature_name = signature
    for name, values in inputs.items():
        request.inputs[name].CopyFrom(tensor_proto(values))
    request.output_filter.extend(output_filter)
    return request.SerializeToString()


def decode_utf8(values):
    """An array of `bytes` as `str`; raises on bytes that are not UTF-8 (outputs must be valid)."""
    return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(values)


def response_outputs(payload):
    """`{name: np.ndarray}` of a serialized `PredictResponse`; strings decoded (strict UTF-8)."""
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    outputs = {}
    for name, proto in predict_pb2.PredictResponse.FromString(payload).outputs.items():
        value = tf.make_ndarray(proto)
        outputs[name] = decode_utf8(value) if value.dtype == object else value
    return outputs


class PipeReader:
    """Reads a child process's stdout against a deadline; a child that hangs or dies fails loudly.

    `log` is the file its stderr goes to: its end is shown in the error.
    """

    def __init__(self, process, log, name):
        self.process, self.log, self.name = process, log, name
        self._buffer = b""

    def _fill(self, deadline):
        left = deadline - time.monotonic()
        ready, _, _ = select.select([self.process.stdout], [], [], max(left, 0))
        chunk = os.read(self.process.stdout.fileno(), 1 << 20) if ready else None
        if not chunk:
            self.process.kill()  # hung or dead: free its memory now
            self.log.seek(0)
            reason = "timed out" if chunk is None else f"died ({self.process.wait()})"
            raise HarnessError(f"{self.name} {reason}:\n{self.log.read()[-3000:].decode(errors='replace')}")
        self._buffer += chunk

    def exactly(self, size, deadline):
        """The next `size` bytes."""
        while len(self._buffer) < size:
            self._fill(deadline)
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def line(self, deadline):
        """The next line, without its newline."""
        while b"\n" not in self._buffer:
            self._fill(deadline)
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line


class CppServer:
    """One `tfnlp_serve` process; every method sends one command and waits for its reply.

    `xla`: allow XLA compilation, as `tensorflow_model_server
    --xla_cpu_compilation_enabled=true` does (off by default there too).
    """

    def __init__(self, timeout=300, xla=False):
        command = [binary()]
        for directory in op_library_dirs():
            command += ["--ops-dir", directory]
        if xla:
            command.append("--xla_cpu_compilation_enabled")
        self._log = tempfile.TemporaryFile()  # TensorFlow's stderr, shown on failure
        environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")}
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self._log, env=environment)
        self._reader = PipeReader(self._process, self._log, "the C++ serving harness")
        self._timeout = timeout

    def alive(self):
        return self._process.poll() is None

    def rss_bytes(self):
        return rss_bytes(self._process.pid)

    def command(self, code, payload, timeout=None, expect_error=False):
        """Sends command `code` (one byte); returns (microseconds, payload) of its reply.

        A failed command raises `HarnessError` with the server's message,
        unless `expect_error`: its message is then returned in place of the
        payload (and a command that did not fail raises).
        """
        self._process.stdin.write(code + struct.pack("<I", len(payload)) + payload)
        self._process.stdin.flush()
        deadline = time.monotonic() + (timeout or self._timeout)
        header = self._reader.exactly(13, deadline)
        status, micros, size = header[:1], *struct.unpack("<QI", header[1:])
        body = self._reader.exactly(size, deadline)
        if status not in (b"0", b"E"):
            raise HarnessError(f"the C++ serving harness replied with status byte {status!r}")
        if (status == b"E") != expect_error:
            if expect_error:
                raise HarnessError(f"command {code!r} was expected to fail and did not")
            raise HarnessError(f"command {code!r} {payload[:200]!r} failed: {body.decode(errors='replace')}")
        return micros, body.decode(errors="replace") if expect_error else body

    def load(self, path):
        """Loads the SavedModel at `path`; returns the seconds `LoadSavedModel` took."""
        return self.command(b"L", os.path.abspath(path).encode())[0] / 1e6

    def forget(self, path):
        self.command(b"U", os.path.abspath(path).encode())

    def call(self, path, signature, expect_error=False, timeout=None, output_filter=(), **inputs):
        """Runs `signature` on `inputs` (`{name: list of str/bytes, or an array}`).

        Returns `{output: np.ndarray}`, or with `expect_error` the error message.
        """
        _, payload = self.command(b"P", predict_request(path, signature, inputs, output_filter),
                                  timeout=timeout, expect_error=expect_error)
        return payload if expect_error else response_outputs(payload)

    def timed_call(self, path, signature, **inputs):
        """(seconds `Session::Run` took, outputs) of one request."""
        micros, payload = self.command(b"P", predict_request(path, signature, inputs))
        return micros / 1e6, response_outputs(payload)

    def repeat(self, path, signature, repeats, **inputs):
        """Runs one request `repeats` times back to back; the seconds of each `Session::Run`."""
        _, payload = self.command(b"B", struct.pack("<I", repeats) + predict_request(path, signature, inputs))
        return [m / 1e6 for m in struct.unpack(f"<{repeats}Q", payload)]

    def warmup(self, path, expect_error=False):
        """Replays `path`'s warm-up file as TF Serving does; [(signature, seconds)] per record.

        With `expect_error`, the error message of a replay that must fail.
        """
        _, payload = self.command(b"W", os.path.abspath(path).encode(), expect_error=expect_error)
        if expect_error:
            return payload
        rows = [line.split() for line in payload.decode().splitlines()]
        return [(name, int(micros) / 1e6) for name, micros in rows]

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def close(self):
        try:
            self._process.stdin.close()
            self._process.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            self._process.kill()
            self._log.close()
