"""The machine declared as data for `transitions`: its diagrams, invariants and model-based paths.

One declaration (`machine.MACHINE`) lists every phase and move `step` may
take; the diagrams are drawn from it and the tests check `step` against it.
Not on the loop's path: only the command line and the tests import it.
"""
