"""Helpers shared by the benchmark scripts: memory, machine, JSON output, Markdown tables.

Every script writes `benchmarks/results/<name>.json` through `write_json`:

    {"machine": machine_info(), "peak_rss_mb": peak_rss_mb(), "rows": rows, ...extra}

`rows` is either one table (a list of flat dicts, one per row) or several
(a dict: table name -> list of flat dicts); `benchmarks/report.py` turns
each table into Markdown and plots every `*speedup*` column.

Nothing here imports TensorFlow at module level, so that `report.py` and the
serving benchmark's fresh process can use it without paying for it.
"""

import datetime
import json
import os
import platform
import resource
import subprocess
import sys

# CPU features that decide which kernels run (oneDNN bfloat16, AMX, VNNI).
_INTERESTING_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile",
                      "avx_vnni", "fma")


def _proc_status_mb(field):
    """`field` (e.g. "VmRSS") of /proc/self/status in MiB, or None off Linux."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return round(int(line.split()[1]) / 1024, 1)  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def peak_rss_mb():
    """Peak resident memory of this process so far, in MiB.

    Linux: `VmHWM` of /proc/self/status. Not `getrusage().ru_maxrss`: a
    process started by `subprocess` inherits its parent's `ru_maxrss` (the
    kernel carries the old memory map's high-water mark over `exec`), so a
    small child of a big parent would report the parent's peak. Elsewhere
    `getrusage` (KiB on Linux, bytes on macOS).
    """
    peak = _proc_status_mb("VmHWM")
    if peak is not None:
        return peak
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def current_rss_mb():
    """Resident memory now, in MiB (Linux `VmRSS`; elsewhere the peak)."""
    current = _proc_status_mb("VmRSS")
    return peak_rss_mb() if current is None else current


def _cpu():
    """(model name, interesting flags) from /proc/cpuinfo, else `platform`."""
    model, flags = None, []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model is None:
                    model = value.strip()
                elif key == "flags" and not flags:
                    present = set(value.split())
                    flags = [flag for flag in _INTERESTING_FLAGS if flag in present]
                if model is not None and flags:
                    break
    except OSError:
        pass
    return model or platform.processor() or platform.machine(), flags


def machine_info(**extra):
    """What a result depends on: CPU, cores, library versions, date.

    TensorFlow and Keras versions are read only when the calling script has
    already imported them (importing TensorFlow takes seconds), else from
    the installed package metadata. `extra` (e.g. `policy=...`) is added.
    """
    model, flags = _cpu()
    info = {
        "cpu": model,
        "cpu_flags": flags,
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "python": platform.python_version(),
    }
    for name, module in (("tensorflow", "tensorflow"), ("tensorflow_text", "tensorflow_text"),
                         ("keras", "keras")):
        info[name] = _version(name, module)
    gpus = _gpus()
    if gpus:
        info["gpus"] = gpus
    info["date"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    info.update(extra)
    return info


def _version(distribution, module):
    loaded = sys.modules.get(module)
    if loaded is not None and getattr(loaded, "__version__", None):
        return loaded.__version__
    try:
        from importlib import metadata

        return metadata.version(distribution.replace("_", "-"))
    except Exception:  # not installed
        return None


def _gpus():
    """Names of the visible GPUs, only if TensorFlow is already imported."""
    tf = sys.modules.get("tensorflow")
    if tf is None:
        return []
    try:
        return [tf.config.experimental.get_device_details(d).get("device_name", d.name)
                for d in tf.config.list_physical_devices("GPU")]
    except Exception:
        return []


def machine_line(machine):
    """One line of text describing a `machine_info()` dict (or an older, smaller one)."""
    if not isinstance(machine, dict):
        return str(machine)
    cores = machine.get("cores", machine.get("cpus"))
    parts = [machine.get("cpu") or machine.get("processor") or "unknown CPU"]
    if cores:
        parts.append(f"{cores} cores")
    if machine.get("cpu_flags"):
        parts.append("/".join(machine["cpu_flags"]))
    if machine.get("gpus"):
        parts.append(", ".join(machine["gpus"]))
    for key, label in (("tensorflow", "TensorFlow"), ("keras", "Keras")):
        if machine.get(key):
            parts.append(f"{label} {machine[key]}")
    for key in ("policy",):
        if machine.get(key):
            parts.append(f"{key} {machine[key]}")
    if machine.get("date"):
        parts.append(machine["date"])
    return ", ".join(str(p) for p in parts)


def markdown_table(header, rows):
    """A Markdown table: `header` a list of column titles, `rows` lists of cells."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write_json(path, rows, **extra):
    """Writes `{"machine", "peak_rss_mb", "rows", **extra}` to `path` (directories made).

    Args:
        path: the JSON file, e.g. `benchmarks/results/machine.json`.
        rows: a list of flat dicts (one table), or a dict of table name ->
            list of flat dicts.
        **extra: more top-level keys (settings, single figures, ...);
            `machine=` overrides `machine_info()`.

    Returns:
        The written dict.
    """
    results = {"machine": extra.pop("machine", None) or machine_info(),
               "peak_rss_mb": peak_rss_mb(), "rows": rows, **extra}
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(path, "w") as f:
        json.dump(results, f, indent=2)
    return results


def fresh_process_arguments(parser):
    """`--json`, and the hidden `--serve/--request/--output` of a script's fresh serving process."""
    import argparse

    parser.add_argument("--json", default=None, help="results (default: results/NAME[_quick].json)")
    parser.add_argument("--serve", default=None, help=argparse.SUPPRESS)  # the fresh process
    parser.add_argument("--request", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--output", default=None, help=argparse.SUPPRESS)


def run_child(script, arguments, what, timeout, **environment):
    """Runs `python SCRIPT ARGUMENTS` in a fresh process and returns its result.

    The process gets TensorFlow's logs quiet, Keras on TensorFlow, the
    repository importable and `environment` on top of this process's
    variables; its last line of stdout must be a JSON object.

    Args:
        script: path of the script (a benchmark's own `__file__`).
        arguments: list of command-line arguments.
        what: what the process runs, for the error message.
        timeout: seconds.
        **environment: more environment variables.

    Returns:
        The JSON object, as a dict.
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND="tensorflow",
               PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]), **environment)
    completed = subprocess.run([sys.executable, os.path.abspath(script), *arguments], env=env, cwd=root,
                               capture_output=True, text=True, check=False, timeout=timeout)
    if completed.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])
