"""What runs on the driver: the run loop, the keys of a run's work, dataset stages' phases,
stats, resume checks, the lock, verify and gc."""
