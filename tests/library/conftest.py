import pytest

from tests.library.kernel_lib import HostKernels


@pytest.fixture(scope="session")
def host_kernels(tmp_path_factory):
    """The kernels built with the host cc -O3 -march=native; one thread unless a test says otherwise."""
    kernels = HostKernels(tmp_path_factory.mktemp("gemm"))
    yield kernels
    kernels.set_threads(1)
