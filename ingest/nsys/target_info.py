"""What an Nsight Systems export says about the machine and itself, as canonical facts.

Export metadata (``META_DATA_EXPORT`` from nsys 2023.3, ``EXPORT_META_DATA`` in
2022.1-2023.2, none before), the GPUs (``TARGET_INFO_GPU``, or ``TARGET_INFO_CUDA_GPU``
keyed by ``deviceId`` in 2020.x; only those that ran work become ``devices``), the host
name, the session's start, and the names of the threads and processes that did work.
"""

from __future__ import annotations

import sqlite3

import duckdb

from ingest.nsys.sqlite_names import as_text, first_column
from ingest.schema import active_device_ids, set_info


def export_meta(src: sqlite3.Connection, tables: dict[str, set[str]]) -> dict[str, str]:
    # META_DATA_EXPORT from nsys 2023.3; EXPORT_META_DATA in 2022.1-2023.2; none before.
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if {"name", "value"} <= tables.get(table, set()):
            return {str(k): str(v) for k, v in src.execute(f"SELECT name, value FROM {table}")}
    return {}


def target_gpus(src: sqlite3.Connection, tables: dict[str, set[str]]) -> dict[int, tuple]:
    """GPU id -> (name, sm_count, total_memory_bytes, compute_capability)."""
    for table in ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU"):
        cols = tables.get(table) or set()
        # 2020.x keyed TARGET_INFO_CUDA_GPU by deviceId and spelled its columns differently.
        key = first_column(cols, "id", "deviceId")
        if key == "NULL":
            continue
        name = first_column(cols, "name")
        sms = first_column(cols, "smCount", "numMultiprocessors")
        mem = first_column(cols, "totalMemory", "totalGlobalMemory", "globalMemorySize")
        major = first_column(cols, "computeMajor", "computeCapabilityMajor", "smMajor")
        minor = first_column(cols, "computeMinor", "computeCapabilityMinor", "smMinor")
        out = {}
        for gid, n, s, m, ma, mi in src.execute(
            f"SELECT {key}, {name}, {sms}, {mem}, {major}, {minor} FROM {table}"
        ):
            if gid is None:
                continue
            cc = f"{ma}.{mi}" if ma is not None and mi is not None else None
            out[int(gid)] = (as_text(n), s, m, cc)
        return out
    return {}


def cuda_device_map(src: sqlite3.Connection, tables: dict[str, set[str]]) -> dict[int, int]:
    """CUDA device ordinal -> TARGET_INFO_GPU id, where the export says so unambiguously."""
    if not {"gpuId", "cudaId"} <= tables.get("TARGET_INFO_CUDA_DEVICE", set()):
        return {}
    pairs = set(src.execute("SELECT DISTINCT cudaId, gpuId FROM TARGET_INFO_CUDA_DEVICE"))
    by_cuda: dict[int, set[int]] = {}
    for cuda_id, gpu_id in pairs:
        if cuda_id is not None and gpu_id is not None:
            by_cuda.setdefault(int(cuda_id), set()).add(int(gpu_id))
    return {c: next(iter(g)) for c, g in by_cuda.items() if len(g) == 1}


def _system_env(src: sqlite3.Connection, tables: dict[str, set[str]], name: str) -> str | None:
    """One value of ``TARGET_INFO_SYSTEM_ENV`` (the host as Nsight saw it), as text."""
    if not {"name", "value"} <= tables.get("TARGET_INFO_SYSTEM_ENV", set()):
        return None
    row = src.execute(
        "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = ? LIMIT 1", [name]
    ).fetchone()
    return as_text(row[0]) if row else None


def hostname(src: sqlite3.Connection, tables: dict[str, set[str]]) -> str | None:
    return _system_env(src, tables, "Hostname")


def host_cpu(src: sqlite3.Connection, tables: dict[str, set[str]]) -> str | None:
    """The host CPU's model (``CpuDescription``): it can cap the GPU's PCIe link."""
    return (_system_env(src, tables, "CpuDescription") or "").strip() or None


def host_kernel(src: sqlite3.Connection, tables: dict[str, set[str]]) -> str | None:
    """The host's OS kernel release (``SoftwareReleaseVersion``): a ``…-microsoft-standard-WSL2``
    host runs the GPU through the Windows driver, which has no persistence mode."""
    return (_system_env(src, tables, "SoftwareReleaseVersion") or "").strip() or None


# Process names (Linux's 15-character comm) that keep the NVIDIA driver loaded between
# processes: the persistence daemon, or a display server drawing through the driver's DRM
# module (its ``nvidia-drm/timeline-*`` kernel threads run only while a client uses it).
_PERSISTENCE_DAEMON = "nvidia-persiste"
_DISPLAY_SERVERS = ("Xorg", "Xwayland", "gnome-shell", "kwin_wayland", "kwin_x11", "sway")


def driver_kept_loaded(src: sqlite3.Connection, tables: dict[str, set[str]]) -> str | None:
    """What kept the NVIDIA driver loaded while the export was recorded, from the host's
    process list (``PROCESSES``, which a system-wide capture fills), else None: with the
    driver loaded, a program's first CUDA call pays its own context's creation, which
    persistence mode does not remove."""
    if "name" not in tables.get("PROCESSES", set()):
        return None
    names = {as_text(r[0]) or "" for r in src.execute("SELECT DISTINCT name FROM PROCESSES")}
    if any(n.startswith(_PERSISTENCE_DAEMON) for n in names):
        return "nvidia-persistenced runs"
    servers = sorted(n for n in names if n in _DISPLAY_SERVERS)
    if servers and any(n.startswith("nvidia-drm/") for n in names):
        return f"a display server runs on it ({', '.join(servers)})"
    return None


def session_start_utc(src: sqlite3.Connection, tables: dict[str, set[str]]) -> str | None:
    if "utcTime" not in tables.get("TARGET_INFO_SESSION_START_TIME", set()):
        return None
    row = src.execute("SELECT utcTime FROM TARGET_INFO_SESSION_START_TIME LIMIT 1").fetchone()
    return as_text(row[0]) if row else None


def load_threads(
    src: sqlite3.Connection, con: duckdb.DuckDBPyConnection, tables: dict[str, set[str]]
) -> None:
    threads: dict[tuple[int, int], str | None] = {}
    if {"nameId", "globalTid"} <= tables.get("ThreadNames", set()):
        strings = dict(
            con.execute(
                "SELECT id, value FROM _nsys_strings WHERE id IN (SELECT UNNEST(?::BIGINT[]))",
                [[r[0] for r in src.execute("SELECT DISTINCT nameId FROM ThreadNames")]],
            ).fetchall()
        )
        for name_id, g in src.execute("SELECT nameId, globalTid FROM ThreadNames"):
            if g is not None:
                threads[((g >> 24) & 0xFFFFFF, g & 0xFFFFFF)] = strings.get(name_id)
    processes: dict[int, str] = {}
    if {"pid", "name"} <= tables.get("PROCESSES", set()):
        for pid, name in src.execute("SELECT pid, name FROM PROCESSES"):
            if pid is not None and name is not None:
                processes[int(pid)] = as_text(name) or ""
    # Only threads and processes that did something the analysis sees: a system-wide
    # capture lists every process on the host.
    active = {
        (r[0], r[1])
        for r in con.execute(
            """SELECT DISTINCT pid, tid FROM (
                 SELECT pid, tid FROM api_calls UNION ALL SELECT pid, tid FROM ranges
                 UNION ALL SELECT pid, tid FROM syncs)
               WHERE pid IS NOT NULL AND tid IS NOT NULL"""
        ).fetchall()
    }
    rows = []
    for pid, tid in sorted(active):
        rows.append((pid, tid, processes.get(pid), threads.get((pid, tid))))
    if rows:
        con.executemany("INSERT INTO threads VALUES (?, ?, ?, ?)", rows)


def insert_devices(
    con: duckdb.DuckDBPyConnection, gpus: dict[int, tuple], cuda_to_gpu: dict[int, int]
) -> None:
    active = active_device_ids(con)
    used: set[int] = set()
    rows = []
    for dev in active:
        gid = cuda_to_gpu.get(dev, dev)
        info = gpus.get(gid)
        if info is None:
            rows.append((dev, None, None, None, None))
            continue
        used.add(gid)
        rows.append((dev, *info))
    if rows:
        con.executemany("INSERT INTO devices VALUES (?, ?, ?, ?, ?)", rows)
    idle = sorted(set(gpus) - used)
    if idle:
        set_info(con, {"host_gpus_without_work": ", ".join(f"{i}: {gpus[i][0]}" for i in idle)})
