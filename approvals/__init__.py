"""Human decisions on parked tool calls: requests, decisions, expiry, and the console."""
