"""What a study stores, read back typed: every key (``attrs``), how a trial ended (``outcomes``), its trials and
runs (``trials``)."""
