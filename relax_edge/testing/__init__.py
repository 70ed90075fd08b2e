"""Test helpers shipped with the package: the compiler fuzzer's random graphs (graphs.py),
their generator (generate.py) and the differential check and reducer (differential.py)."""
