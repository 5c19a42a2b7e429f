import sys
from pathlib import Path

# Test helpers (tests/helpers.py and test servers) are imported as plain modules.
sys.path.insert(0, str(Path(__file__).parent))
