"""The backends, one class each (:mod:`.dialect` says what they share and how they may
differ), named in one registry (:mod:`.registry`). This file imports nothing."""
