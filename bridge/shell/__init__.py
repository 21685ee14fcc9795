"""The thin trio layer around the engine: streams, processes, sockets."""
