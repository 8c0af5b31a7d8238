"""The PyTorch profiler (Kineto) Chrome-trace reader: splitter and DuckDB routing."""
