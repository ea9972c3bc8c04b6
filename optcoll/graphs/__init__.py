"""Graph algorithms on plain arrays that several layers share: the one automorphism finder of
coloured directed multigraphs, the one group closure, and the growth of a group in which only the
identity fixes an NPU (``automorphisms``). Machines and the exact solvers' problems describe
themselves as coloured graphs and lift what is found to their own links and chunks."""
