"""The driver and runtime calls that load a GPU module (a cubin, fatbin or code object).

Two analyzers read them: warm-up counts them as compile-and-load time, and host-to-device
copies leave the part of a copy's record that overlaps one out of the link's time (the
load holds the context while it uploads the code). One list keeps the two in step.
"""

from __future__ import annotations

# SQL predicate over an ``api_calls`` row's ``name``: lazy loading at a kernel's first
# launch (cuLibraryLoadData, CUDA 12's default) and explicit loads on CUDA and ROCm.
MODULE_LOAD_API = (
    "(name LIKE 'cuLibraryLoad%' OR name LIKE 'cudaLibraryLoad%'"
    " OR name LIKE 'cuModuleLoad%' OR name LIKE 'hipModuleLoad%')"
)
