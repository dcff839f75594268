"""`python -m ys.worker`: a delivery (ys.worker.delivery)."""

import sys

from ys.worker.delivery import main

sys.exit(main())
