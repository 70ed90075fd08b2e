"""Fixtures shared by the deploy tests."""

import os

import pytest

from tests.deploy.adb_board import write_adb_board


@pytest.fixture
def adb_board(tmp_path, monkeypatch):
    """A board file for the stand-in adb, which is first on PATH during the test."""
    board, bin_dir = write_adb_board(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return board
