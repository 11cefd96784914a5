import sys

from dlbench import warm
from dlbench.cli import main

if sys.argv[1:2] == [warm.SERVE]:  # a warm parent, started by `dlbench run` (warm.py)
    warm.serve(sys.argv[2:], job=main)
else:
    sys.exit(main())
