"""Where things are: the repository, bench/, its output directory, the model virtualenv and the CLI."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
ROOT = BENCH.parent
OUT = BENCH / "out"
MODEL_PYTHON = BENCH / ".venv" / "bin" / "python"  # bench/setup_model_env.sh makes it
CRANFIELD = ROOT.parent / "shared" / "eval" / "cranfield"  # beside the checkout; each script takes --data
KNOWLEDGE = str(Path(sys.executable).with_name("knowledge"))  # the console script beside this interpreter
