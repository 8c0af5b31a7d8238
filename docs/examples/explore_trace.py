# %% [markdown]
# # Exploring a trace from Python
#
# A notebook kept as a script (the `# %%` cells open as a notebook in Jupyter with
# jupytext, and in VS Code): load a trace, look at its kernels by kind, ask it a question
# in SQL, restrict it to its steady state, and plot where the GPU time went.
#
# Run it as `python docs/examples/explore_trace.py [TRACE] [OUTPUT_DIR]`; without a trace
# (or with an empty first argument) it reads the sample bundled with tracelens. The test
# suite runs it.

# %%
from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

import tracelens
from tracelens.cli.analyze import sample_trace_path
from tracelens.core.kernel_kinds import classify

trace_path = Path(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] else sample_trace_path()
out_dir = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(".")
trace = tracelens.load(trace_path)
print(trace)

# %% [markdown]
# ## Kernels by kind
#
# `trace.kernels` is a polars DataFrame of the `kernels` table (docs/api.md lists every
# frame and its dtypes). The kind of a kernel (GEMM, attention, elementwise, ...) comes
# from its name: each distinct name is classified once, then joined back.

# %%
kernels = trace.kernels.with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"))
kinds = (
    kernels.select("name")
    .unique()
    .with_columns(
        pl.col("name")
        .map_elements(lambda name: classify(name).label, return_dtype=pl.String)
        .alias("kind")
    )
)
kernels = kernels.join(kinds, on="name")
by_kind = (
    kernels.group_by("kind")
    .agg(pl.len().alias("kernels"), pl.col("dur_ns").sum().alias("total_ns"))
    .sort("total_ns", descending=True)
)
print(by_kind)

# %% [markdown]
# ## A question in SQL
#
# Which operators launched the most GPU time? `kernel_ops` is a derived table
# (docs/schema.md); `trace.sql` builds it on first use. Parameters are named.

# %%
top_ops = trace.sql(
    """SELECT op_name, count(*) AS kernels, sum(dur_ns) AS gpu_ns
       FROM kernel_ops WHERE op_name IS NOT NULL
       GROUP BY op_name HAVING sum(dur_ns) >= $min_ns ORDER BY gpu_ns DESC LIMIT $n""",
    min_ns=0,
    n=5,
)
print(top_ops)

# %% [markdown]
# ## The steady state
#
# The first steps of a capture carry warm-up. `restrict` analyses only a part of the
# trace, as if it were the whole capture: here the profiler steps after the first two
# (when the trace has steps).

# %%
step_numbers = trace.steps["step_no"].sort().to_list()
steady = trace.restrict(steps=f"{step_numbers[2]}:") if len(step_numbers) > 2 else trace
for finding in steady.findings[:5]:
    print(f"{finding.severity.label:>8}  {finding.impact_ns / 1e6:8.2f} ms  {finding.title}")

# %% [markdown]
# ## A plot
#
# With matplotlib installed: GPU time per kernel kind.

# %%
try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("matplotlib is not installed: no plot")
else:
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.barh(by_kind["kind"].to_list(), (by_kind["total_ns"] / 1e6).to_list())
    ax.set_xlabel("GPU time (ms)")
    ax.invert_yaxis()
    fig.tight_layout()
    plot_path = out_dir / "gpu_time_by_kind.png"
    fig.savefig(plot_path)
    print(f"wrote {plot_path}")

# %%
if steady is not trace:
    steady.close()
trace.close()
