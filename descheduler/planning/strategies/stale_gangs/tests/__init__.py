"""Tests of the release of stale gangs, kept beside the code; pip does not install them."""
