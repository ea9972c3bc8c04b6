"""Benchmarks: figures measured on this machine (CPU time, memory, load average) and written
under reports/, never pass/fail. They sit above every layer they measure."""
