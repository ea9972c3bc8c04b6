"""``python -m optcoll`` is the ``optcoll`` command."""
from optcoll.cli.main import main

main()
