"""The kubectl plugin (kubectl_corral)."""
