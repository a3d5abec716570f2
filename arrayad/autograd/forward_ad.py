"""forward_ad (being written)."""
