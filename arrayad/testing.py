"""Testing helpers (check_grads: being written)."""
