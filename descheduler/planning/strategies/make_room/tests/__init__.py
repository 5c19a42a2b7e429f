"""Tests of make_room and its parts, kept beside the code; pip does not install them."""
