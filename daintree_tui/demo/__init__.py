"""The built-in demo: a throwaway repository and an agent that needs no API key."""
