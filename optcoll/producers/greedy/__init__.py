"""Greedy synthesizers: TACOS's event-driven link–chunk matching (``engine``) and our improved
variant tacos+ (``plus``), both on spread problems (``optcoll.producers.spread``). Run them by
name through ``optcoll.producers.registry``, which also has ``best_of`` for seeded repeats."""
from optcoll.producers.greedy.engine import Engine, spread_greedy
from optcoll.producers.greedy.plus import PlusEngine, spread_plus

__all__ = ["Engine", "PlusEngine", "spread_greedy", "spread_plus"]
