import sys

from curate.cli import main

sys.exit(main())
