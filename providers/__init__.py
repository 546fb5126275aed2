"""Provider adapters: the only code that knows any provider's JSON. Imports nothing of Callgate."""
