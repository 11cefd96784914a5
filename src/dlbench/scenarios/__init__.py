"""Scenarios: the protocol that drives a framework backend through one cell."""
