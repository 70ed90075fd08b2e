"""Detection-head operators as tensor programs."""
