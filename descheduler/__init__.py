"""corral's gang-aware defragmenting descheduler."""
