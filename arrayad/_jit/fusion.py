"""Elementwise fusion (NOTE [fusion])."""


def lower_program(prog):
    return None
