"""Crossings to other libraries of the ecosystem."""
