"""Readers for topology descriptions other tools print (``nvidia-smi topo -m``, ...)."""
