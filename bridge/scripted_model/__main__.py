"""``python -m bridge.scripted_model [--port N] [-v]``: run the scripted model on 127.0.0.1."""

from __future__ import annotations

import contextlib
import functools
import logging
import sys

import click
import trio

from .server import ScriptedModel, serve_scripted_model


async def _serve(port: int) -> None:
    async with trio.open_nursery() as nursery:
        model: ScriptedModel = await nursery.start(
            functools.partial(serve_scripted_model, port=port)
        )
        print(f"listening on {model.base_url}", file=sys.stderr, flush=True)


@click.command()
@click.option("--port", type=int, default=0, show_default=True, help="TCP port (0: any free one).")
@click.option("-v", "--verbose", count=True, help="-v logs each request, -vv also its body.")
def main(port: int, verbose: int) -> None:
    """Serve a scripted Responses-API model for Codex on 127.0.0.1 until interrupted."""
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(_serve, port)


if __name__ == "__main__":
    main()
