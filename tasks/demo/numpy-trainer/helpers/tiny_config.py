"""Write a minimal-size training config for train.py: the kind of file the paper's harness
generated per repository (benchmark_scripts/) to run an entrypoint at one step, one batch.

    python tiny_config.py OUT.json   # reads the repository's configs/default.json, writes OUT.json
"""

import json
import sys
from pathlib import Path

config = json.loads(Path("configs/default.json").read_text())
config.update(n_samples=8)  # a handful of samples: enough for a loss, nothing to wait for
out = Path(sys.argv[1])
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps(config))
print(f"tiny config: {out}")
