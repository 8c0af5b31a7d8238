"""Synthetic traces with planted bottlenecks, for tests, benchmarks and demos."""

from tracelens.testing.chrome_writer import write_chrome_trace
from tracelens.testing.planted import training_steps
from tracelens.testing.scenario import Scenario

__all__ = ["Scenario", "training_steps", "write_chrome_trace"]
