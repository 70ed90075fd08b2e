"""The package's version, the one place it is written (pyproject.toml reads
it; relax_edge re-exports it as __version__; generated headers carry it)."""

__version__ = "0.1.0"
