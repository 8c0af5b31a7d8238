"""A run of several ranks read together: one aligned clock, stragglers, imbalance.

Each rank is ingested and analysed on its own (its own DuckDB file, the single-trace
analyzers unchanged); what the cross-rank analyses need is a compact extract of each rank
(``extract.RankExtract``: its collectives, the work before each, per-rank metrics and
operator totals), so a job's memory is bounded by the ranks in flight, not by the job.
"""
