"""Turns as Temporal workflows: `step` in the workflow, the effects as activities."""
