"""NCCL's algorithms as NCCL 2.30.7 runs them: ring channels, PAT, trees, NVLS, CollNet.

Classical baselines in the sense of docs/model.md §7 (producers judged by the shared verifier), read
from NCCL's source (github.com/NVIDIA/nccl at 5067397c); each module names the files it models.
"""
