import pytest

from tests.export.fresh_process import ServingProcesses


@pytest.fixture(scope="module")
def processes():
    """Each export a test file asks for, loaded once per backend for the file (`ServingProcesses`):
    loading, and the first run of each signature, cost seconds that the requests do not check."""
    opened = ServingProcesses()
    yield opened
    opened.close()
