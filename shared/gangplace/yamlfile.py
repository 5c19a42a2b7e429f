"""Reading a YAML file a user wrote, with one-line errors that say where it went wrong.

PyYAML's own messages span several lines and quote the parser's internals; an admin
reading a crash-looping pod's log wants the file, the line and the column.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

__all__ = ["YamlFileError", "read_yaml", "yaml_problem"]


class YamlFileError(ValueError):
    """The file cannot be read, or is not YAML; the message says which and where."""


def yaml_problem(e: yaml.YAMLError) -> str:
    """``line L, column C: what`` (1-based) from a PyYAML error."""
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    if mark is None:
        return problem
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"


def read_yaml(path: str | Path) -> Any:
    """The document in ``path`` (None for an empty file)."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as e:
        raise YamlFileError(e.strerror or str(e)) from None
    except UnicodeDecodeError as e:
        raise YamlFileError(f"not YAML: not UTF-8 text (byte {e.start})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise YamlFileError(f"not valid YAML: {yaml_problem(e)}") from None
