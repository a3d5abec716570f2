"""torch.utils' counterparts: ``arrayad.utils.checkpoint``."""
