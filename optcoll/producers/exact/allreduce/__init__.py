"""The direct AllReduce model (issue 13): partial sums as contribution sets, copy and reduce
transfers, CP-SAT; one encoding for the timed model (epochs of a quantum) and the step model
(one round per step). Phases: ``problem`` (data) → ``encoding`` (variables, constraints,
objective) → ``solve`` (CP-SAT, hints) → ``transfers`` (decode to a schedule)."""
