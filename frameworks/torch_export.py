"""Being ported to the one adapter interface."""
