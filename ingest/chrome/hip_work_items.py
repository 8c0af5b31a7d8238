"""Grid sizes of HIP module launches, from work-items to workgroups.

For kernels launched with ``hipExtModuleLaunchKernel`` (hipBLASLt/Tensile GEMMs among
them) the ROCm tracer records the launch's *global work size*, in work-items, where every
other launch records the grid in workgroups (blocks). The canonical ``kernels.grid_*``
columns are in blocks, so those grids are divided by the workgroup size: a Tensile GEMM
recorded as grid 73728 x 1 x 1 with 256-thread workgroups is 288 workgroups.

Only grids that are an exact multiple of the workgroup size in every dimension are
converted (a global work size always is); anything else is left as recorded.
"""

from __future__ import annotations

import duckdb

from ingest.schema import sql_list

# The runtime calls whose grid argument is the global work size, in work-items.
WORK_ITEM_LAUNCHES = ("hipExtModuleLaunchKernel",)

_CONVERT = """
UPDATE kernels AS k
SET grid_x = k.grid_x // k.block_x, grid_y = k.grid_y // k.block_y,
    grid_z = k.grid_z // k.block_z
FROM (SELECT DISTINCT correlation_id FROM api_calls
      WHERE name IN ({names}) AND correlation_id IS NOT NULL) AS a
WHERE k.correlation_id = a.correlation_id
  AND k.block_x > 0 AND k.block_y > 0 AND k.block_z > 0
  AND k.grid_x % k.block_x = 0 AND k.grid_y % k.block_y = 0 AND k.grid_z % k.block_z = 0
"""


def grids_in_workgroups(con: duckdb.DuckDBPyConnection) -> None:
    """Rewrite the work-item grids of ``WORK_ITEM_LAUNCHES`` kernels as workgroup counts."""
    names = sql_list(WORK_ITEM_LAUNCHES)
    con.execute(_CONVERT.format(names=names))
