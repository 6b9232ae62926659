"""``python -m evret_core.cli``: the same as the ``evret`` command."""

import sys

from evret_core.cli import main

sys.exit(main())
