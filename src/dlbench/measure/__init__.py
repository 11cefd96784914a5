"""Timing, memory and statistics, independent of any framework."""
