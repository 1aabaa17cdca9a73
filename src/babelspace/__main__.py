import sys

from babelspace.cli import main

sys.exit(main())
