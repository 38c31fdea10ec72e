"""The study's loop: the default first, then sampled configs up the fidelity ladder, within the budget, on workers."""
