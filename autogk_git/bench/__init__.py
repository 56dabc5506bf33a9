"""Benchmarking: the job/result contract, stages, statistics and backends."""
