"""APScheduler wiring (campaign starts, recurrence, the dispatch tick), the dispatcher
(claim, pace, send, record), pacing and retry policy."""
