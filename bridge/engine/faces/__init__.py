"""The protocol faces: how the engine's facts are written for an ACP v1 or v2 client."""
