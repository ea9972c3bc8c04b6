"""``optcoll expect``: per message size, the physical bound, the best verified schedule and NCCL's
own choice in the calibrated model, and a measurement when one is given (docs/model.md §8)."""
