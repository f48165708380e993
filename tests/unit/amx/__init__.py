"""Tests of fastvlm.amx (the AMX probe and its decisions)."""
