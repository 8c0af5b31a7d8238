"""The core model: trace database access, findings, thresholds, units, kernel kinds."""
