"""Scatter, gather-nd and sampling operators: type rules and numpy references."""
