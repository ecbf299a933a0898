"""`infercost sim`: the simulated OpenAI-compatible endpoint (see CONTRACT.md)."""

from __future__ import annotations

import click

from infercost.sim.config import SimConfig, SimMode


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Bind address.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=9100,
    show_default=True,
    help="Port; 0 picks a free one (the startup line says which).",
)
@click.option(
    "--mode",
    type=click.Choice(["fixed"]),
    default="fixed",
    show_default=True,
    help="fixed: every token at exactly --ttft-ms, then every --itl-ms.",
)
@click.option(
    "--ttft-ms",
    type=click.FloatRange(min=0),
    default=50.0,
    show_default=True,
    help="Time from request arrival to the first content event.",
)
@click.option(
    "--itl-ms",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Time between consecutive content events.",
)
@click.option("--model", default="sim-model", show_default=True, help="Model id to serve.")
@click.option(
    "--max-tokens-default",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="Output tokens when a request gives no max_tokens.",
)
@click.option(
    "--error-rate",
    type=click.FloatRange(0.0, 1.0),
    default=0.0,
    show_default=True,
    help="Fraction of generation requests answered with HTTP 500.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for --error-rate.")
@click.option(
    "--max-concurrency",
    type=click.IntRange(min=1),
    default=None,
    help="Generate at most N requests at once; later ones queue before their first token.",
)
def sim(  # click passes options by keyword
    *,
    host: str,
    port: int,
    mode: SimMode,  # click.Choice guarantees one of SimMode's values
    ttft_ms: float,
    itl_ms: float,
    model: str,
    max_tokens_default: int,
    error_rate: float,
    seed: int,
    max_concurrency: int | None,
) -> None:
    """Serve a simulated OpenAI-compatible endpoint with known timings (test ground truth)."""
    # Imported here so that `infercost --help` does not pay for uvicorn and msgspec.
    from infercost.sim.server import serve

    try:
        config = SimConfig(
            host=host,
            port=port,
            mode=mode,
            ttft_ms=ttft_ms,
            itl_ms=itl_ms,
            model=model,
            max_tokens_default=max_tokens_default,
            error_rate=error_rate,
            seed=seed,
            max_concurrency=max_concurrency,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    serve(config)
