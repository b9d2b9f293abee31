"""Services of the DRA stack: pure logic that handlers call (allocation first)."""
