"""The training CLI: ``python -m attention_core.models TASK [--threads N] [--steps N] [--out DIR]``
(see ``recipes``)."""
import sys

from .recipes import main

if __name__ == "__main__":
    sys.exit(main())
