"""The parity tests' oracles (torch, transformers, scikit-learn, ...) cannot go missing in CI
unnoticed: tests/conftest.py turns their `pytest.importorskip` skips into failures when `CI`
is true, `.ci/run` imports them before the suite, and the test extra declares them."""

import configparser
import importlib.metadata
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Run by pytester in this process, with the two hooks of tests/conftest.py alone.
CONFTEST = "from tests.conftest import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401\n"
TESTS = '''
import pytest

def test_missing_oracle():
    pytest.importorskip("tfnlp_no_such_oracle")

@pytest.fixture
def oracle():
    return pytest.importorskip("tfnlp_no_such_oracle.metrics")

def test_missing_oracle_in_a_fixture(oracle):
    pass

def test_too_old_oracle():
    pytest.importorskip("pytest", minversion="1000")

def test_other_skip():
    pytest.skip("Unicode tables of another Python")

@pytest.mark.skipif(True, reason="x86-64 Linux only")
def test_skipif():
    pass

def test_present_oracle():
    assert pytest.importorskip("json").dumps(1) == "1"
'''
MODULE_LEVEL = '''
import pytest

oracle = pytest.importorskip("tfnlp_no_such_oracle")

def test_never_collected():
    pass
'''


@pytest.mark.parametrize("ci", ["true", "1", "", "false", None])
def test_a_missing_oracle_fails_in_ci_and_skips_elsewhere(pytester, monkeypatch, ci):
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_oracles=TESTS, test_module_level=MODULE_LEVEL)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:xdist", "-rA",
                                          "--continue-on-collection-errors")
    if ci in ("true", "1"):
        # The two other skips stay skips; in a fixture or at module level, errors.
        result.assert_outcomes(passed=1, failed=2, skipped=2, errors=2)
        result.stdout.fnmatch_lines(["ERROR test_module_level.py - CI is set*",
                                     "ERROR test_oracles.py::test_missing_oracle_in_a_fixture - CI is set*",
                                     "FAILED test_oracles.py::test_missing_oracle - CI is set*",
                                     "FAILED test_oracles.py::test_too_old_oracle - CI is set*"])
        output = result.stdout.str()
        for module in ("'tfnlp_no_such_oracle'", "'tfnlp_no_such_oracle.metrics'", "'pytest'"):
            assert f"pytest.importorskip({module}) fails instead of skipping" in output, module
        assert "required is: '1000'" in output and "pip install -e '.[test]'" in output
    else:
        result.assert_outcomes(passed=1, skipped=6)  # 3 tests and a module by importorskip, 2 others
        assert "CI is set" not in result.stdout.str()


def _requirements(lines):
    """Canonical distribution names of setup.cfg requirement lines."""
    names = (re.match(r"[A-Za-z0-9._-]+", line.strip()) for line in lines.splitlines() if line.strip())
    return {re.sub(r"[-_.]+", "-", name.group()).lower() for name in names}


def test_every_oracle_is_imported_by_ci_and_declared_in_the_test_extra():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    dependencies = _requirements(config["options"]["install_requires"])
    extra = _requirements(config["options.extras_require"]["test"])
    (line,) = re.findall(r'-c "import ([\w, ]+)"', (ROOT / ".ci" / "run").read_text())
    imported_by_ci = set(line.split(", "))
    skipped = {
        name.split(".")[0]
        for path in (ROOT / "tests").rglob("*.py")
        for name in re.findall(r'importorskip\("([\w.]+)"', path.read_text(encoding="utf-8"))
    } - {"tfnlp_no_such_oracle", "pytest", "json"}  # this file's
    distributions = importlib.metadata.packages_distributions()
    assert {"sklearn", "torch", "transformers", "yaml"} <= skipped
    for module in sorted(skipped | imported_by_ci):
        pytest.importorskip(module)
        declared = {re.sub(r"[-_.]+", "-", d).lower() for d in distributions[module]}
        if declared & dependencies:
            continue  # a dependency of tfnlp itself (tensorflow)
        assert declared & extra, f"{module} ({distributions[module]}) is not in setup.cfg's test extra"
        assert module in imported_by_ci, f".ci/run does not import the oracle {module}"
