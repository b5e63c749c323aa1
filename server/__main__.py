"""``python -m fdcontrol.server …`` is the ``fdcontrol`` command (server/main.py)."""

import sys

from fdcontrol.server.main import main

sys.exit(main())
