"""``python -m tui.cli``: the same as the ``dsh`` console script."""

import sys

from tui.cli.commands import main

sys.exit(main())
