"""Test fixtures."""
