"""Parent and depth of nested intervals (operators, annotation ranges) on one thread.

Depth is the number of open intervals when one starts (a running sum over start/end
events, ends first at equal times), and the parent is the latest interval one level up
that started no later: an ASOF join, so this stays linear-ish on millions of rows.
"""

from __future__ import annotations

import duckdb


def assign_nesting(
    con: duckdb.DuckDBPyConnection, table: str, id_col: str, key_cols: list[str]
) -> None:
    keys = ", ".join(key_cols)
    key_match = " AND ".join(f"c.{k} = p.{k}" for k in key_cols)
    # NULL keys (host ranges have no device) must still match each other in the join.
    key_select = ", ".join(f"coalesce(t.{k}, -9) AS {k}" for k in key_cols)
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _depth AS
        WITH ev AS (
            SELECT {id_col} AS id, {keys}, start_ns AS t, 1 AS d, -end_ns AS k1, {id_col} AS k2
            FROM {table}
            UNION ALL
            SELECT {id_col}, {keys}, end_ns, -1, -start_ns, -{id_col} FROM {table}
        ),
        run AS (
            SELECT id, d, sum(d) OVER (PARTITION BY {keys} ORDER BY t, d, k1, k2
                                       ROWS UNBOUNDED PRECEDING) AS open_after
            FROM ev
        )
        SELECT id, CAST(open_after - 1 AS INTEGER) AS depth FROM run WHERE d = 1
        """
    )
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _nest AS
        WITH x AS (
            SELECT t.{id_col} AS id, {key_select}, t.start_ns, t.end_ns,
                   dd.depth
            FROM {table} t JOIN _depth dd ON dd.id = t.{id_col}
        )
        SELECT c.id, c.depth, p.id AS parent_id
        FROM x c ASOF LEFT JOIN x p
          ON {key_match} AND p.depth = c.depth - 1 AND c.start_ns >= p.start_ns
        """
    )
    con.execute(
        f"""
        UPDATE {table} SET depth = n.depth, parent_id = n.parent_id
        FROM _nest n WHERE {table}.{id_col} = n.id
        """
    )
    con.execute("DROP TABLE _depth")
    con.execute("DROP TABLE _nest")
