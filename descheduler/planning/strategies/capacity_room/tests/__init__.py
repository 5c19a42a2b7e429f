"""Tests of capacity_room, kept beside the code; pip does not install them."""
