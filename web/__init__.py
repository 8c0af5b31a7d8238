"""The tracelens web service: upload traces, follow their ingestion, share findings."""
