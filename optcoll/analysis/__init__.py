"""Analyses that put optcoll's ground truth next to what others compute, one package per concept:

* ``axonn``: AxoNN's 4D-parallel training model, its collectives costed with verified schedules;
* ``expect``: what busbw to expect from NCCL/RCCL, calibrated and physical, beside the optimum;
* ``tools``: other tools' own algorithms and predictions (ASTRA-sim, RCCL's MSCCL files) judged.
"""
