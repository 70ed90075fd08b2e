"""Detection-head operators (top-k, non-max suppression, ...): type rules and numpy references."""
