"""Tests of defragment, kept beside the code; pip does not install them."""
