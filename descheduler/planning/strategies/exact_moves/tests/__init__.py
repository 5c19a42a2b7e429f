"""Tests of the exact moves, kept beside the code; pip does not install them."""
