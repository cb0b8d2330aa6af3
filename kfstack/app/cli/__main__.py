"""``python -m kfstack.app.cli``: the ``kfstack`` command, where its script is not installed."""

import sys

from kfstack.app.cli import main

sys.exit(main())
