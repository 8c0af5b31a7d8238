"""Table layouts of Nsight Systems SQLite exports, per era, for the synthetic writer.

``current`` copies the column lists of real nsys 2025.5-2026.1 exports (schema 3.24);
``legacy`` is an nsys 2020.x export: no version metadata table, GPU info in
``TARGET_INFO_CUDA_GPU`` keyed by ``deviceId``, no ``ENUM_*`` tables, and fewer columns
(no ``mangledName``, green contexts, graphs or clusters on kernels; NVTX text only in
``text``). Columns are written in each era's order and with its NOT NULL constraints, so
a reader that depends on a column's position or presence fails here as it would on a
user's file.
"""

from __future__ import annotations

Layout = dict[str, list[str]]

_KERNEL_2020 = [
    "start INTEGER NOT NULL",
    "end INTEGER NOT NULL",
    "deviceId INTEGER NOT NULL",
    "contextId INTEGER NOT NULL",
    "streamId INTEGER NOT NULL",
    "correlationId INTEGER",
    "globalPid INTEGER",
    "demangledName INTEGER NOT NULL",
    "shortName INTEGER NOT NULL",
    "launchType INTEGER",
    "cacheConfig INTEGER",
    "registersPerThread INTEGER NOT NULL",
    "gridX INTEGER NOT NULL",
    "gridY INTEGER NOT NULL",
    "gridZ INTEGER NOT NULL",
    "blockX INTEGER NOT NULL",
    "blockY INTEGER NOT NULL",
    "blockZ INTEGER NOT NULL",
    "staticSharedMemory INTEGER NOT NULL",
    "dynamicSharedMemory INTEGER NOT NULL",
    "localMemoryPerThread INTEGER NOT NULL",
    "localMemoryTotal INTEGER NOT NULL",
    "gridId INTEGER NOT NULL",
    "sharedMemoryExecuted INTEGER",
]

_KERNEL_CURRENT = [
    "start INTEGER NOT NULL",
    "end INTEGER NOT NULL",
    "deviceId INTEGER NOT NULL",
    "contextId INTEGER NOT NULL",
    "greenContextId INTEGER",
    "streamId INTEGER NOT NULL",
    "correlationId INTEGER",
    "globalPid INTEGER",
    "demangledName INTEGER NOT NULL",
    "shortName INTEGER NOT NULL",
    "mangledName INTEGER",
    "launchType INTEGER",
    "cacheConfig INTEGER",
    "registersPerThread INTEGER NOT NULL",
    "gridX INTEGER NOT NULL",
    "gridY INTEGER NOT NULL",
    "gridZ INTEGER NOT NULL",
    "blockX INTEGER NOT NULL",
    "blockY INTEGER NOT NULL",
    "blockZ INTEGER NOT NULL",
    "staticSharedMemory INTEGER NOT NULL",
    "dynamicSharedMemory INTEGER NOT NULL",
    "localMemoryPerThread INTEGER NOT NULL",
    "localMemoryTotal INTEGER NOT NULL",
    "gridId INTEGER NOT NULL",
    "sharedMemoryExecuted INTEGER",
    "graphNodeId INTEGER",
    "sharedMemoryLimitConfig INTEGER",
    "qmdBulkReleaseDone INTEGER",
    "qmdPreexitDone INTEGER",
    "qmdLastCtaDone INTEGER",
    "graphId INTEGER",
    "clusterX INTEGER",
    "clusterY INTEGER",
    "clusterZ INTEGER",
    "clusterSchedulingPolicy INTEGER",
    "maxPotentialClusterSize INTEGER",
    "maxActiveClusters INTEGER",
    "sharedMemoryRequestedPercentage INTEGER",
    "tensorSizeMinusOneElements TEXT NOT NULL",
]

_MEMCPY_2020 = [
    "start INTEGER NOT NULL",
    "end INTEGER NOT NULL",
    "deviceId INTEGER NOT NULL",
    "contextId INTEGER NOT NULL",
    "streamId INTEGER NOT NULL",
    "correlationId INTEGER",
    "globalPid INTEGER",
    "bytes INTEGER NOT NULL",
    "copyKind INTEGER NOT NULL",
    "deprecatedSrcId INTEGER",
    "srcKind INTEGER",
    "dstKind INTEGER",
    "srcDeviceId INTEGER",
    "srcContextId INTEGER",
    "dstDeviceId INTEGER",
    "dstContextId INTEGER",
    "migrationCause INTEGER",
]

_MEMCPY_CURRENT = [
    *_MEMCPY_2020[:4],
    "greenContextId INTEGER",
    *_MEMCPY_2020[4:],
    "graphNodeId INTEGER",
    "virtualAddress INTEGER",
    "copyCount INTEGER",
]

_MEMSET_2020 = [
    "start INTEGER NOT NULL",
    "end INTEGER NOT NULL",
    "deviceId INTEGER NOT NULL",
    "contextId INTEGER NOT NULL",
    "streamId INTEGER NOT NULL",
    "correlationId INTEGER",
    "globalPid INTEGER",
    "value INTEGER NOT NULL",
    "bytes INTEGER NOT NULL",
    "memKind INTEGER",
]

_MEMSET_CURRENT = [
    *_MEMSET_2020[:4],
    "greenContextId INTEGER",
    *_MEMSET_2020[4:9],
    "graphNodeId INTEGER",
    "memKind INTEGER",
]

_RUNTIME_2020 = [
    "start INTEGER NOT NULL",
    "end INTEGER NOT NULL",
    "eventClass INTEGER NOT NULL",
    "globalTid INTEGER",
    "correlationId INTEGER",
    "nameId INTEGER NOT NULL",
    "returnValue INTEGER NOT NULL",
]

_RUNTIME_CURRENT = [*_RUNTIME_2020, "callchainId INTEGER"]

_SYNC_2020 = [
    "start INTEGER NOT NULL",
    "end INTEGER NOT NULL",
    "deviceId INTEGER NOT NULL",
    "contextId INTEGER NOT NULL",
    "streamId INTEGER NOT NULL",
    "correlationId INTEGER",
    "globalPid INTEGER",
    "syncType INTEGER NOT NULL",
    "eventId INTEGER NOT NULL",
]

_SYNC_CURRENT = [
    *_SYNC_2020[:4],
    "greenContextId INTEGER",
    *_SYNC_2020[4:7],
    "deprecatedSyncType INTEGER",
    "syncType INTEGER NOT NULL",
    "eventId INTEGER NOT NULL",
    "eventSyncId INTEGER",
]

_NVTX_2020 = [
    "start INTEGER NOT NULL",
    "end INTEGER",
    "eventType INTEGER NOT NULL",
    "rangeId INTEGER",
    "category INTEGER",
    "color INTEGER",
    "text TEXT",
    "globalTid INTEGER",
    "endGlobalTid INTEGER",
    "domainId INTEGER",
]

_NVTX_CURRENT = [
    *_NVTX_2020[:9],
    "textId INTEGER",
    "domainId INTEGER",
    "uint64Value INTEGER",
    "int64Value INTEGER",
    "doubleValue REAL",
    "uint32Value INTEGER",
    "int32Value INTEGER",
    "floatValue REAL",
    "jsonTextId INTEGER",
    "jsonText TEXT",
]

_GPU_CURRENT = [
    "vmId INTEGER NOT NULL",
    "id INTEGER NOT NULL",
    "name TEXT",
    "busLocation TEXT",
    "isDiscrete INTEGER",
    "l2CacheSize INTEGER",
    "totalMemory INTEGER",
    "memoryBandwidth INTEGER",
    "clockRate INTEGER",
    "smCount INTEGER",
    "pwGpuId INTEGER",
    "uuid TEXT",
    "luid INTEGER",
    "chipName TEXT",
    "cuDevice INTEGER",
    "computeMajor INTEGER",
    "computeMinor INTEGER",
]

_GPU_2020 = [
    "deviceId INTEGER NOT NULL",
    "name TEXT",
    "busLocation TEXT",
    "totalGlobalMemory INTEGER",
    "numMultiprocessors INTEGER",
    "numThreadsPerWarp INTEGER",
    "maxWarpsPerMultiprocessor INTEGER",
    "coreClockRate INTEGER",
    "maxIPC INTEGER",
    "computeCapabilityMajor INTEGER",
    "computeCapabilityMinor INTEGER",
]

_COMMON: Layout = {
    "StringIds": ["id INTEGER NOT NULL PRIMARY KEY", "value TEXT NOT NULL"],
    "ThreadNames": ["nameId INTEGER NOT NULL", "priority INTEGER", "globalTid INTEGER"],
    "PROCESSES": ["globalPid INTEGER", "pid INTEGER", "name TEXT"],
}

_ENUM = ["id INTEGER NOT NULL PRIMARY KEY", "name TEXT", "label TEXT"]

LAYOUTS: dict[str, Layout] = {
    "current": {
        **_COMMON,
        "META_DATA_EXPORT": ["name TEXT NOT NULL", "value TEXT"],
        "TARGET_INFO_GPU": _GPU_CURRENT,
        "TARGET_INFO_SYSTEM_ENV": [
            "devStateName TEXT NOT NULL",
            "name TEXT NOT NULL",
            "nameEnum INTEGER NOT NULL",
            "value TEXT NOT NULL",
        ],
        "TARGET_INFO_SESSION_START_TIME": [
            "utcEpochNs INTEGER",
            "utcTime TEXT",
            "localTime TEXT",
            "systemClockNs INTEGER",
        ],
        "CUPTI_ACTIVITY_KIND_KERNEL": _KERNEL_CURRENT,
        "CUPTI_ACTIVITY_KIND_MEMCPY": _MEMCPY_CURRENT,
        "CUPTI_ACTIVITY_KIND_MEMSET": _MEMSET_CURRENT,
        "CUPTI_ACTIVITY_KIND_RUNTIME": _RUNTIME_CURRENT,
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": _SYNC_CURRENT,
        "NVTX_EVENTS": _NVTX_CURRENT,
        "ENUM_CUDA_MEMCPY_OPER": _ENUM,
        "ENUM_CUDA_MEM_KIND": _ENUM,
        "ENUM_CUPTI_SYNC_TYPE": _ENUM,
        "ENUM_NSYS_EVENT_TYPE": _ENUM,
        "ENUM_NSYS_EVENT_CLASS": _ENUM,
    },
    "legacy": {
        **_COMMON,
        "TARGET_INFO_CUDA_GPU": _GPU_2020,
        "CUPTI_ACTIVITY_KIND_KERNEL": _KERNEL_2020,
        "CUPTI_ACTIVITY_KIND_MEMCPY": _MEMCPY_2020,
        "CUPTI_ACTIVITY_KIND_MEMSET": _MEMSET_2020,
        "CUPTI_ACTIVITY_KIND_RUNTIME": _RUNTIME_2020,
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": _SYNC_2020,
        "NVTX_EVENTS": _NVTX_2020,
    },
}

# What each era writes in its metadata table (none for legacy).
EXPORT_META = {
    "current": {
        "EXPORT_PRODUCT_NAME": "NVIDIA Nsight Systems",
        "EXPORT_PRODUCT_VERSION": "2026.1.3.425",
        "EXPORT_SCHEMA_VERSION": "3.24.18",
    },
    "legacy": {},
}


def column_names(schema: str, table: str) -> list[str]:
    return [c.split()[0] for c in LAYOUTS[schema][table]]
