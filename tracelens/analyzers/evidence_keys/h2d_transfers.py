"""The evidence of ``h2d_transfers`` findings (:mod:`tracelens.analyzers.h2d_transfers`)."""

from __future__ import annotations

from tracelens.analyzers.evidence_keys.model import (
    BYTES,
    COUNT,
    GBPS,
    NS,
    OBJECT,
    PCT,
    ROWS,
    TEXT,
    AnalyzerEvidence,
    Key,
    Kind,
)

_COPY_KINDS = ("pageable", "pageable_dtoh", "small_copies", "not_overlapped")


_SITE_ROWS = (
    Key(
        "call_site",
        TEXT,
        "The operator that made the copy, else its runtime call, else `(unknown)`",
    ),
    Key("copies", COUNT, "Copies from that site"),
    Key("bytes", BYTES, "Their bytes"),
    Key("ns", NS, "Their summed duration"),
)


_PAGEABLE = (
    Key("direction", TEXT, "The copies' direction", choices=("HtoD", "DtoH")),
    Key("pageable_copies", COUNT, "Copies of this direction with a pageable host side"),
    Key("pageable_bytes", BYTES, "Their bytes"),
    Key(
        "pageable_ns",
        NS,
        "Their summed duration, less `module_load_ns`",
    ),
    Key(
        "module_load_ns",
        NS,
        "Time of these copies' records during which the driver loaded a module "
        "(`cuLibraryLoad*`, `cuModuleLoad*`, `hipModuleLoad*` calls): the copy waited on "
        "the load, not the link; 0 where none overlapped",
    ),
    Key(
        "pinned_estimate_ns",
        NS,
        "The same copies with a pinned host side: bytes at the link's achievable rate plus "
        "`h2d_copy_latency_ns` per copy (`pageable_ns` minus the impact)",
    ),
    Key(
        "pageable_call_sites",
        ROWS,
        "These copies by call site, up to 5 by copy time",
        fields=_SITE_ROWS,
    ),
)

EVIDENCE = AnalyzerEvidence(
    "h2d_transfers",
    "Explicit copies between host and GPU, each copy's time counted once across pinning, "
    "batching and overlap; unified-memory migrations in a finding of their own",
    keys=(
        Key(
            "totals",
            OBJECT,
            "Every explicit copy of the trace in the finding's direction: HtoD, DtoH in the DtoH "
            "pageable finding",
            only=_COPY_KINDS,
            fields=(
                Key("copies", COUNT, "The copies"),
                Key("bytes", BYTES, "Their bytes"),
                Key("time_ns", NS, "Their summed duration"),
                Key(
                    "module_load_ns",
                    NS,
                    "Time of their records during which the driver loaded a module",
                ),
                Key(
                    "achieved_gbps",
                    GBPS,
                    "`bytes` / (`time_ns` - `module_load_ns`): the link's rate, as in the titles",
                    null="the copies took no time outside module loads",
                ),
                Key("pageable_bytes", BYTES, "Bytes copied from or into pageable host memory"),
                Key("pageable_share_pct", PCT, "`pageable_bytes` as a share of `bytes`"),
                Key("exposed_ns", NS, "Copy time during which no kernel ran on the same GPU"),
                Key(
                    "host_blocking_copies",
                    COUNT,
                    "Copies whose runtime call blocked the host (host_copies.host_blocking)",
                ),
            ),
        ),
        Key(
            "call_sites",
            ROWS,
            "The copies (HtoD, DtoH in the DtoH pageable finding) by call site, up to 5 by copy "
            "time",
            only=_COPY_KINDS,
            fields=_SITE_ROWS,
        ),
        Key(
            "repeated_sizes",
            ROWS,
            "Copy sizes (HtoD, DtoH in the DtoH pageable finding) repeated at least "
            "`h2d_repeat_min_count` times, up to 5 by copy time (often the same tensor copied "
            "every step)",
            only=_COPY_KINDS,
            fields=(
                Key("bytes", BYTES, "The size of each copy"),
                Key("copies", COUNT, "Copies of that size"),
                Key("ns", NS, "Their summed duration"),
            ),
        ),
        Key(
            "host_link",
            OBJECT,
            "The host link the estimates assume",
            only=_COPY_KINDS,
            fields=(
                Key(
                    "link",
                    TEXT,
                    "PCIe generation and width or NVLink-C2C, or `configured` "
                    "(threshold `h2d_pinned_gbps`)",
                ),
                Key("achievable_gbps", GBPS, "Pinned-copy bandwidth assumed per direction"),
                Key("basis", TEXT, "Why that link: the GPU it was inferred from, or the threshold"),
            ),
        ),
    ),
    kinds=(
        Kind(
            "pageable",
            "Host-to-device copies from pageable memory, against pinned copies of the same bytes",
            "direction",
            "HtoD",
            keys=_PAGEABLE,
        ),
        Kind(
            "pageable_dtoh",
            "Device-to-host copies into pageable memory, against pinned copies of the same bytes",
            "direction",
            "DtoH",
            keys=_PAGEABLE,
        ),
        Kind(
            "small_copies",
            "Many host-to-device copies below `h2d_small_copy_bytes`: per-copy latency",
            "small_copies",
            keys=(
                Key("small_copies", COUNT, "HtoD copies below `h2d_small_copy_bytes`"),
                Key("small_bytes", BYTES, "Their bytes"),
                Key("small_ns", NS, "Their summed duration"),
            ),
        ),
        Kind(
            "not_overlapped",
            "Host-to-device copy time with no kernel running on the GPU",
            "exposed_after_pinning_and_batching_ns",
            keys=(
                Key(
                    "exposed_after_pinning_and_batching_ns",
                    NS,
                    "HtoD copy time with no kernel running, less what pinning and batching "
                    "already save (the finding's subject)",
                ),
                Key(
                    "hideable_ns",
                    NS,
                    "The part of it overlap can hide: at most the copy devices' kernel time "
                    "(merged) that HtoD copies do not overlap already; the impact",
                ),
            ),
        ),
        Kind(
            "uvm",
            "Unified-memory migrations, counted apart from explicit copies",
            "by_kind",
            keys=(
                Key(
                    "by_kind",
                    ROWS,
                    "The migrations by direction",
                    fields=(
                        Key(
                            "kind",
                            TEXT,
                            "Direction (memcpys.kind)",
                            choices=("UVM_HtoD", "UVM_DtoH", "UVM_DtoD"),
                        ),
                        Key("n", COUNT, "Migrations"),
                        Key("bytes", BYTES, "Their bytes"),
                        Key("ns", NS, "Their summed duration"),
                    ),
                ),
                Key(
                    "span_ns",
                    NS,
                    "From the first migration's start to the last one's end: how long the "
                    "traffic lasted (the summed durations in `by_kind` are copying time)",
                ),
                Key(
                    "faulting_kernels",
                    ROWS,
                    "Kernels that ran while pages migrated to the device, up to 5 by stalled time",
                    when="a host-to-device migration overlapped a kernel (the impact is then "
                    "their stalled time)",
                    fields=(
                        Key("name", TEXT, "Kernel name"),
                        Key("migrations", COUNT, "Migrations that overlapped its launches"),
                        Key("bytes", BYTES, "Their bytes"),
                        Key("launches", COUNT, "Its launches overlapped by a migration"),
                        Key(
                            "stalled_ns",
                            NS,
                            "Per launch, its time beyond its migrated bytes at the GPU's memory "
                            "bandwidth (at least `copying_ns`, at most its kernel time), summed: "
                            "how long it waited on page faults",
                        ),
                        Key(
                            "copying_ns",
                            NS,
                            "Its time covered by migrations (at most its kernel time)",
                        ),
                        Key("kernel_ns", NS, "Kernel time of those launches"),
                    ),
                ),
                Key(
                    "undone_prefetch",
                    OBJECT,
                    "A prefetch the host undid: managed memory moved back to the host after the "
                    "first prefetch call and before the first kernel after it",
                    when="a prefetch call ran and migrations to the host followed it before "
                    "the kernel",
                    fields=(
                        Key(
                            "call", TEXT, "The prefetch call (`cudaMemPrefetchAsync`, HIP, driver)"
                        ),
                        Key("calls", COUNT, "How many prefetch calls the trace records"),
                        Key("migrations", COUNT, "Migrations to the host between them"),
                        Key("bytes", BYTES, "Their bytes"),
                    ),
                ),
                Key(
                    "to_host_split",
                    OBJECT,
                    "The migrations to the host by when they started against the faulting "
                    "kernels (every launch that ran while pages migrated to the device, as "
                    "in `faulting_kernels`)",
                    when="a kernel faulted and migrations went to the host",
                    fields=(
                        Key(
                            "before_migrations",
                            COUNT,
                            "Before the first faulting kernel started: host code touched "
                            "managed memory the GPU already had, which the kernels then fault "
                            "in again (avoidable)",
                        ),
                        Key("before_bytes", BYTES, "Their bytes"),
                        Key(
                            "during_migrations",
                            COUNT,
                            "From then until the last faulting kernel ended: host access "
                            "between launches, or pages evicted from the GPU",
                        ),
                        Key("during_bytes", BYTES, "Their bytes"),
                        Key(
                            "after_migrations",
                            COUNT,
                            "After the last faulting kernel ended: the host reading the "
                            "results (expected)",
                        ),
                        Key("after_bytes", BYTES, "Their bytes"),
                    ),
                ),
            ),
        ),
    ),
)
