"""``python -m gpuready.lab.kube_emulator``: run the simulated Kubernetes API until stopped."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
from pathlib import Path

from gpuready.lab.kube_emulator import Emulator, NodeSeed


def main() -> None:
    parser = argparse.ArgumentParser(description="gpuready's simulated Kubernetes API server (no containers run).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", type=Path, help="write the bound URL here once serving")
    parser.add_argument("--token-file", type=Path, help="require this bearer token")
    parser.add_argument("--nodes", type=Path, help='JSON list of {"name", "gpus", "gpu_product"}')
    parser.add_argument("--openshift", action="store_true", help="also serve security.openshift.io SCCs")
    parser.add_argument("--fail", default="", help="comma-separated faults to inject")
    parser.add_argument("--tick", type=float, default=0.2, help="seconds between controller steps")
    parser.add_argument("--cert", type=Path)
    parser.add_argument("--key", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    nodes = [NodeSeed(**n) for n in json.loads(args.nodes.read_text())] if args.nodes else None
    token = args.token_file.read_text().strip() if args.token_file else ""
    emulator = Emulator(openshift=args.openshift, token=token, tick=args.tick,
                        faults=[f for f in args.fail.split(",") if f], **({"nodes": nodes} if nodes else {}))
    ssl_context = None
    if args.cert:
        import ssl

        ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ssl_context.load_cert_chain(args.cert, args.key)

    async def serve() -> None:
        url = await emulator.start(args.host, args.port, ssl_context)
        logging.info("SIMULATED Kubernetes API serving on %s (nodes: %s)", url,
                     ", ".join(f"{n.name}={n.gpus} GPU" for n in emulator.nodes))
        if args.port_file:
            args.port_file.write_text(url + "\n")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
