"""One knob (or two) swept over a grid, every point measured with interleaved repeats."""
