"""Programs that record real, annotated traces (need the ``workloads`` extra: torch, nvtx).

``python -m tracelens.workloads.serve`` serves requests with a tiny transformer;
``python -m tracelens.workloads.train_starved`` trains with a data loader that starves the
device. Nothing outside this package imports it, so analyzing a trace never imports torch.
"""
