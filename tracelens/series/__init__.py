"""Performance over time: the runs of one workload, recorded again and again.

:mod:`~tracelens.series.metrics` reads each run's headline numbers from its report,
:mod:`~tracelens.series.trend` finds the band of normal variation, the change points and
the one-run outliers, and :mod:`~tracelens.series.limits` judges the latest run against a
series' regression limits. All three are pure functions of reports and numbers: the web
service stores the series, the CLI prints them.
"""
