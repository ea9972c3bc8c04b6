"""Analyses that put optcoll's ground truth next to the analytical models other tools use."""
