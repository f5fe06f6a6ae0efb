"""Model providers: the real OpenAI-compatible adapter and the scripted one."""
