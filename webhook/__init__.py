"""corral's mutating admission webhook."""
