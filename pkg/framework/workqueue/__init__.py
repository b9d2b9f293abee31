"""The workqueue (de-duplicating, delaying, rate-limited) and its rate limiters (client-go's)."""
