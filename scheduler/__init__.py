"""APScheduler wiring (campaign starts, recurrence, the dispatch tick), the dispatcher and
its jobs (claiming, sending, recording, sweeping), sender usage against the daily cap,
pacing, sending windows and the retry policy."""
