"""Proof before belief: interleaved repeats, the study's verdict, and which changes earned the gain."""
