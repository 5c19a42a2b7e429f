"""The pure admission function (moved here whole; split by job next)."""

from .workloads import API_VERSION, AdmitResult, ReviewError, admit, decode_patch

__all__ = ["API_VERSION", "AdmitResult", "ReviewError", "admit", "decode_patch"]
