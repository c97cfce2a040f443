"""``python -m pagefleet.cli``: the same as the ``pagefleet`` command."""

from pagefleet.cli import main

main()
