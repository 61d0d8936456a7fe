"""Tests of rdpest; the layout mirrors the package."""
