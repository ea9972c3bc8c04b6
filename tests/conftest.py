"""Root of the test tree: with pytest's default import mode this puts ``tests/`` on sys.path, so
helpers shared by several test folders (``solver_checks``) are importable from all of them."""
