"""The network policy of sandboxes (issue 11, item 4)."""
