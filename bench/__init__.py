"""``make bench``: Callgate's control-plane benchmarks on PostgreSQL, Redis and real workers."""
