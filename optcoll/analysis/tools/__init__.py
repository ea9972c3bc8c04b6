"""Other tools' own algorithms and predictions judged on optcoll's yardstick: ASTRA-sim's native
collectives next to optcoll's bound and schedules (``astra``), and a directory of MSCCL XML
algorithms such as RCCL's production set, each over the message range the runtime picks it for
(``rccl``)."""
