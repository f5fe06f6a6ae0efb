"""Durability: turns that survive a crash of the bot's process (an embedded SQLite journal)."""
