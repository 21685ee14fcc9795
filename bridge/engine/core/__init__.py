"""The core: the engine's wiring, the hub every feature shares, the thread records, work state and output queues."""
