"""Scatter, gather-nd and sampling operators as tensor programs."""
