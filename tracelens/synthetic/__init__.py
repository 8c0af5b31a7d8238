"""Synthetic traces with planted bottlenecks, for tests, benchmarks and demos."""

from tracelens.synthetic.chrome_writer import write_chrome_trace
from tracelens.synthetic.planted import training_steps
from tracelens.synthetic.scenario import Scenario

__all__ = ["Scenario", "training_steps", "write_chrome_trace"]
