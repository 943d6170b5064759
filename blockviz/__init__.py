"""blockviz — step through vLLM's KV-cache block manager, rendered from a live one."""
__version__ = "0.1.0"
