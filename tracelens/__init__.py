"""tracelens: where the GPU time went, and what to change."""

__version__ = "0.1.0"
